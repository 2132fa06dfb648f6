"""Which waiting read request the io_uring source submits first: the one serving the earliest batch.

Why: a window of queued batches (``_feature_buffer``, ``_window_plan``) is read as several requests,
one per batch it serves, so that each batch can go as soon as its own rows are in; and each of those
batches later reads its *lone* rows itself.  In first-come order, batch ``i+1``'s lone rows would wait
behind every request of the window (up to 16 batches' reads), so batch ``i+1`` would finish only when
the window does, and the next window would be planned only then, leaving the device idle between
windows while the loader counts reads "in flight" (``benchmarks/disk_idle_epoch.py`` measures the idle
seconds from ``/proc/diskstats``).  So each request carries a *priority*, the look-ahead order of
the batch it serves (smaller first); requests of equal priority keep their arrival order.

The priority rides a :class:`~contextvars.ContextVar` instead of a parameter: the buffer sets it
around its reads and the tiers between the buffer and the source (static, GPU, source tiers) need not
pass it on; an asyncio task copies the context it was made in, so each extracting batch and each
window request task sees its own value.  Reads made outside any batch (the profile's cache fills,
tests) have :data:`URGENT`: before every batch's reads.  The ``pread`` source serves its thread pool
first come, first served (the fallback; it ignores the priority).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

URGENT = -1  # reads that serve no queued batch: first
READ_PRIORITY: ContextVar[int] = ContextVar("outre_read_priority", default=URGENT)


@contextmanager
def read_priority(priority: int) -> Iterator[None]:
    """Reads started inside this block (in this task) are submitted by ``priority`` (smaller first)."""
    token = READ_PRIORITY.set(int(priority))
    try:
        yield
    finally:
        READ_PRIORITY.reset(token)
