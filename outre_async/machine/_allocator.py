"""glibc's allocator, held to what a memory cap can count: a fixed mmap threshold and a heap trim.

glibc raises its mmap threshold to the size of the largest mapped block freed (up to 32 MiB) and
then keeps up to twice that much free heap untrimmed.  In a training process the model's forward
frees MiB-sized temporaries early, after which they and the loader's per-batch arrays come from the
heap, and the heap's free part grows over an epoch while the bytes in use stay flat, enough for a
run under a cap of 1.1 x ``memory_budget`` to reach it with nothing held outside the plan
(``benchmarks/bench_memory_budget.py``; docs/benchmarks.md).  Holding the threshold at glibc's own
default of 128 KiB (``mallopt(M_MMAP_THRESHOLD)``, what ``MALLOC_MMAP_THRESHOLD_=131072`` does) maps
every large block and returns it on free, so a cap measures what the loader and the model hold.

It is a process-wide setting, so the library never changes it on its own: ``outre train`` does it in
its own process when given ``--memory-budget`` (and the user did not set the variable), and a script
under a hard cap can call :func:`pin_mmap_threshold` or set the variable.  Elsewhere than glibc both
functions do nothing and say so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_MMAP_THRESHOLD = -3        # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD = 128 << 10   # glibc's default, held fixed
ENV_VARIABLE = "MALLOC_MMAP_THRESHOLD_"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Hold glibc's mmap threshold at ``threshold`` bytes (module docstring); whether it could be."""
    libc = _libc()
    return bool(libc is not None and hasattr(libc, "mallopt") and libc.mallopt(M_MMAP_THRESHOLD, int(threshold)))


def pin_unless_user_chose() -> bool:
    """:func:`pin_mmap_threshold` unless ``MALLOC_MMAP_THRESHOLD_`` is set (the user's choice stands)."""
    return False if ENV_VARIABLE in os.environ else pin_mmap_threshold()


def trim_heap() -> bool:
    """Give glibc's free heap back to the system (``malloc_trim``); whether there was glibc to ask."""
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    libc.malloc_trim(0)
    return True


def glibc_allocator() -> bool:
    """Whether this process's C library has glibc's ``mallopt`` (where the functions above act)."""
    libc = _libc()
    return libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")
