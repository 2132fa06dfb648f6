"""Restores plan order for ``ordered=True`` delivery: a pure, synchronous reorder buffer.

Batches finish out of order; each carries its sequence number in the epoch's plan.  ``push`` takes
one finished batch and returns the (possibly empty) run of batches that can now be delivered in
order.  Memory is bounded by the pipeline, not here: every batch held keeps its matrix lease, on the
pool of batch matrices or on the out-of-turn budget of the samplers' gate (``_out_of_turn``), so what
is held never exceeds those two parts of the memory plan, whatever the delays.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from ..errors import ConfigError

T = TypeVar("T")


class ReorderBuffer(Generic[T]):
    """Holds out-of-order items until every earlier sequence number has arrived."""

    def __init__(self, first: int = 0) -> None:
        self._next = first
        self._held: dict[int, T] = {}

    def push(self, seq: int, item: T) -> list[T]:
        """Add item ``seq``; return the items that are now next in order (maybe none)."""
        if seq < self._next or seq in self._held:
            raise ConfigError(f"sequence number {seq} was already delivered or is held twice")
        self._held[seq] = item
        ready = []
        while self._next in self._held:
            ready.append(self._held.pop(self._next))
            self._next += 1
        return ready

    @property
    def next_seq(self) -> int:
        """The sequence number the consumer is waiting for."""
        return self._next

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> list[T]:
        """Drop and return everything held (shutdown path: the caller releases them)."""
        held = list(self._held.values())
        self._held.clear()
        return held
