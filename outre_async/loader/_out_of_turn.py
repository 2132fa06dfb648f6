"""Ordered delivery's memory: samplers send batches in plan order, or out of turn within a byte budget.

With ``ordered=True`` the consumer takes batches in plan order, so a batch that is ready before an
earlier one waits in the reorder buffer (``_delivery``) with its matrix; with ``history=`` in
completion order the history's overtaking window holds such batches back too (``_delivery._Windowed``,
``LoaderConfig.holds_back``).  What keeps those matrices inside the memory plan is this gate between
the samplers and the extract channel:

* a sampled batch is *in turn* when every earlier batch of the plan is already on the extract
  channel; it passes at once, and its extractor reserves its matrix from the pool of batch matrices
  (``_batch_memory``) as in completion order.  In-turn batches therefore reach the pool in plan order.
* a batch sampled before an earlier one is *out of turn*: it passes only when its real bytes (matrix
  rows x row bytes + its subgraph, :func:`subgraph_bytes`) fit this gate's budget, the memory plan's
  ``reorder buffer`` part; its :class:`MatrixLease` then travels with it in place of a pool
  reservation and is released by the consumer like any lease.  Otherwise its sampler waits until the
  batch fits or comes in turn (waiting batches are served lowest sequence number first).

Why this cannot deadlock: which batch can block which.  Let ``d`` be the lowest batch not yet
delivered.  (1) ``d`` never waits at the gate: every earlier batch was delivered, hence sent, so ``d``
is in turn.  (2) ``d``'s matrix: if ``d`` went out of turn it carries its bytes; if in turn, every
batch ahead of it in the pool's first-come-first-served queue, or holding pool bytes, went in turn
before it and so has a lower sequence number, i.e. was delivered: only the consumer's batch (released
when ``d`` is in hand) can stand in its way, and the pool holds two batches (or names the pair's
bytes in a :class:`ConfigError`).  (3) Nothing else on ``d``'s path waits for a later batch: out-of-turn
batches hold their bytes already, extractors never wait for each other (the feature buffer's pieces),
and the delivery drains the ready channel while the consumer waits for ``d``.  Out-of-turn batches
wait only for ``d`` to be delivered, never the other way round, so the wait-for graph has no cycle;
a budget of 0 is correct too (every batch is sent in plan order).

One gate per epoch (sequence numbers restart at 0), touched only by the event loop thread.
Cancellation rule: a cancelled :meth:`admit` takes nothing (a grant that raced with the cancellation
is given back); a batch that is never marked :meth:`sent` (its epoch failed) blocks only later ones.
"""

from __future__ import annotations

import asyncio

from ..sampling._sampler import SampledSubgraph
from ._batch_memory import BatchMemory, MatrixLease


def subgraph_bytes(sub: SampledSubgraph) -> int:
    """Bytes of a batch's topology (ids, edges, edge ids): what a batch held past its queue slot
    keeps besides its matrix."""
    return int(sub.n_id.nbytes + sub.edge_index.nbytes + (0 if sub.e_id is None else sub.e_id.nbytes))


class OutOfTurnMemory(BatchMemory):
    """At most ``capacity`` bytes of batches sent out of turn (see the module)."""

    def __init__(self, capacity: int, row_bytes: int) -> None:
        super().__init__(capacity, row_bytes, budget=None)
        self._turn = 0                 # the lowest sequence number not yet on the extract channel
        self._sent: set[int] = set()   # sent, above the turn
        self._waiting: dict[int, tuple[int, asyncio.Future[MatrixLease | None]]] = {}
        self.counters.update({"in_turn": 0, "out_of_turn": 0, "turn_waits": 0})

    @property
    def turn(self) -> int:
        return self._turn

    async def admit(self, seq: int, rows: int, extra: int = 0) -> MatrixLease | None:
        """Wait until batch ``seq`` (``rows`` matrix rows + ``extra`` bytes) may be sent: None when it
        is in turn (its extractor reserves its matrix), else its lease on this budget."""
        n = rows * self.row_bytes + extra
        self.counters["largest_rows"] = max(self.counters["largest_rows"], rows)
        if seq == self._turn:
            self.counters["in_turn"] += 1
            return None
        if not any(s < seq for s in self._waiting) and self._fits(n):
            return self._lease(n)
        self.counters["turn_waits"] += 1
        fut: asyncio.Future[MatrixLease | None] = asyncio.get_running_loop().create_future()
        self._waiting[seq] = (n, fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                granted = fut.result()  # granted just as we were cancelled
                if granted is not None:
                    granted.release()
            else:
                self._waiting.pop(seq, None)
                self._wake()
            raise

    async def reserve(self, rows: int, seq: int, extra: int = 0) -> MatrixLease:
        raise TypeError("OutOfTurnMemory grants by turn: call admit(), not reserve()")

    def sent(self, seq: int) -> None:
        """Batch ``seq`` is on the extract channel: later batches may come in turn."""
        self._sent.add(seq)
        while self._turn in self._sent:
            self._sent.remove(self._turn)
            self._turn += 1
        self._wake()

    def _lease(self, n: int) -> MatrixLease:
        self._take(n)
        self.counters["out_of_turn"] += 1
        return MatrixLease(self, n)

    def _wake(self) -> None:
        """Serve waiting batches lowest first: the one in turn at once, the others while they fit."""
        for seq in sorted(self._waiting):
            n, fut = self._waiting[seq]
            if fut.done():  # cancelled while waiting: nothing to grant
                del self._waiting[seq]
                continue
            if seq == self._turn:
                self.counters["in_turn"] += 1
                grant = None
            elif self._fits(n):
                grant = self._lease(n)
            else:
                return
            del self._waiting[seq]
            fut.set_result(grant)

    def stats(self) -> dict[str, int]:
        return {**super().stats(), "turn": self._turn, "waiting": len(self._waiting)}
