"""Batch matrices in flight: a byte pool that makes their memory follow the budget, not the worst case.

An extractor *reserves* a batch's matrix (``rows x row_bytes``, its real unique rows) before it
allocates it; the :class:`MatrixLease` travels with the batch and the consumer releases it when it
asks for the next batch (or a shutdown path does).  The pool's capacity is the memory plan's
``batches`` part, so matrices being extracted, queued on the ready channel and held by the consumer
never add up to more than the plan says, whatever size the batches turn out to be.  Reservations are
served first come, first served (a large batch is not starved by smaller ones behind it).

A batch whose matrix alone is larger than the whole pool: with a memory budget this is a
:class:`ConfigError` naming the batch's bytes and the budget that would hold it; without one (the
capacity is then only the default's estimate) the batch waits until no other matrix is reserved
and goes alone.

Only the event loop thread touches this object.  Cancellation rule: a cancelled :meth:`reserve`
takes nothing (a grant that raced with the cancellation is given back); a lease released twice
counts once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from .._errors import ConfigError
from .._units import format_bytes


@dataclass(eq=False, slots=True)
class MatrixLease:
    """One batch's reservation; :meth:`release` gives its bytes back (idempotent)."""

    pool: BatchMemory | None
    nbytes: int

    def release(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool._give_back(self.nbytes)


class BatchMemory:
    """At most ``capacity`` bytes of batch matrices reserved at once (``budget``: the loader's
    ``memory_budget``, for the error message; ``None`` lets an oversized batch go alone)."""

    def __init__(self, capacity: int, row_bytes: int, *, budget: int | None) -> None:
        self.capacity, self.row_bytes, self.budget = int(capacity), int(row_bytes), budget
        self._used = self._peak = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self.counters = {"reserved": 0, "waits": 0, "largest_rows": 0}

    async def reserve(self, rows: int, seq: int) -> MatrixLease:
        """Hold ``rows`` rows' worth of bytes for batch ``seq``, waiting while the pool is full."""
        n = rows * self.row_bytes
        if n > self.capacity and self.budget is not None:
            raise ConfigError(
                f"batch {seq} has {rows} unique rows, a {format_bytes(n)} matrix, but memory_budget="
                f"{format_bytes(self.budget)} leaves {format_bytes(self.capacity)} for batch matrices; raise "
                f"memory_budget to at least {format_bytes(self.budget + n - self.capacity)} or lower batch_size / fanouts")
        self.counters["largest_rows"] = max(self.counters["largest_rows"], rows)
        if not self._waiters and self._fits(n):
            self._take(n)
        else:
            self.counters["waits"] += 1
            entry = (n, asyncio.get_running_loop().create_future())
            self._waiters.append(entry)
            try:
                await entry[1]
            except asyncio.CancelledError:
                if entry[1].done() and not entry[1].cancelled():
                    self._give_back(n)  # granted just as we were cancelled
                else:
                    self._waiters.remove(entry)
                    self._wake()
                raise
        return MatrixLease(self, n)

    def _fits(self, n: int) -> bool:
        return self._used + n <= self.capacity or self._used == 0

    def _take(self, n: int) -> None:
        self._used += n
        self._peak = max(self._peak, self._used)
        self.counters["reserved"] += 1

    def _give_back(self, n: int) -> None:
        self._used -= n
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            n, fut = self._waiters.popleft()
            if fut.done():  # cancelled while queued: nothing to grant
                continue
            self._take(n)
            fut.set_result(None)

    @property
    def used(self) -> int:
        return self._used

    def stats(self) -> dict[str, int]:
        return {"capacity": self.capacity, "used": self._used, "peak": self._peak, **self.counters}
