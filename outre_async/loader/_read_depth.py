"""How many reads the loader's disk source keeps in flight: the one rule, read by the source the
loader opens (``_resources``), the memory plan's staging and bounce pages (``_budget``) and what a
profile records and measures with (``_profiling``).

``max_in_flight`` when given (its one home: ``source_options`` may not repeat it, ``LoaderConfig``);
else, for io_uring with a ``disk_probe``, Little's law on the probe (``in_flight_for``: the knee of
its rate curve at this read size, x2 for the burst reaping); else the backend's own default
(``UringSource.DEFAULT_DEPTH``; pread's thread count, ``PreadSource.default_depth``).  pread keeps its
default: its depth is a thread count, and threads past 32 cost more CPU than they add.
"""

from __future__ import annotations

from ..features import detect_io_uring
from ..features._disk_probe import in_flight_for
from ..features._uring_source import UringSource
from ._config import LoaderConfig


def io_depth(cfg: LoaderConfig, read_bytes: int) -> int | None:
    """The depth the loader asks of its disk source for reads of ``read_bytes``; None: the backend's
    default (and no disk source at all with ``backend="memory"``)."""
    if cfg.backend == "memory":
        return None
    if cfg.max_in_flight is not None:
        return cfg.max_in_flight
    uring = cfg.backend == "io_uring" or (cfg.backend == "auto" and detect_io_uring())
    return uring_depth(cfg, read_bytes) if uring and cfg.disk_probe is not None else None


def uring_depth(cfg: LoaderConfig, read_bytes: int) -> int:
    """io_uring's reads in flight, its default included: what the memory plan sizes the staging and
    bounce pages of reads into the buffer's slots by (``_budget.chunk_stage_bytes``, ``bounce_bytes``)."""
    if cfg.max_in_flight is not None:
        return cfg.max_in_flight
    if cfg.disk_probe is not None:
        return in_flight_for(cfg.disk_probe, read_bytes)
    return UringSource.DEFAULT_DEPTH
