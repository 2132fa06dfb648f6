"""Feature rows from disk: the :class:`FeatureSource` contract, memory / pread / io_uring sources, backend
choice, staging arenas, the GNNDrive feature buffer, and the disk probe (what a read costs on this device)."""

from ._backends import BACKENDS, Backend, detect_io_uring, open_source
from ._disk_probe import DiskProbe, cached_probe, in_flight_for, probe_disk
from ._disk_source import FeatureFile, IOConfig
from ._feature_buffer import FeatureBuffer
from ._memory_source import MemorySource
from ._pread_source import PreadSource
from ._source import FeatureSource

__all__ = ["BACKENDS", "Backend", "DiskProbe", "FeatureBuffer", "FeatureFile", "FeatureSource", "IOConfig",
           "MemorySource", "PreadSource", "cached_probe", "detect_io_uring", "in_flight_for", "open_source",
           "probe_disk"]
