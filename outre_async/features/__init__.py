"""Feature rows from disk: the :class:`FeatureSource` contract, memory / pread / io_uring sources, staging
arenas and the GNNDrive feature buffer."""

from ._feature_buffer import FeatureBuffer
from ._sources import FeatureSource, detect_io_uring, open_source

__all__ = ["FeatureBuffer", "FeatureSource", "detect_io_uring", "open_source"]
