"""The loader's side of the historical embedding cache: one owner, one clock, the batch's record.

:class:`HistoryOwner` holds the :class:`~outre_async.cache.HistoryTable` and the clock and is
touched only on the loader's loop thread (design §7, style: one owner).  The clock counts optimizer
steps as delivered batches: the batch delivered at step ``D`` pulls its rows then (copies, so the
user's thread never reads the live table) and its pushes are stamped ``D``.

Staleness bound.  Each epoch starts at ``base`` (the clock then) and delivers batch ``seq`` at step
``D <= base + seq + window``: in plan order ``window = 0``; in completion order the delivery
enforces that a batch is handed out only once every batch more than ``window`` places before it
has been (``_delivery``), so at most ``seq + window`` batches precede it.  The sampler of batch
``seq`` prunes a candidate only if its row, pushed at ``t``, satisfies ``base + seq + window - t <=
staleness`` (:meth:`HistoryTable.valid`, a copy made on the loop before the work goes to a thread),
so the realised staleness ``D - t`` never exceeds ``staleness``; ``stats()`` reports its histogram.
A row not pushed yet may also be pruned when an earlier batch of the epoch, sure to be trained
first, promised it (:meth:`EpochHistory.promise`): the samplers' lead over training then costs no
pulls.  Two invariants make ``D <= base + seq + window`` hold under any use, not only the expected
one, and :meth:`EpochHistory.record` checks every pulled row's age against ``staleness`` anyway (a
:class:`HistoryError`, never an ``assert``, so ``python -O`` keeps it):

* one epoch at a time (:meth:`HistoryOwner.epoch`): a second epoch iterated while the first still
  delivers would tick the same clock, so the loader refuses it (its iteration rule, ``_epoch_rule``:
  a :class:`ConcurrentEpochError`: two epochs at once had pulled rows far older than ``staleness``;
  ``tests/loader/test_iteration_rule.py``);
* history starts at the first exchange (:attr:`HistoryOwner.first`): until a model has called
  ``batch.history.exchange`` once, nothing is pruned, so batches may be looked at without a model
  (``tests/loader/test_history.py``), and the first exchange withdraws the promises of the batches delivered before it
  (:meth:`EpochHistory.start`); from then on every delivered batch must reach the hook before the
  next is delivered, because later batches were sampled relying on its pushes (promises).

The window's default and why completion order needs a small one at small staleness (it counts
twice for promises): :mod:`outre_async.cache._history_config`.

Pushes.  :meth:`HistoryRecord.exchange` (the model hook) hands the detached rows to the owner: called
on the loop thread (``async for``) they are written at once; from another thread (the sync bridge)
they go through ``loop.call_soon_threadsafe``, which the bridge's next request follows in FIFO order,
so every push lands before the next batch is delivered.  A push never half-writes: it is one call on
the loop.  Nothing is claimed at sampling time, so a batch dropped by a break, an exception or a
cancellation leaves no state behind; a push that arrives after the loader closed is dropped.

Where the rows are (``HistoryConfig.placement``, resolved by :func:`build_owner`): on the training
device, a pull is a gather there at hand-over (:meth:`EpochHistory.record`) and a push keeps the
fresh rows there (:meth:`HistoryRecord.exchange`) for a scatter on the loop thread (:meth:`HistoryOwner.apply`),
with an event between the two threads' CUDA streams (``cache._device_fence``); on the host, the
pulled rows are gathered there and copied over, and pushes copied back.  The decision (stamps,
validity copies, the clock, the age check) is the same host code in both: only the rows move.  A
record crosses to the device in one packed ``non_blocking`` copy per step (``cache._record_transfer``):
its indices, ages, degrees, and the pulled slots (a device table gathers with them there) or the rows
gathered on the host; a consumer on a CUDA stream of its own waits on the record's event
(:meth:`HistoryRecord.follow`).

Cancellation rule: only :meth:`HistoryOwner.epoch` awaits (the grace for a running epoch's iterator
to go; cancelled, it has started nothing); :meth:`EpochHistory.close` ends the epoch's turn on the clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from ..errors import HistoryError
from ..cache._device_fence import after, mark
from ..cache._history import (
    HistoryDecision,
    HistoryTable,
    choose_candidates,
    decide,
    frontier_counts,
)
from ..cache._history_config import (
    HistoryConfig,
    default_window,
    history_row_bytes,
    min_lifetime,
    resolve_admission,
    resolve_placement,
)
from ..cache._record_transfer import RecordTransfer
from ..machine._device import device_memory
from ..sampling._items import BatchItem
from ..sampling._sampler import NeighborSampler, SampledSubgraph
from ..sampling._sampler_kernels import HistoryPrune
from ._epoch_rule import EpochToken
from ._history_record import HistoryRecord, Push

MAX_WAIT_GAP = 254  # a gap inside the window is carried as 1 + gap in the uint8 validity copy


def build_owner(ds: Any, cfg: Any, plan: Iterable[BatchItem], device: torch.device) -> HistoryOwner | None:
    """The owner for a loader config on its ``device`` (None when history is off): candidates ranked by
    how often ``plan``'s first batches meet them in hop 1, unless the config names them."""
    h: HistoryConfig | None = cfg.history
    if h is None:
        return None
    plan = list(plan)
    h = replace(h, admission=resolve_admission(h, len(plan)))  # "auto": by steps per epoch
    counts, counted = np.zeros(ds.num_nodes, np.int64), 0
    if h.candidates is None:
        one_hop = NeighborSampler(ds, list(cfg.fanouts[:1]), seed=cfg.seed)
        counts, counted = frontier_counts(one_hop.sample, [item.seeds for item in plan],
                                          ds.num_nodes, h.profile_batches)
    candidates = choose_candidates(h, counts, cfg.num_samplers, counted)
    placement = resolve_placement(h, device.type, history_row_bytes(len(candidates), h.dim), device_memory(device))
    table = HistoryTable(candidates, ds.num_nodes, h.dim, pin=placement == "host" and device.type == "cuda",
                         device=device if placement == "device" else "cpu")
    window = 0 if cfg.ordered else default_window(h, cfg.num_samplers, cfg.num_extractors)  # stats() says which
    return HistoryOwner(table, h, num_layers=len(cfg.fanouts), window=window, num_samplers=cfg.num_samplers,
                        indptr=ds.indptr, fanout=cfg.fanouts[1], placement=placement)


