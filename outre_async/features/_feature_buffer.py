"""The feature buffer: a cache of row slots shared by every extractor (GNNDrive §4.2, GIDS §4).

A batch streams through the buffer into its own matrix, one *piece* at a time (:meth:`extract`): a
piece *acquires* one slot per row of a prefix of the batch's remaining rows; rows already valid are
hits (no I/O), rows being read for another batch are awaited (never read twice), the rest evict a
standby slot and are read from the :class:`FeatureSource`; the piece is then copied into the batch
matrix and *released* at once.  Released slots keep their rows on a standby list, so a later batch
needing the same node takes it back without I/O until the slot is evicted.  A batch therefore needs
no more slots than one row: the buffer is a cache and a landing area for reads in flight, not the
batch's storage, and its size is a matter of hit rate, never of whether a batch can be served.

Look-ahead pinning (GIDS's window buffering): :meth:`pin` counts the rows of a batch that is sampled
and queued but not yet extracted; standby slots holding such rows sit on a *wanted* list that is
evicted only when no other standby slot is left (``_buffer_kernels``).  The pin shrinks piece by
piece as the batch takes its rows, and :meth:`Pin.release` drops what is left (a batch dropped on
shutdown).  Pinning never makes a batch wait: with only wanted rows on standby, a piece evicts the
one pinned last (needed furthest ahead).

Foresight (:meth:`foresee`): the rows of batches beyond the queue (``loader._foresight``) sit on a third,
*foreseen* standby list, evicted after the cold list and before the wanted one; counted beside the pins
in the node record, so it costs nothing per node (``"lru-lookahead"`` only).

Eviction policies (``policy=``): ``"lru-lookahead"`` (the default) is the above, pins as a preference
on two standby lists; ``"next-use"`` evicts the row whose next use among the queued batches is furthest
(Belady within the window; ``tests/features/test_next_use.py``).  Window reads (``read_ahead``,
``_window_plan``): a piece no window planned also takes slots for the missing rows of the next queued
batches that share a merged read with the plan, read in one request per batch they serve.  Both, and
why the default is what it is, are in ``docs/design/reads.md`` ("The feature buffer's policies and windows").

A piece of at least ``COPY_OFF_LOOP_BYTES`` is copied out by the buffer's copy thread (:meth:`_copy_out`)
while the loop reaps reads.  A piece waits for a release only when every slot is held by a piece being
read or copied, so a buffer of any size >= 1 row never deadlocks; ``piece_rows`` caps a piece.

Only the event loop thread touches this object's state (no locks); the copy thread only reads slots a
piece holds and writes that piece's part of a batch matrix.  Cancellation rule: a cancelled
:meth:`fill` still lets the reads it submitted finish inside the source, marks its unread rows
invalid so nobody waits on them forever; :meth:`extract` releases its piece and leaves no slot held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import ConfigError
from ..store._row_format import FLOAT32, held_dtype
from . import _buffer_kernels as K
from ._buffer_holds import (Acquisition, Foresight, Pin, SlotReader, int64_ids, node_records, page_aligned_zeros,
                            row_words)
from ._disk_source import uncancellable
from ._policies import check_policy
from ._read_priority import URGENT, read_priority
from ._window_plan import plan_window, window_groups

POLICY = "lru-lookahead"  # the default eviction policy (the module docstring says why)
READ_AHEAD = 12  # queued batches a window may read along (:meth:`FeatureBuffer._read_ahead`; benchmarks/replay_window_reads.py)
NEXT_USE_BUCKETS = 256  # next-use lists, one per queued seq modulo this (above any queue's span of seqs)

COPY_OFF_LOOP_BYTES = 1 << 20  # pieces at least this large are copied by the copy thread


class FeatureBuffer:
    """``num_slots`` rows of ``dim`` values in their held words (``RowFormat.held``) plus GNNDrive's mapping table and two standby
    lists (cold, wanted) and the per-node look-ahead counts."""

    def __init__(self, num_nodes: int, num_slots: int, dim: int, *, held: np.dtype = FLOAT32, min_slots: int = 1,
                 policy: str = POLICY, read_ahead: int | None = None, merge_rows: int = 0,
                 map_entries: int | None = None) -> None:
        self.policy = check_policy(policy)
        if num_slots < max(min_slots, 1):
            raise ConfigError(f"feature buffer of {num_slots=} rows is smaller than the {max(min_slots, 1)} rows asked "
                              "for; raise buffer_rows / memory_budget")
        self.num_slots = num_slots
        self.data = page_aligned_zeros(num_slots, dim, held_dtype(held))  # rows as the format holds them
        self._words = row_words(self.data)  # the same bytes as the kernels copy them
        self._next_use = self.policy == "next-use"
        self.num_nodes = num_nodes
        # the node -> slot map (``_buffer_kernels``): the direct [N, 2] array, or with ``map_entries`` (the
        # most nodes the loader's plan lets hold a slot or a count at once) a hash table where that is smaller
        self._map: np.ndarray | tuple[np.ndarray, np.ndarray]
        if self._next_use:  # see _buffer_kernels: the occurrence chains and the next-use buckets
            self._map, self._rec, self._head, self._occ, self._meta = K.new_next_use_state(
                num_nodes, num_slots, NEXT_USE_BUCKETS, 1024)
        else:
            self._map, self._rec = K.new_state(num_nodes, num_slots, map_entries)
        self._last_seq = -1
        self.read_ahead = READ_AHEAD if read_ahead is None else read_ahead
        self.merge_rows = merge_rows  # rows this many ids apart share a read (the source's gap rule)
        self._pins: dict[int, Pin] = {}  # live pins by seq: read-ahead finds the next batches' rows here
        # one future per piece that reads rows, not one per row (a future's allocation and callback per row
        # was loader CPU per row read: benchmarks/bench_loader_cpu.py):
        # _reader[slot] is the reader id of a slot being read, _reads[id] its future
        self._reader = np.full(num_slots, -1, dtype=np.int64)
        self._reads: dict[int, asyncio.Future[None]] = {}
        self._next_reader = 0
        self._released = asyncio.Event()
        self._pinned = 0
        self._foreseen = 0  # rows counted by live foresights (:meth:`foresee`)
        self._pin_order = 0
        self._window_reads: set[asyncio.Task[None]] = set()  # a window's later requests (``_read_window``)
        self._copier: ThreadPoolExecutor | None = None  # copies large pieces off the loop (``_copy_out``)
        # rows per action: _actions (see stats); windows: window plans read, window_batches: batches they planned
        # window_requests: the requests those windows were read in (``_window_plan.window_groups``)
        self.counters = {"acquire_waits": 0, "pieces": 0, "read_ahead_rows": 0, "windows": 0, "window_batches": 0,
                         "window_requests": 0}
        self._actions = np.zeros(3, dtype=np.int64)  # rows per action (HIT, READ, WAIT) so far
        self._ahead_actions = np.zeros(3, dtype=np.int64)  # the same for rows read ahead (not batch rows)

    @property
    def _nodes(self) -> np.ndarray:
        """Every node's record ``[N, 2]`` (slot, look-ahead counts): the map, or a copy built from a table."""
        return node_records(self._map, self.num_nodes)

    @property
    def map_nbytes(self) -> int:
        """What the node -> slot map holds now (``K.map_bytes`` plans it)."""
        return sum(a.nbytes for a in self._map) if isinstance(self._map, tuple) else self._map.nbytes

    def _reserve(self, extra: int) -> None:
        """Keep a hash table map at most half full before ``extra`` more ids are counted: it holds at
        most every slot's node and every node counted by a pin or a foresight (rehashed into a larger
        table if the plan's ``map_entries`` fell short; direct maps need nothing)."""
        if isinstance(self._map, tuple):
            self._map = K.reserve_map(self._map, self.num_slots + self._pinned + self._foreseen + extra)

    @property
    def _wanted(self) -> np.ndarray:
        """Pin count per node (the node records' look-ahead counts without their foresight part)."""
        return self._nodes[:, K.WANTED] & K.PIN_MASK

    # -- look-ahead pinning ----------------------------------------------------------------------
    def pin(self, ids: np.ndarray, seq: int | None = None) -> Pin:
        """Count ``ids`` as wanted by queued batch ``seq`` (unique ids: the sampler's ``n_id``;
        ``seq`` None: the one after the last pinned, i.e. pins in the order batches will be used)."""
        ids = int64_ids(ids)
        seq = self._last_seq + 1 if seq is None else int(seq)
        self._last_seq = max(self._last_seq, seq)
        if self._next_use:
            if self._meta[K.FREE_COUNT] < len(ids):
                self._occ = K.grow_occurrences(self._occ, self._meta, 2 * len(self._occ) + len(ids))
            K.nu_announce(ids, seq, self._map, self._rec, self._head, self._occ, self._meta)
        else:
            self._reserve(len(ids))
            K.announce(ids, self._map, self._rec)
        self._pinned += len(ids)
        self._pin_order += 1
        pin = self._pins[seq] = Pin(self, ids, seq=seq, order=self._pin_order)
        return pin

    def foresee(self, ids: np.ndarray) -> Foresight:
        """Count ``ids`` (unique) as needed by a batch beyond the queued ones (the loader's foresight):
        their standby slots are evicted after the cold ones, before the pinned ones.  Only with the
        ``"lru-lookahead"`` policy (next-use orders rows by the queued seqs alone)."""
        if self._next_use:
            raise ConfigError("foresight needs the 'lru-lookahead' buffer policy; pass foresight=0 with 'next-use'")
        ids = np.ascontiguousarray(ids) if ids.dtype in (np.int32, np.int64) else int64_ids(ids)  # int32 kept: half the bytes held
        self._reserve(len(ids))
        K.foresee(ids, self._map, self._rec)
        self._foreseen += len(ids)
        return Foresight(self, ids)

    def _unforesee(self, ids: np.ndarray) -> None:
        K.unforesee(ids, self._map, self._rec)
        self._foreseen -= len(ids)

    def foreseen_rows(self) -> int:
        """Rows counted by foresights not yet released."""
        return self._foreseen

    def _withdraw(self, ids: np.ndarray, seq: int) -> None:
        if self._next_use:
            K.nu_withdraw(ids, seq, self._map, self._rec, self._head, self._occ, self._meta)
        else:
            K.withdraw(ids, self._map, self._rec)
        self._pinned -= len(ids)

    def pinned_rows(self) -> int:
        """Rows counted by pins not yet released (0 once every queued batch is taken or dropped)."""
        return self._pinned

    # -- one batch, streamed -----------------------------------------------------------------------
    async def extract(self, ids: np.ndarray, out: np.ndarray, source: SlotReader, *,
                      piece_rows: int | None = None, pin: Pin | None = None) -> None:
        """``out[i] = features[ids[i]]``, through the buffer in pieces of at most ``piece_rows`` rows
        (default: the whole buffer); ``pin`` (the batch's look-ahead hold) shrinks as pieces are taken."""
        ids = int64_ids(ids)
        limit = self.num_slots if piece_rows is None else max(1, min(piece_rows, self.num_slots))
        pos = 0
        while pos < len(ids):
            unpin = pin is not None and pin.counts(ids, pos)
            acq = await self.acquire(ids[pos:], limit=limit, unpin=unpin, seq=pin.seq if pin is not None else -1)
            n = len(acq.ids)
            ahead: Acquisition | None = None
            try:
                if pin is not None:
                    pin.advance(n, withdrawn=unpin)
                ahead = self._read_ahead(pin, limit - n, acq.ids[acq.read_mask], source)
                with read_priority(pin.order if pin is not None else URGENT):
                    await self.fill(acq, source, ahead)
                await self._copy_out(acq, out[pos : pos + n])
            finally:
                self.release(acq)
                if ahead is not None:
                    self.release(ahead)
            pos += n

    def _read_ahead(self, pin: Pin | None, room: int, own: np.ndarray, source: SlotReader) -> Acquisition | None:
        """Slots for the window's rows (``_window_plan``): when no window planned this batch, the
        missing rows (no slot holds them) that share a merged read, of up to ``read_ahead`` queued
        batches after it, whole batches while the rows planned fit ``room`` and the standby slots no
        queued batch needs.  The rows whose merged reads hold a row of the piece are returned, to be
        read in the piece's request; the rest are read now, one request per batch they serve first
        (:meth:`_read_window`), so the source merges neighbouring rows of the window into few reads
        and each batch goes as soon as its own request is in.  Never waits (None when nothing is
        planned, no slot is on standby or no planned row merges with the piece's).  The rows stay
        pinned by their own batches, which find them valid, or being read (they then await the read)."""
        if pin is None or self.read_ahead <= 0 or room <= 0 or pin.planned or self.merge_rows < 1:
            return None
        queued = []
        for seq in range(pin.seq + 1, pin.seq + 1 + self.read_ahead):
            nxt = self._pins.get(seq)
            if nxt is None or nxt.planned:  # not queued yet (or planned already): the window ends
                break
            queued.append(nxt)
        if not queued:
            return None
        seen: list[np.ndarray] = []  # the missing rows plan_window looked at, batch by batch

        def missing() -> Iterator[np.ndarray]:  # lazily: a batch's rows are looked up only if the window gets that far
            for p in queued:
                rest = p.ids[p.taken :]
                slots = np.empty(len(rest), np.int64)
                K.slots_of(rest, self._map, slots)
                seen.append(rest[slots < 0])
                yield seen[-1]

        ids, batches = plan_window(own, missing(), min(room, self.cold_slots()), self.merge_rows)
        for p in queued[:batches]:
            p.planned = True
        if not len(ids):
            return None
        acq = self._try_acquire(ids, len(ids), count=False)
        if acq is None:
            return None
        self.counters["windows"] += 1
        self.counters["window_batches"] += batches
        self.counters["read_ahead_rows"] += int(acq.read_mask.sum())
        group = window_groups(own, ids, seen[:batches], self.merge_rows)[: len(acq.ids)]  # acq: a prefix of ids
        self._reads.pop(acq.reader, None)  # nobody awaits it yet: its parts get readers of their own
        with_piece = None
        for g in np.unique(group).tolist():  # requests started in the order of the batches they serve
            part = self._split(acq, group == g)
            if g == 0:
                with_piece = part
            else:
                self._read_window(part, source, queued[g - 1].order)
        return with_piece

    async def _copy_out(self, acq: Acquisition, out: np.ndarray) -> None:
        """Copy the piece's rows into ``out`` and release its slots.  A large piece is copied by the
        buffer's copy thread (the kernel releases the GIL), so the event loop goes on reaping and
        submitting reads meanwhile: copied on the loop, a large batch (igb-like) held the loop longer
        than the reads in flight last, and the disk sat idle (``benchmarks/disk_idle_epoch.py``).  The slots
        stay held, so no read lands in them, until the copy ends, even if the caller is cancelled."""
        if out.nbytes < COPY_OFF_LOOP_BYTES:
            self.release(acq, copy_to=out)
            return
        if self._copier is None:
            self._copier = ThreadPoolExecutor(1, thread_name_prefix="outre-copy")
        loop = asyncio.get_running_loop()
        try:
            await uncancellable(loop.run_in_executor(self._copier, K.gather_rows, self._words, acq.slots, self._out_words(out)))
        finally:
            self.release(acq)

    def _split(self, acq: Acquisition, mask: np.ndarray) -> Acquisition:
        """The rows ``mask`` picks out of a window's acquisition (every one a read), with a reader of their
        own: a batch waiting on one of them then waits for that request only."""
        part = Acquisition(ids=acq.ids[mask], slots=acq.slots[mask], actions=acq.actions[mask])
        self._give_reader(part)
        return part

    def _give_reader(self, acq: Acquisition) -> None:
        """A reader id and its future for the rows ``acq`` reads (none when it reads none): whoever finds
        one of those slots being read awaits that future."""
        read = acq.slots[acq.read_mask]
        if len(read):
            acq.reader = self._next_reader
            self._next_reader += 1
            self._reader[read] = acq.reader
            self._reads[acq.reader] = asyncio.get_running_loop().create_future()

    def _read_window(self, part: Acquisition, source: SlotReader, priority: int) -> None:
        """Read one request of a window in a task of the buffer's (awaited by the batches that need its rows,
        cancelled and awaited by :meth:`aclose`), at the priority of the batch it serves first."""

        async def read() -> None:
            try:
                with read_priority(priority):
                    await self.fill(part, source)
            except Exception:  # noqa: S110  # fill settled the request's future with it: its batches raise it
                pass
            finally:
                self.release(part)

        self.counters["window_requests"] += 1
        task = asyncio.get_running_loop().create_task(read())  # started in order: the source queues by priority
        self._window_reads.add(task)
        task.add_done_callback(self._window_reads.discard)

    async def aclose(self) -> None:
        """Cancel the window requests still reading and wait for them (the source lets the reads they
        submitted finish first: the kernel writes into the slots until then)."""
        tasks = list(self._window_reads)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._copier is not None:  # no copy runs: every piece awaits its own copy
            self._copier.shutdown(wait=True)
            self._copier = None

    async def acquire(self, ids: np.ndarray, *, limit: int | None = None, unpin: bool = False,
                      seq: int = -1) -> Acquisition:
        """Hold slots for a prefix of ``ids`` (at least one row, at most ``limit``), waiting for a
        release only when no slot at all is on standby.  Empty ``ids``: an empty acquisition.
        ``unpin``: the rows taken leave the look-ahead counts too (the caller advances its pin with
        ``withdrawn=True``; ``seq``: the pin's batch, which next-use eviction withdraws them from)."""
        ids = int64_ids(ids)
        limit = len(ids) if limit is None else limit
        while (acq := self._try_acquire(ids, limit, unpin, seq)) is None:
            self.counters["acquire_waits"] += 1
            self._released.clear()
            await self._released.wait()
        return acq

    def _try_acquire(self, ids: np.ndarray, limit: int, unpin: bool = False, seq: int = -1, *,
                     count: bool = True) -> Acquisition | None:
        slots = np.empty(min(len(ids), limit), dtype=np.int64)
        actions = np.empty(len(slots), dtype=np.int8)
        if self._next_use:
            taken = int(K.nu_acquire(ids, self._map, self._rec, self._head, self._occ, self._meta, slots, actions,
                                     limit, seq if unpin else -1))
        else:
            taken = int(K.acquire(ids, self._map, self._rec, slots, actions, limit, unpin))
        if taken == 0 and len(slots):
            return None
        acq = Acquisition(ids=ids[:taken], slots=slots[:taken], actions=actions[:taken])
        self._give_reader(acq)
        waiting = acq.slots[acq.actions == K.WAIT]
        if len(waiting):  # a WAIT row's reader has not settled yet
            acq.waits = [self._reads[r] for r in np.unique(self._reader[waiting]).tolist()]
        if count:
            self._count(acq.actions)
        else:
            K.count_actions(acq.actions, self._ahead_actions)
        return acq

    def _count(self, actions: np.ndarray) -> None:
        self.counters["pieces"] += 1
        K.count_actions(actions, self._actions)

    async def fill(self, acq: Acquisition, source: SlotReader, ahead: Acquisition | None = None) -> None:
        """Read this piece's missing rows into their slots through ``source`` (its batched
        ``read_rows_into`` hook), with the rows ``ahead`` holds for queued batches in the same
        request (:meth:`_read_ahead`), then await rows others are reading."""
        read_slots, read_ids = acq.slots[acq.read_mask], acq.ids[acq.read_mask]
        if ahead is not None:
            read_slots = np.concatenate([read_slots, ahead.slots[ahead.read_mask]])
            read_ids = np.concatenate([read_ids, ahead.ids[ahead.read_mask]])
        try:
            if len(read_slots):
                await source.read_rows_into(read_ids, self.data, read_slots)
                K.mark_valid(read_slots, self._rec)
        except BaseException as exc:
            K.invalidate(read_slots, self._map, self._rec)
            self._settle(acq, exc)
            if ahead is not None:
                self._settle(ahead, exc)
            raise
        self._settle(acq, None)
        if ahead is not None:
            self._settle(ahead, None)
        for fut in acq.waits:
            await fut

    def _settle(self, acq: Acquisition, exc: BaseException | None) -> None:
        fut = self._reads.pop(acq.reader, None)
        if fut is None or fut.done():
            return
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            fut.exception()  # retrieved here: a piece nobody waits for must not warn

    def _out_words(self, out: np.ndarray) -> np.ndarray:
        """``out`` as the kernels' words, refused unless it holds the slots' dtype (a bit copy into other
        words would be garbage, not a conversion)."""
        if out.dtype != self.data.dtype:
            raise ConfigError(f"rows copied out of the feature buffer go to a {self.data.dtype} matrix (its held words), "
                              f"got {out.dtype}; decode after the copy (features._decode)")
        return row_words(out)

    def gather(self, acq: Acquisition) -> np.ndarray:
        """The piece's rows ``[len(ids), dim]``, copied out of the slots."""
        out = np.empty((len(acq.slots), self.data.shape[1]), dtype=self.data.dtype)
        K.gather_rows(self._words, acq.slots, row_words(out))
        return out

    def release(self, acq: Acquisition, *, copy_to: np.ndarray | None = None) -> None:
        """Give the piece's slots back (idempotent); they keep their rows on a standby list.
        ``copy_to``: first copy the piece's rows there (one kernel pass: copy, then release)."""
        if acq.released:
            return
        acq.released = True
        if self._next_use:
            if copy_to is None:
                K.nu_release(acq.slots, self._map, self._rec, self._head, self._occ, self._meta)
            else:
                K.nu_gather_release(self._words, acq.slots, self._out_words(copy_to), self._map, self._rec, self._head, self._occ,
                                    self._meta)
        elif copy_to is None:
            K.release(acq.slots, self._map, self._rec)
        else:
            K.gather_release(self._words, acq.slots, self._out_words(copy_to), self._map, self._rec)
        self._released.set()

    def free_slots(self) -> int:
        """Slots nobody holds (the standby lists' length)."""
        return int((self._rec[: self.num_slots, K.STATE] < K.REF).sum())

    def cold_slots(self) -> int:
        """Standby slots whose rows no queued batch needs (empty ones included; foreseen ones too): what
        a window may read into without evicting a row a pinned batch will take."""
        return int(K.cold_slot_count(self._map, self._rec, self.num_slots))

    def stats(self) -> dict[str, int | float]:
        c: dict[str, int | float] = dict(self.counters)
        hits, reads, waits = self._actions.tolist()
        c.update(rows=hits + reads + waits, hits=hits, reads=reads, waits=waits)
        c["hit_rate"] = c["hits"] / c["rows"] if c["rows"] else 0.0
        c["slots"] = self.num_slots
        c["free_slots"] = self.free_slots()
        c["pinned_rows"] = self._pinned
        c["foreseen_rows"] = self._foreseen
        return c
