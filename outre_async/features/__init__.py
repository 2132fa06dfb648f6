"""Feature rows from disk: the :class:`FeatureSource` contract, memory / pread / io_uring sources, backend
choice, staging arenas, the GNNDrive feature buffer, the tiers (GPU rows, static rows, buffer, source) that
wrap one another (``_tier``), and the disk probe (what a read costs on this device).

Names are imported on first use (PEP 562): the CLI's parsers read the registries (``_backend_names.BACKENDS``)
without loading numba's kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _lazy_attribute

if TYPE_CHECKING:  # the names as mypy and editors see them; at run time each is imported on first use
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

_LAZY = {
    "BACKENDS": "._backends",
    "Backend": "._backends",
    "detect_io_uring": "._backends",
    "open_source": "._backends",
    "DeviceRows": "._device_rows",
    "DiskProbe": "._disk_probe",
    "cached_probe": "._disk_probe",
    "in_flight_for": "._disk_probe",
    "probe_disk": "._disk_probe",
    "FeatureFile": "._disk_source",
    "IOConfig": "._disk_source",
    "FeatureBuffer": "._feature_buffer",
    "DeviceFeatureCache": "._gpu_tier",
    "GpuTier": "._gpu_tier",
    "make_tier": "._make_tier",
    "MemorySource": "._memory_source",
    "EVICTION_POLICIES": "._policies",
    "PLANNED_POLICIES": "._policies",
    "PreadSource": "._pread_source",
    "FeatureSource": "._source",
    "StaticFeatureCache": "._static_cache",
    "StaticTier": "._static_cache",
    "TIERS": "._tier",
    "BufferTier": "._tier",
    "FeatureTier": "._tier",
    "SourceTier": "._tier",
}

__all__ = ["BACKENDS", "EVICTION_POLICIES", "PLANNED_POLICIES", "TIERS", "Backend", "BufferTier",
           "DeviceFeatureCache", "DeviceRows", "DiskProbe", "FeatureBuffer", "FeatureFile", "FeatureSource",
           "FeatureTier", "GpuTier", "IOConfig", "MemorySource", "PreadSource", "SourceTier", "StaticFeatureCache",
           "StaticTier", "cached_probe", "detect_io_uring", "in_flight_for", "make_tier", "open_source", "probe_disk"]


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
