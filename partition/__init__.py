"""Out-of-core FENNEL partitioner and partition-based batch inputs (installed as ``outre_async.partition``).

Design §6.  ``partition(dataset, parts, ...)`` streams the CSC and writes ``partitions/<name>/``;
``open_partitions`` reads it back (validated against the dataset version); ``list_partitions``
summarises a dataset's partition folders; ``reorder`` writes a copy of the dataset renumbered so
each partition's nodes are contiguous.  Importing this package never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from outre_async import _lazy_attribute

if TYPE_CHECKING:  # the names as mypy and editors see them; at run time each is imported on first use
    from outre_async.store._identity import dataset_identity

    from ._api import default_name, partition
    from ._batches import SeedGroups, group_seeds, plan_partition_epoch
    from ._fennel import PartitionConfig
    from ._reader import AdjacencyBlock, PartitionSet, list_partitions, open_partitions
    from ._redundancy import redundancy_ratio
    from ._reorder import reorder
    from ._sampler import MacroStore, PartitionSampler

# name -> private module that defines it, imported on first attribute access (PEP 562): the CLI's
# parsers import ``partition._cli`` and ``outre info`` reads ``_reader``, neither of which may pay
# for numba's import and the kernels' loading before a verb runs (``benchmarks/bench_cli_startup.py``).
_LAZY = {
    "default_name": "._api",
    "partition": "._api",
    "group_seeds": "._batches",
    "plan_partition_epoch": "._batches",
    "PartitionConfig": "._fennel",
    "dataset_identity": "outre_async.store._identity",
    "AdjacencyBlock": "._reader",
    "PartitionSet": "._reader",
    "list_partitions": "._reader",
    "open_partitions": "._reader",
    "redundancy_ratio": "._redundancy",
    "reorder": "._reorder",
    "MacroStore": "._sampler",
    "PartitionSampler": "._sampler",
    "SeedGroups": "._batches",
}

__all__ = [
    "AdjacencyBlock",
    "MacroStore",
    "PartitionConfig",
    "PartitionSampler",
    "PartitionSet",
    "SeedGroups",
    "dataset_identity",
    "default_name",
    "group_seeds",
    "list_partitions",
    "open_partitions",
    "partition",
    "plan_partition_epoch",
    "redundancy_ratio",
    "reorder",
]


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
