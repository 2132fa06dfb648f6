"""Which backend reads the features: io_uring detection, once, and :func:`open_source`.

``BACKENDS`` is the one list of backend names; the loader's config validates against it.
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import ConfigError
from ..store._dataset import Dataset
from ._backend_names import BACKENDS, Backend
from ._disk_source import IOConfig
from ._memory_source import MemorySource
from ._pread_source import PreadSource
from ._source import FeatureSource


@functools.cache
def detect_io_uring() -> bool:
    """Whether io_uring works here: set up a tiny ring and round-trip one NOP, once per process.

    False on ImportError (no binding), ENOSYS (old kernel), EPERM (seccomp / sysctl
    ``io_uring_disabled``) or any other OSError at setup.
    """
    try:
        import liburing
    except ImportError:
        return False
    ring = liburing.Ring()
    try:
        liburing.io_uring_queue_init(4, ring)
    except OSError:
        return False
    try:
        liburing.io_uring_prep_nop(liburing.io_uring_get_sqe(ring))
        liburing.io_uring_submit(ring)
        cqe = liburing.Cqe()
        liburing.io_uring_wait_cqe(ring, cqe)
        liburing.io_uring_cqe_seen(ring, cqe[0])
        return True
    except OSError:
        return False
    finally:
        liburing.io_uring_queue_exit(ring)


def open_source(dataset: Dataset, backend: Backend = "auto", **opts: Any) -> FeatureSource:
    """Open a feature source over ``dataset``; ``opts`` are :class:`IOConfig` fields.

    ``auto`` picks io_uring when :func:`detect_io_uring` is true, else pread (decided once, here).
    """
    if backend == "memory":
        if opts:
            raise ConfigError(f"the memory backend takes no options, got {sorted(opts)}")
        return MemorySource.from_dataset(dataset)
    if backend == "auto":
        backend = "io_uring" if detect_io_uring() else "pread"
    if backend == "pread":
        return PreadSource(dataset, IOConfig(**opts))
    if backend == "io_uring":
        if not detect_io_uring():
            raise ConfigError(
                "backend='io_uring' but io_uring is unavailable here; use 'auto' or 'pread'")
        from ._uring_source import UringSource  # imports liburing: only where io_uring works

        return UringSource(dataset, IOConfig(**opts))
    raise ConfigError(f"backend must be one of {BACKENDS}, got {backend=}")
