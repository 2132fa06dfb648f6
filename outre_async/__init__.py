"""outre-async: asyncio-native out-of-core GNN training on one machine with an SSD.

Importing the package is cheap (numpy only); names that need torch or numba are imported on first
use, so that tools like the partitioner never pay for torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ._errors import (
    CheckpointError,
    CheckpointMismatchError,
    ConfigError,
    DatasetCorruptError,
    DatasetError,
    DatasetExistsError,
    DatasetNotFoundError,
    DatasetReadError,
    DistributedError,
    ExtractorError,
    FormatVersionError,
    HistoryError,
    InputFormatError,
    InvalidGraphError,
    ManifestError,
    NotSupportedError,
    OutreError,
    OverwriteRefusedError,
    PartitionCorruptError,
    PartitionError,
    PartitionExistsError,
    PartitionMismatchError,
    PartitionNotFoundError,
    PartitionReadError,
    PipelineClosed,
    ProfileCorruptError,
    ProfileError,
    ProfileMismatchError,
    ProfileNotFoundError,
    TooManyOpenFilesError,
)
from .store import Dataset, DatasetWriter, RowLayout, choose_row_layout, open_dataset

__version__ = "0.1.0"


def _map_checkout_subpackages() -> None:
    """Imported straight from a source checkout (``python -c`` at the repository root puts the
    working directory first on ``sys.path``, ahead of an installed copy), find ``partition/`` and
    ``cache/`` beside this folder, where the checkout keeps them; an install maps them inside
    (setuptools ``package-dir``), so an installed copy never takes this branch.  An editable install
    imports this same folder and resolves the same files either way."""
    here = Path(__file__).resolve().parent
    checkout = here.parent
    if not (here / "partition").is_dir() and (checkout / "partition" / "__init__.py").is_file() \
            and (checkout / "pyproject.toml").is_file():
        __path__.append(str(checkout))  # outre_async.partition -> <checkout>/partition, .cache likewise


_map_checkout_subpackages()

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
    "GCN": ".nn",
    "GAT": ".nn",
    "inference": ".layerwise",
    "HistoryConfig": ".cache",
    "MLP": ".nn",
    "OutreLoader": ".loader",
    "LoaderConfig": ".loader",
    "profile": ".loader",
    "OutreBatch": ".loader",
    "FeatureSource": ".features",
    "open_source": ".features",
    "detect_io_uring": ".features",
}

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "ConfigError",
    "Dataset",
    "DatasetCorruptError",
    "DatasetError",
    "DatasetExistsError",
    "DatasetNotFoundError",
    "DatasetReadError",
    "DatasetWriter",
    "DistributedError",
    "ExtractorError",
    "FormatVersionError",
    "HistoryError",
    "InputFormatError",
    "InvalidGraphError",
    "ManifestError",
    "NotSupportedError",
    "OutreError",
    "OverwriteRefusedError",
    "PartitionCorruptError",
    "PartitionError",
    "PartitionExistsError",
    "PartitionMismatchError",
    "PartitionNotFoundError",
    "PartitionReadError",
    "PipelineClosed",
    "ProfileCorruptError",
    "ProfileError",
    "ProfileMismatchError",
    "ProfileNotFoundError",
    "RowLayout",
    "TooManyOpenFilesError",
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