class HistoryOwner:
    def __init__(self, table: HistoryTable, cfg: HistoryConfig, *, num_layers: int, window: int,
                 num_samplers: int, indptr: np.ndarray | None = None, fanout: int = -1,
                 placement: str = "host") -> None:
        self.table, self.cfg, self.num_layers, self.window = table, cfg, num_layers, window
        self.placement = placement  # "device": rows on the training device (a CPU one too), "host": in host memory
        self.indptr, self.fanout = indptr, fanout  # read-only: sampler threads use them in ``decide``
        self.num_samplers = num_samplers
        self.clock = 0
        self.ages: Counter[int] = Counter()
        self.counts = Counter({"pulled": 0, "pushed": 0, "offered": 0, "refused": 0, "batches": 0})
        self.first: int | None = None    # step of the first batch whose hook reached the owner; None: not yet
        self.hooked_from = -1            # batches delivered from this step on must reach the hook (set with first)
        self.current: EpochHistory | None = None  # the one epoch that may deliver
        self._used = -1                  # latest step whose hook reached the owner
        self._epochs = 0
        self._transfer: RecordTransfer | None = None  # the records' one host -> device copy per step
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = -1

    async def epoch(self, *, ordered: bool, token: EpochToken | None = None) -> EpochHistory:
        """Start an epoch (loop thread): its base step, overtaking window and an empty promise table.

        One epoch at a time: the bound ``D <= base + seq + window`` counts this epoch's deliveries
        only, and a second epoch iterated meanwhile would tick the same clock (sharing it is not
        sound: the first epoch's batches in flight were sampled for steps the second would take).
        The loader's iteration rule (``_epoch_rule``) refuses such an epoch before it gets here, so
        an epoch still current now is one whose iterator is gone: it delivers nothing more and is
        superseded."""
        if self.current is not None:
            self.current.close()
        self._loop, self._thread = asyncio.get_running_loop(), threading.get_ident()
        view = EpochHistory(self, self.clock, 0 if ordered else self.window,
                            np.full(self.table.num_slots, -1, np.int32), number=self._epochs,
                            token=token if token is not None else EpochToken())
        self._epochs += 1
        self.current = view
        return view

    def transfer_to(self, device: torch.device) -> RecordTransfer:
        """The reusable packed transfer for records delivered to ``device`` (loop thread)."""
        if self._transfer is None or self._transfer.device != device:
            self._transfer = RecordTransfer(device)
        return self._transfer

    def send(self, push: Push) -> None:
        """Hand a push to the loop thread (written at once when already on it)."""
        if threading.get_ident() == self._thread:
            self.apply(push)
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # the loader closed: nothing will read the row
        try:
            loop.call_soon_threadsafe(self.apply, push)
        except RuntimeError:  # closed between the check and the call
            pass

    def apply(self, push: Push) -> None:
        """Write one push (loop thread); older pushes never overwrite newer rows.  The first one
        starts the history (:attr:`first`; the module docstring)."""
        self._used = max(self._used, push.step)
        if self.first is None:
            self.first, self.hooked_from = push.step, self.clock
            if self.current is not None:
                self.current.start(push.step)
        if push.rows is None:
            return
        keep = self.table.stamp[push.slots] <= push.step
        if push.grad_norm is not None:  # FreshGNN: rows whose gradient is at most the batch's median
            norms = push.grad_norm.numpy()
            refused = norms > np.median(norms) if len(norms) else np.zeros(0, bool)
            self.table.retire(push.slots[refused & keep])
            keep &= ~refused
            self.counts.update(refused=int(refused.sum()))
            if push.record is not None:
                index = push.record.push_index
                push.record.refused_index = index[torch.from_numpy(np.flatnonzero(refused)).to(index.device)]
        if not len(push.slots):
            return
        self.counts.update(offered=len(push.slots), pushed=int(keep.sum()))
        rows = after(push.ready, push.rows)  # made on the trainer's stream: this one waits for it
        if not keep.all():  # positions, not a host mask: no host sync on a device's rows
            rows = rows[torch.from_numpy(np.flatnonzero(keep)).to(rows.device, non_blocking=True)]
        self.table.write(push.slots[keep], rows, push.step)

    def stats(self) -> dict[str, Any]:
        return {"staleness": self.cfg.staleness, "admission": self.cfg.admission, "slots": self.table.num_slots,
                "dim": self.table.dim, "window": self.window, "bytes": self.table.nbytes(self.num_samplers),
                "placement": self.placement, "rows_on": str(self.table.device), "device_bytes": self.table.device_bytes,
                "host_bytes": self.table.host_bytes(self.num_samplers),
                "record_transfers": dict(self._transfer.counters) if self._transfer is not None else None,
                "clock": self.clock, "started_at": self.first, **self.counts,
                "realised_staleness": dict(sorted(self.ages.items()))}


