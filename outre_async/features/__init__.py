"""Feature rows from disk: the :class:`FeatureSource` contract, memory / pread / io_uring sources, backend
choice, staging arenas, the GNNDrive feature buffer, the tiers (GPU rows, static rows, buffer, source) that
wrap one another (``_tier``), and the disk probe (what a read costs on this device)."""

from ._backends import BACKENDS, Backend, detect_io_uring, open_source
from ._device_rows import DeviceRows
from ._disk_probe import DiskProbe, cached_probe, in_flight_for, probe_disk
from ._disk_source import FeatureFile, IOConfig
from ._feature_buffer import FeatureBuffer
from ._gpu_tier import DeviceFeatureCache, GpuTier
from ._make_tier import make_tier
from ._memory_source import MemorySource
from ._policies import EVICTION_POLICIES, PLANNED_POLICIES
from ._pread_source import PreadSource
from ._source import FeatureSource
from ._static_cache import StaticFeatureCache, StaticTier
from ._tier import TIERS, BufferTier, FeatureTier, SourceTier

__all__ = ["BACKENDS", "EVICTION_POLICIES", "PLANNED_POLICIES", "TIERS", "Backend", "BufferTier",
           "DeviceFeatureCache", "DeviceRows", "DiskProbe", "FeatureBuffer", "FeatureFile", "FeatureSource",
           "FeatureTier", "GpuTier", "IOConfig", "MemorySource", "PreadSource", "SourceTier", "StaticFeatureCache",
           "StaticTier", "cached_probe", "detect_io_uring", "in_flight_for", "make_tier", "open_source", "probe_disk"]
