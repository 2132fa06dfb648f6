"""Out-of-core FENNEL partitioner and partition-based batch inputs (installed as ``outre_async.partition``).

Design §6.  ``partition(dataset, parts, ...)`` streams the CSC and writes ``partitions/<name>/``;
``open_partitions`` reads it back (validated against the dataset version); ``list_partitions``
summarises a dataset's partition folders.  Importing this package never imports torch.
"""

from ._api import default_name, partition
from ._fennel import PartitionConfig
from ._output import dataset_identity
from ._reader import AdjacencyBlock, PartitionSet, list_partitions, open_partitions

__all__ = [
    "AdjacencyBlock",
    "PartitionConfig",
    "PartitionSet",
    "dataset_identity",
    "default_name",
    "list_partitions",
    "open_partitions",
    "partition",
]
