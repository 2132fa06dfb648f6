"""How many cores this process may run on, and the loader's thread counts sized from them.

``usable_cores()`` is ``len(os.sched_getaffinity(0))``: the cores the scheduler lets this process
use (``taskset``, a container's cpuset), not the machine's total.  The defaults keep today's figures
on the 2-core machine they were measured on (2 samplers, 2 extractors, 32 pread threads) and grow
with the cores, which a GPU box has many of (fixed counts would leave most of them idle;
``benchmarks/bench_loader_cores.py``):

- samplers ``max(2, min(cores // 2, 8))``: numba kernels that release the GIL, one per thread; half
  the cores, leaving the rest to the event loop (extraction, I/O completions) and the trainer;
- extractors ``max(2, min(cores // 4, 8))``: batches being extracted at once on the one loop thread;
  each holds a batch matrix, so they grow slower than the samplers (more is memory, not speed);
- pread threads ``max(32, min(8 * cores, 128))``: blocking reads in flight (io_uring needs none;
  its queue depth is the device's, from a probe grid or ``UringSource.DEFAULT_DEPTH``
  (``loader._read_depth.uring_depth``), not sized from cores).
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def default_samplers(cores: int) -> int:
    return max(2, min(cores // 2, 8))


def default_extractors(cores: int) -> int:
    return max(2, min(cores // 4, 8))


def default_pread_threads(cores: int) -> int:
    return max(32, min(8 * cores, 128))


def sized_from_cores(cores: int | None = None) -> dict[str, int]:
    """Every default above for ``cores`` (None: this process's), with the cores themselves."""
    cores = usable_cores() if cores is None else cores
    return {"cores": cores, "num_samplers": default_samplers(cores), "num_extractors": default_extractors(cores),
            "pread_threads": default_pread_threads(cores)}
