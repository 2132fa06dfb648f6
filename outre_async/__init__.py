"""outre-async: asyncio-native out-of-core GNN training on one machine with an SSD.

Importing the package is cheap (numpy only); names that need torch or numba are imported on first
use, so that tools like the partitioner never pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

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
from .store import Dataset, DatasetWriter, RowLayout, choose_row_layout, open_dataset

__version__ = "0.1.0"

# name -> private module that defines it; imported on first attribute access (PEP 562).
_LAZY = {
    "write_dataset": ".ingest",
    "convert": ".ingest",
    "from_pyg": ".ingest",
    "from_npz": ".ingest",
    "from_ogb": ".ingest",
    "from_edge_list": ".ingest",
    "generate": ".ingest",
    "PRESETS": ".ingest",
    "GeneratorConfig": ".ingest",
    "sample_neighbors": ".sampling",
    "NeighborSampler": ".sampling",
    "SampledSubgraph": ".sampling",
    "SyncLoader": ".loader",
    "GraphSAGE": ".nn",
    "MLP": ".nn",
    "OutreLoader": ".loader",
    "LoaderConfig": ".loader",
    "OutreBatch": ".loader",
    "FeatureSource": ".features",
    "open_source": ".features",
    "detect_io_uring": ".features",
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
