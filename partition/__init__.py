"""Out-of-core FENNEL partitioner and partition-based batch inputs (installed as ``outre_async.partition``).

Design §6.  Importing this package never imports torch.
"""

from ._fennel import PartitionConfig

__all__ = ["PartitionConfig"]
