"""Sampler stage: coroutines that run the numba sampling kernel in a bounded executor.

Each worker owns one :class:`Sampler` (its O(N) relabel scratch is not shared), takes the next
``(seq, item)`` from the epoch's shared plan iterator (one event loop, so each batch is taken exactly
once without a lock) and sends a :class:`SampledBatch` on the bounded extract channel.  The
:class:`SampleStage` outlives epochs and owns the stage's counters (only its workers update them).

A batch sent on the extract channel carries a look-ahead :class:`Pin` on the feature buffer (its
rows are kept from eviction until an extractor takes them, GIDS's window buffering); the pin is taken
before the send, so a batch waiting for room in the channel is already counted, and dropped if the
send fails or is cancelled.  In ordered mode a batch passes the :class:`OutOfTurnMemory` gate first
(``_out_of_turn``): at once when every earlier batch is on the channel, else when its bytes fit the
out-of-turn budget (its lease then travels with it, and is released if the send fails).

With ``history=``, the loop makes the batch's validity snapshot before the work goes to a thread,
and the thread returns the subgraph with its pull/push decision (``_history``).

Cancellation rule: a worker stops taking batches at once; a kernel already running in a thread is
waited for (a thread cannot be interrupted, and the next epoch must not share its scratch), its
result is dropped, and only then does the cancellation propagate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..aio._channel import Channel
from ..aio._cpu_meter import thread_cpu_call
from ..aio._threads import run_in_thread
from ..cache._history import HistoryDecision
from ..features import FeatureBuffer, FeatureTier
from ..sampling._items import BatchItem
from ..sampling._sampler import SampledSubgraph
from ._batch import SampledBatch, Sampler
from ._history import EpochHistory
from ._out_of_turn import OutOfTurnMemory, subgraph_bytes

if TYPE_CHECKING:
    from ._foresight import EpochForesight


@dataclass(frozen=True, slots=True)
class SampleCounters:
    """Totals of the sample stage since the loader was made."""

    batches: int = 0
    nodes: int = 0
    edges: int = 0
    seconds: float = 0.0   # summed over workers: busy time, not wall time
    cpu_seconds: float = 0.0  # thread CPU time of the sampling calls in the executor threads
    negatives: int = 0        # edge batches: negative pairs of the batches sampled
    false_negatives: int = 0  # of them, edges of the graph

    def plus(self, sub: SampledSubgraph, seconds: float, cpu_seconds: float, item: BatchItem | None = None) -> SampleCounters:
        neg, false = (item.targets.num_negatives, item.targets.false_negatives) if item is not None else (0, 0)
        return SampleCounters(self.batches + 1, self.nodes + sub.num_nodes, self.edges + sub.num_edges,
                              self.seconds + seconds, self.cpu_seconds + cpu_seconds, self.negatives + neg,
                              self.false_negatives + false)


class SampleStage:
    def __init__(self) -> None:
        self.counters = SampleCounters()

    async def worker(self, sampler: Sampler, *, plan: Iterator[tuple[int, BatchItem]], out: Channel[SampledBatch],
                     executor: Executor, stream_of: Callable[[int], int], history: EpochHistory | None = None,
                     lookahead: FeatureBuffer | None = None,
                     gate: OutOfTurnMemory | None = None, tiers: FeatureTier | None = None,
                     foresight: EpochForesight | None = None) -> None:
        """Sample every item of ``plan`` onto ``out``; ``lookahead``: pin each batch's rows in the buffer,
        only those the ``tiers`` above it pass down (their own rows are never read through it);
        ``foresight``: while ``out`` is full, foresee the batches beyond it (``_foresight``); ``stream_of``:
        the RNG stream of the batch at a position of ``plan`` (``EpochParts.stream``)."""
        for seq, item in plan:
            if foresight is not None:
                foresight.taken(seq)
            stream = stream_of(seq)
            start = time.perf_counter()
            decision: HistoryDecision | None = None
            if history is None:
                subgraph, cpu = await run_in_thread(executor, thread_cpu_call, sampler.sample, item, stream)
            else:  # the validity copy is made here, on the loop; the thread reads only it
                prune = history.snapshot(seq)
                (subgraph, made), cpu = await run_in_thread(executor, thread_cpu_call, history.sample,
                                                            sampler, item, stream, prune)
                history.promise(seq, made)
                decision = made
            self.counters = self.counters.plus(subgraph, time.perf_counter() - start, cpu, item)
            lease = None if gate is None else await gate.admit(seq, subgraph.num_nodes, subgraph_bytes(subgraph))
            pin = None
            if lookahead is not None:
                pin = lookahead.pin(subgraph.n_id if tiers is None else tiers.passed_down(subgraph.n_id), seq)
            if foresight is not None:
                foresight.pinned(seq)  # after the pin: its rows stay counted throughout
            try:
                while foresight is not None and out.full() and foresight.wanted():  # it would only wait
                    await foresight.step(sampler, executor)
                await out.send(SampledBatch(seq, subgraph, decision, pin, lease))
            except BaseException:
                if pin is not None:
                    pin.release()
                if lease is not None:
                    lease.release()
                raise
            if gate is not None:
                gate.sent(seq)