@dataclass(slots=True)
class EpochHistory:
    """One epoch's view of the owner: what sampler work items carry and how deliveries are wrapped."""

    owner: HistoryOwner
    base: int
    window: int
    promised: np.ndarray  # int32 [C]: the latest sampled batch (seq) of this epoch that pushes the slot, -1: none
    number: int = 0       # the owner's epoch count (for messages)
    token: EpochToken = field(default_factory=EpochToken)
    last: int | None = None  # step of this epoch's latest delivered batch
    closed: bool = False
    unhooked: list[tuple[int, int]] = field(default_factory=list)  # (step, seq) delivered before the history started

    def snapshot(self, seq: int) -> HistoryPrune:
        """Loop thread: which candidates batch ``seq`` may prune (see the module docstring): rows
        already pushed that are young enough, and rows promised by an earlier batch of this epoch that
        is sure to be trained first (:meth:`promise`).  None during the warm-up: batch ``seq`` is
        delivered at step ``base + seq - window`` at the earliest (every batch more than ``window``
        places before it precedes it), so a batch that might be trained before step ``warmup`` prunes
        nothing.  Before the first exchange (:attr:`HistoryOwner.first`) nothing is pruned either,
        and the warm-up counts from that step."""
        first = self.owner.first
        if first is None or self.base + max(seq - self.window, 0) < first + (self.owner.cfg.warmup or 0):  # never None once built
            return self.owner.table.nothing_valid()
        cfg = self.owner.cfg
        prune = self.owner.table.valid(self.base + seq + self.window, cfg.staleness, cfg.jitter)
        if cfg.admission == "all":
            gap = seq - self.promised.astype(np.int64)
            w = self.window
            kept = (self.promised >= 0) & (gap >= 1) & (gap + 2 * w <= min_lifetime(cfg.staleness, cfg.jitter))
            near = kept & (gap <= min(w, MAX_WAIT_GAP)) & (prune.valid == 0)  # the delivery waits for the promiser
            prune.valid[kept & (gap > w)] = 1
            prune.valid[near] = (1 + gap[near]).astype(np.uint8)
        return prune

    def promise(self, seq: int, decision: HistoryDecision) -> None:
        """Loop thread, when batch ``seq``'s sample comes back: the rows it will push are promised.

        Why: samplers run ahead of training by the pipeline's depth, so a row pushed by batch ``j``
        lands only after the batches sampled meanwhile were planned without it, and on partition
        batches (the same macro batch recurs within a few batches) that lag costs a large share of the
        pulls (``benchmarks/bench_history_accuracy.py`` reports pulls per epoch).  A later batch ``seq'`` may
        prune a promised row when batch ``seq`` is sure to be delivered, and its hook to have run,
        before ``seq'`` is: ``seq' - seq > window`` (plan order: ``window = 0``; completion order:
        every batch more than ``window`` places back precedes it), and every push lands before the
        next delivery (the module docstring).  Its age is then at most ``seq' - seq + 2 window``
        (``seq`` is delivered at ``base + seq - window`` at the earliest, ``seq'`` at ``base + seq'
        + window`` at the latest), which must be within the shortest lifetime the row can draw.

        Inside the window (completion order, ``1 <= seq' - seq <= window``) the row may be pruned too,
        and the delivery then makes sure of the order instead: the validity copy carries ``1 + gap``
        (:meth:`snapshot`), the batch's decision the smallest such gap (``wait_gap``), and
        ``_delivery._Windowed`` hands batch ``seq'`` out only after every batch up to ``seq' - gap``.
        The age bound is the same.  Why: on igb-like a few percent of the hop-1 frontier met a row
        promised a few batches earlier and was expanded for it, so completion order pulled fewer rows
        than plan order (``tests/loader/test_history.py`` checks the promised rows are pulled).  With ``admission="grad"`` a
        push may be refused (or come after backward), so nothing is promised.  Before the history starts
        (the first exchange) promises are recorded but not used, and :meth:`start` withdraws those of
        batches delivered without reaching the hook."""
        if self.owner.cfg.admission == "all" and len(decision.push_slots):
            slots = decision.push_slots
            self.promised[slots] = np.maximum(self.promised[slots], seq)

    def sample(self, sampler: Any, item: Any, stream: int, prune: HistoryPrune) -> tuple[SampledSubgraph,
                                                                                           HistoryDecision]:
        """Sampler thread: reads only ``prune`` (a copy) and the immutable slot map."""
        sub = sampler.sample(item, stream, prune)
        return sub, decide(sub, prune, self.owner.num_layers, self.owner.indptr, self.owner.fanout)

    def start(self, step: int) -> None:
        """The history starts with the push of ``step`` (loop thread): the promises of this epoch's
        batches delivered before it, and not exchanged (none was: this is the first push), are
        withdrawn, so only batches sure to reach the hook (delivered from now on, or the batch of
        ``step``) are relied on.  No snapshot used a promise yet: before the start they prune nothing."""
        gone = np.array([seq for at, seq in self.unhooked if at != step], dtype=np.int64)
        self.unhooked.clear()
        if len(gone):
            self.promised[np.isin(self.promised, gone)] = -1

    def record(self, decision: HistoryDecision, device: torch.device, seq: int = -1) -> HistoryRecord:
        """Deliver one batch (loop thread): tick the clock, copy its pulled rows, check the hook and the bound."""
        owner = self.owner
        if self.closed or owner.current is not self:
            raise HistoryError(f"a batch of epoch {self.number} was delivered after that epoch was closed or "
                               "superseded; iterate one epoch of a history loader at a time")
        if owner.first is not None and self.last is not None and self.last >= owner.hooked_from \
                and owner._used < self.last:
            raise HistoryError(
                f"the batch delivered at step {self.last} never reached the history hook; the history started at "
                f"step {owner.first} (the first batch.history.exchange(h)) and later batches were sampled relying "
                "on every batch's pushes, so each must call exchange before the next is delivered (pass "
                "history=batch.history to the model); to look at batches without the model, use a loader "
                "without history=")
        step = owner.clock
        owner.clock += 1
        self.last = step
        if owner.first is None:
            self.unhooked.append((step, seq))
        stamps = owner.table.stamp[decision.pull_slots]
        ages = step - stamps
        if len(ages) and (stamps.min() < 0 or ages.max() > owner.cfg.staleness):
            raise HistoryError(f"history bound broken at step {step}: a pulled row is {int(ages.max())} steps old "
                               f"(staleness {owner.cfg.staleness}, stamp {int(stamps.min())}); this is a bug, please "
                               "report it with the loader's config")
        values, counts = np.unique(ages, return_counts=True)  # one entry per age, not per row: less
        owner.ages.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))  # CPU per pull
        owner.counts.update(pulled=len(ages), batches=1)
        # one host -> device copy for the step: indices, ages, degrees and the slots (a device table
        # gathers with them) or the rows gathered on the host (a host table), packed (``cache._record_transfer``)
        (pull_index, push_index, pull_age, pull_degree), rows = owner.transfer_to(device).send(
            (decision.pull_local, decision.push_local, ages, decision.pull_degree), owner.table, decision.pull_slots)
        record = HistoryRecord(owner.send, step, owner.table.dim, owner.cfg.admission, pull_index, rows,
                               push_index, decision.push_slots, pull_age=pull_age, rows_device=owner.table.device,
                               pulled=mark(device))
        record.pull_degree = pull_degree
        return record

    def close(self) -> None:
        """The epoch delivers nothing more; the owner may start the next."""
        self.closed = True
        if self.owner.current is self:
            self.owner.current = None
        self.token.abandon()  # wakes a next epoch waiting for this one
