"""outre-async: asyncio-native out-of-core GNN training on one machine with an SSD.

Importing the package is cheap (numpy only); names that need torch or numba are imported on first
use, so that tools like the partitioner never pay for torch.

Map of the package, one room (sub-package) per job; imports run down this list, never up (but for
``loader.profile``, resolved lazily from ``profiling`` where it was first published):
    cli, bench, trainer         the ``outre`` verbs; ``outre bench``; ``outre train`` (epochs, eval, checkpoints)
    distributed, profiling      torchrun and DDP; ``oa.profile`` and ``outre profile``
    loader                      OutreLoader: its LoaderSetup, sample and extract stages, delivery, memory plan
    plan                        profile counts, miss costs, the knapsack that splits one memory budget
    links, layerwise, pyg, nn   ``oa.evaluate_links``; ``oa.inference``; PyG's FeatureStore, GraphStore and sampler; the models
    features, partition, cache  feature sources and buffer; FENNEL (``partition/``); neighbour and history caches
    sampling, ingest            the neighbour sampler and epoch plans; importers and the generator
    aio, store                  channels, reorder buffer, loop thread, CPU meter; the on-disk dataset
    errors, _units, _rng        the error tree, byte sizes and memory, the one splitmix64
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import errors
from .errors import ConfigError, DatasetError, NotSupportedError, OutreError, SmallBufferWarning
from .store import Dataset, DatasetWriter, RowLayout, choose_row_layout, open_dataset

__version__ = "0.1.0"


def _lazy_attribute(package: str, table: dict[str, str], name: str) -> Any:
    """The body of a package's PEP 562 ``__getattr__`` (this one's and its subpackages'): ``name`` imported
    from the private module ``table`` names for it, on first use, and kept in the package's namespace so
    the next access is a plain lookup.  Why lazy: the CLI's parsers must not load torch or numba."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    setattr(sys.modules[package], name, value)
    return value


class _CheckoutSubpackages(importlib.abc.MetaPathFinder):
    """Finds ``outre_async.partition`` and ``outre_async.cache`` (those two names only) in the
    checkout's ``partition/`` and ``cache/``; their submodules are then found inside those folders."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def _map_checkout_subpackages() -> None:
    """Imported straight from a source checkout (``python -c`` at the repository root puts the
    working directory first on ``sys.path``, ahead of an installed copy), find ``partition/`` and
    ``cache/`` beside this folder, where the checkout keeps them; an install maps them inside
    (setuptools ``package-dir``), so an installed copy never takes this branch.  An editable install
    imports this same folder and resolves the same files either way.  One module spec per name, not
    the checkout root on ``__path__`` (which would make ``outre_async.tests``, ``.benchmarks`` and
    ``.docs`` importable too)."""
    here = Path(__file__).resolve().parent
    checkout = here.parent
    if (here / "partition").is_dir() or not (checkout / "pyproject.toml").is_file():
        return
    folders = {f"{__name__}.{name}": checkout / name for name in ("partition", "cache")
               if (checkout / name / "__init__.py").is_file()}
    if folders and not any(isinstance(f, _CheckoutSubpackages) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutSubpackages(folders))


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
    "split_edges": ".ingest",
    "recast": ".ingest",
    "PRESETS": ".ingest",
    "GeneratorConfig": ".ingest",
    "sample_neighbors": ".sampling",
    "NeighborSampler": ".sampling",
    "SampledSubgraph": ".sampling",
    "HeteroNeighborSampler": ".sampling",
    "SyncLoader": ".loader",
    "GraphSAGE": ".nn",
    "GCN": ".nn",
    "GAT": ".nn",
    "inference": ".layerwise",
    "evaluate_links": ".links",
    "HistoryConfig": ".cache",
    "HistoryRecord": ".loader",
    "MLP": ".nn",
    "with_history": ".nn",
    "OutreLoader": ".loader",
    "IOOptions": ".loader",
    "CacheOptions": ".loader",
    "PipelineOptions": ".loader",
    "RankOptions": ".loader",
    "PartitionOptions": ".loader",
    "profile": ".profiling",
    "OutreBatch": ".loader",
    "FeatureSource": ".features",
    "open_source": ".features",
    "detect_io_uring": ".features",
    "DiskProbe": ".features",
    "probe_disk": ".features",
    "cached_probe": ".features",
}

__all__ = [
    "errors",
    "ConfigError",
    "Dataset",
    "DatasetError",
    "DatasetWriter",
    "NotSupportedError",
    "OutreError",
    "RowLayout",
    "SmallBufferWarning",
    "choose_row_layout",
    "open_dataset",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name == "LoaderConfig":  # no longer passed in: the loader's resolved knobs, loader.config
        raise AttributeError("outre_async.LoaderConfig moved to outre_async.loader.LoaderConfig (what loader.config "
                             "holds); pass knobs as OutreLoader keywords and io=, cache=, pipeline=, ranks= objects")
    if name in errors.__all__:  # the error classes live in ``outre_async.errors`` (the top level keeps a few)
        raise AttributeError(f"outre_async.{name} moved: import it from outre_async.errors "
                             f"(from outre_async.errors import {name})")
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
