"""Feature rows from disk: the :class:`FeatureSource` contract, memory / pread / io_uring sources, backend
choice, staging arenas and the GNNDrive feature buffer."""

from ._backends import BACKENDS, Backend, detect_io_uring, open_source
from ._disk_source import FeatureFile, IOConfig
from ._feature_buffer import FeatureBuffer
from ._memory_source import MemorySource
from ._pread_source import PreadSource
from ._source import FeatureSource

__all__ = ["BACKENDS", "Backend", "FeatureBuffer", "FeatureFile", "FeatureSource", "IOConfig",
           "MemorySource", "PreadSource", "detect_io_uring", "open_source"]
