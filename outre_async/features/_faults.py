"""Disk faults at the completion boundary: what a disk source does with a failed or short read, and
a seam for tests to make the device fail.

What a read's result may be, and what the disk sources (io_uring and pread alike) do with it:

* complete: the row bytes are in place;
* short (fewer bytes than asked, not at end of file): the rest is read again from the aligned offset
  where data stopped (``_staging.resume_at``), as often as each try makes progress;
* a transient error (:data:`TRANSIENT_READ_ERRNOS`: ``EIO``, ``EAGAIN``, ``EINTR``): the read is
  issued again, at most :data:`READ_RETRIES` (3) more times, then the fourth failure is an
  :class:`ExtractorError` naming the file, the read's byte offset and the errno;
* any other error (``EBADF``, ``EINVAL``, ``EFAULT``, ...): an :class:`ExtractorError` at once.

An :class:`ExtractorError` ends the request (its other reads drained first, ``_disk_source``'s
cancellation rule), hence the epoch; no row of a failed request is delivered.

:class:`FaultPlan` is the seam: set as a source's ``faults``, it is consulted for every completed
read, where the backend takes the result (io_uring: the reaped CQE's ``res``; pread: what ``preadv``
returned or raised), and may replace it by an error or a shorter count.  The read itself really
happened: only what the source is told changes, so every path from there on is the real one.  Tests
use it; nothing else sets ``faults``.
"""

from __future__ import annotations

import errno as errno_mod
import threading
from dataclasses import dataclass

from ..errors import ConfigError

READ_RETRIES = 3  # a read failing with a transient error is issued again at most this many times
TRANSIENT_READ_ERRNOS = frozenset({errno_mod.EIO, errno_mod.EAGAIN, errno_mod.EINTR})


def retry_note(err: int, retries: int) -> str:
    """What the error message adds about retries."""
    if err in TRANSIENT_READ_ERRNOS:
        return f" ({retries} retries, all failed)"
    return ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fault:
    """One kind of fault: ``errno`` (report this error) or ``short`` (report at most this many bytes,
    a multiple of 512 as a device gives), for reads covering byte ``at`` of the file (None: any
    read), the first ``times`` such completions."""

    errno: int = 0
    short: int = 0
    at: int | None = None
    times: int = 1

    def __post_init__(self) -> None:
        if (self.errno > 0) == (self.short > 0) or self.errno < 0 or self.short < 0:
            raise ConfigError(f"a Fault is an errno > 0 or a short count > 0, got {self.errno=} {self.short=}")
        if self.short % 512:
            raise ConfigError(f"a short count is whole 512 B sectors, got {self.short=}")
        if self.times < 1:
            raise ConfigError(f"times must be >= 1, got {self.times=}")


class FaultPlan:
    """Faults to inject into a disk source's completions (``source.faults = FaultPlan(...)``).

    Thread-safe (pread workers consult it); ``injected`` counts the results it replaced."""

    def __init__(self, *faults: Fault) -> None:
        self.faults = faults
        self._left = [f.times for f in faults]
        self._lock = threading.Lock()
        self.injected = 0

    def result(self, offset: int, length: int, res: int) -> int:
        """The result to report for the read ``[offset, offset + length)`` that gave ``res`` (bytes, or
        ``-errno``): the first matching fault's, else ``res``."""
        with self._lock:
            for i, f in enumerate(self.faults):
                if not self._left[i] or (f.at is not None and not offset <= f.at < offset + length):
                    continue
                if f.errno:
                    out = -f.errno
                elif 0 < f.short < res:
                    out = f.short
                else:
                    continue  # already as short as that: nothing to inject
                self._left[i] -= 1
                self.injected += 1
                return out
        return res
