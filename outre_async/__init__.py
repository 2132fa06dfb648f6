"""outre-async: asyncio-native out-of-core GNN training on one machine with an SSD.

Importing the package is cheap (numpy only); names that need torch or numba are imported on first
use, so that tools like the partitioner never pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._dataset import Dataset, open_dataset
from ._errors import (
    ConfigError,
    DatasetCorruptError,
    DatasetError,
    DatasetExistsError,
    DatasetNotFoundError,
    ExtractorError,
    FormatVersionError,
    InputFormatError,
    InvalidGraphError,
    ManifestError,
    OutreError,
    PartitionCorruptError,
    PartitionError,
    PartitionExistsError,
    PartitionMismatchError,
    PartitionNotFoundError,
    PipelineClosed,
)
from ._layout import RowLayout, choose_row_layout
from ._writer import DatasetWriter

__version__ = "0.1.0"

# name -> private module that defines it; imported on first attribute access (PEP 562).
_LAZY = {
    "write_dataset": "._convert",
    "convert": "._convert",
    "from_pyg": "._convert",
    "from_npz": "._convert",
    "from_ogb": "._convert",
    "from_edge_list": "._convert",
    "generate": "._generate",
    "PRESETS": "._generate",
    "GeneratorConfig": "._generate",
    "sample_neighbors": "._sampler",
    "NeighborSampler": "._sampler",
    "SampledSubgraph": "._sampler",
    "SyncLoader": "._sync_loader",
    "GraphSAGE": ".nn",
    "MLP": ".nn",
    "OutreLoader": "._loader",
    "LoaderConfig": "._loader",
    "OutreBatch": "._batch",
    "FeatureSource": "._sources",
    "open_source": "._sources",
    "detect_io_uring": "._sources",
}

__all__ = [
    "ConfigError",
    "Dataset",
    "DatasetCorruptError",
    "DatasetError",
    "DatasetExistsError",
    "DatasetNotFoundError",
    "DatasetWriter",
    "ExtractorError",
    "FormatVersionError",
    "InputFormatError",
    "InvalidGraphError",
    "ManifestError",
    "OutreError",
    "PartitionCorruptError",
    "PartitionError",
    "PartitionExistsError",
    "PartitionMismatchError",
    "PartitionNotFoundError",
    "PipelineClosed",
    "RowLayout",
    "choose_row_layout",
    "open_dataset",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'outre_async' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
