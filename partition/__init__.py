"""Out-of-core FENNEL partitioner and partition-based batch inputs (installed as ``outre_async.partition``).

Design §6.  ``partition(dataset, parts, ...)`` streams the CSC and writes ``partitions/<name>/``;
``open_partitions`` reads it back (validated against the dataset version); ``list_partitions``
summarises a dataset's partition folders; ``reorder`` writes a copy of the dataset renumbered so
each partition's nodes are contiguous.  Importing this package never imports torch.
"""

from outre_async.store._identity import dataset_identity

from ._api import default_name, partition
from ._batches import MicroBatch, group_seeds, plan_partition_epoch
from ._fennel import PartitionConfig
from ._reader import AdjacencyBlock, PartitionSet, list_partitions, open_partitions
from ._redundancy import redundancy_ratio
from ._reorder import reorder
from ._sampler import MacroStore, PartitionSampler

__all__ = [
    "AdjacencyBlock",
    "MacroStore",
    "MicroBatch",
    "PartitionConfig",
    "PartitionSampler",
    "PartitionSet",
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
