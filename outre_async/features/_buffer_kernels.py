"""numba bookkeeping of the feature buffer (GNNDrive §4.2, Algorithm 1, plus GIDS's window
buffering): arrays in, arrays out.

State (owned by one event loop, so no locks), laid out so that one row costs few cache misses:

* ``nodes``, one int32 record of two values per node: ``SLOT`` its slot (-1: none) and ``WANTED`` its
  look-ahead counts: the low 20 bits (``PIN_MASK``) count the batches sampled and queued, not yet
  extracted, that need it (pins), the bits above count in units of ``FORESEE`` the batches further
  ahead whose rows the loader's foresight announced (``loader._foresight``).  Either the direct array
  ``[N, 2]`` (record of ``v`` at row ``v``) or a hash table ``(keys, vals)`` holding only the nodes
  with a slot or a count (``outre_async.sampling._id_map_kernels``: an entry is added when a node gets either
  and dropped when it has neither); the buffer picks the smaller (``map_bytes``), numba compiles
  each kernel for both, and the next-use kernels take the direct array only;
* ``rec[S + 3, 4]`` int64, one record per slot: ``PREV``, ``NEXT`` (its standby list links),
  ``NODE`` (-1: empty) and ``STATE`` = 2 x refs (pieces holding it) + valid (its row was read).
  Rows ``S``, ``S + 1`` and ``S + 2`` are the sentinels of three doubly-linked standby lists of slots
  with no refs, each in release order (head = least recently released): ``S`` heads the *cold* list
  (rows no batch in sight needs), ``S + 1`` the *foreseen* list (rows only batches beyond the queue
  need), ``S + 2`` the *wanted* list (rows a queued batch will read again).

Why records: a row taken as a hit reads its node's record, its slot's record and its two standby
neighbours' records, four cache lines; with one array per field (slot_of, wanted, node_of, refs,
valid, prev, next) the same step touched seven, and at budgets where most rows are hits these kernels
were the largest user CPU of the loader; records cut their time per batch row
(``benchmarks/bench_buffer_kernels.py`` replays an epoch through them).

Prefetch (:mod:`outre_async._cache_hints`): batch ids are random over ``nodes`` and slots random
over ``rec`` and the 1 KiB rows of ``data``, so each row starts with cache misses, and in
:func:`acquire` and :func:`release` each miss feeds the next address and the standby list links
chain the rows, so the core cannot overlap them by itself.  The loops therefore prefetch ``AHEAD``
rows ahead: :func:`acquire` the node record of ``ids[i + 2 * AHEAD]`` and the slot record of
``ids[i + AHEAD]`` (two stages: the slot is read from the node record prefetched earlier); the
release and gather loops the slot record and the whole data row of ``slots[i + AHEAD]``.  That made
every kernel but the announces faster per batch row, and distances around ``AHEAD`` were flat while
larger ones were slower for the data rows (``benchmarks/bench_buffer_kernels.py``).  :func:`announce` and
:func:`withdraw` are left without: their rows are independent (the core already overlaps them) and
the extra look-ahead load made announce slower (same benchmark).

A slot on a standby list keeps its row: a later batch that needs the node takes it back without I/O.
Eviction takes the head of the cold list (least recently released); only when the cold list is
empty does it take the *tail* of the foreseen list, and only when that is empty too the tail of the
wanted list: the row most recently foreseen, pinned or released, which is needed by the batch
announced last, so furthest in the future (Belady's choice, approximately; the heads hold rows of the
batches announced first, needed soonest).  The pin is a preference, never a
reason to wait: a batch that finds only wanted rows on standby evicts one rather than wait for a
release that may never come.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._cache_hints import prefetch, prefetch_row
from ..sampling._id_map_kernels import (bucket, bucket_or_add, capacity_for, drop_bucket, is_table, key_dtype, new_table,
                               prefetch_home, rehash, values_of)
from ..sampling._id_map_kernels import table_bytes as id_table_bytes

HIT, READ, WAIT = 0, 1, 2  # what acquire decided for each row
SLOT, WANTED = 0, 1  # columns of nodes
FORESEE = 1 << 20  # nodes[v, WANTED]: pins count in the low 20 bits, foresight in units of this above
PIN_MASK = FORESEE - 1
MAX_FORESIGHT = (1 << 31) // FORESEE - 1  # batches that may foresee one row at once (int32 records)
LISTS = 3  # standby lists after the slots' records: cold, foreseen, wanted
PREV, NEXT, NODE, STATE = 0, 1, 2, 3  # columns of rec
REF = 2  # one reference in STATE (bit 0 is valid)
AHEAD = 8  # prefetch distance in rows (see _cache_hints; measured with benchmarks/bench_buffer_kernels.py)


def slot_bytes() -> int:
    """What a slot holds besides its row, for the memory plan (``loader._budget``): its record here
    (node id, refs and valid bit, LRU links: 4 x int64) and the buffer's reader id (int64)."""
    return 40


def table_bytes(num_nodes: int) -> int:
    """The node -> slot table as a direct array: per node its slot and its look-ahead count (2 x int32)."""
    return 8 * num_nodes


def hash_map_bytes(entries: int, num_nodes: int) -> int:
    """The node -> slot table as a hash table of ``entries`` nodes at most (a key, int32 where the node
    ids fit, and the two int32 values per bucket, ``capacity_for`` buckets)."""
    return id_table_bytes(entries, 2, num_nodes)


def map_bytes(num_nodes: int, entries: int | None) -> int:
    """The node -> slot table the buffer builds: the smaller of the direct array and a hash table of
    ``entries`` nodes (slots plus rows counted by pins and foresight; None: the array)."""
    if entries is None:
        return table_bytes(num_nodes)
    return min(table_bytes(num_nodes), hash_map_bytes(entries, num_nodes))


def reserve_map(nodes: tuple[np.ndarray, np.ndarray], entries: int) -> tuple[np.ndarray, np.ndarray]:
    """A hash table ``nodes`` with room for ``entries`` at most half full: itself, or its entries
    rehashed into a larger one."""
    cap = capacity_for(entries)
    if cap <= len(nodes[0]):
        return nodes
    keys, vals = new_table(cap, 2, -1, nodes[0].dtype)
    rehash(nodes[0], nodes[1], keys, vals)
    return keys, vals


def next_use_bytes(num_nodes: int, queued_rows: int) -> int:
    """``policy="next-use"``'s chains: a head per node (int32) and a use record (seq, link: 16
    bytes) per row of a queued batch (``new_next_use_state``)."""
    return 4 * num_nodes + 16 * queued_rows


def new_state(num_nodes: int, num_slots: int,
              map_entries: int | None = None) -> tuple[np.ndarray | tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Fresh ``(nodes, rec)``: no node mapped, every slot empty on the cold list; ``nodes`` a hash table
    for ``map_entries`` nodes where that is smaller than the direct array (``map_bytes``)."""
    rec = np.zeros((num_slots + LISTS, 4), dtype=np.int64)
    rec[:, NODE] = -1
    lru_init(rec)
    if map_entries is not None:
        entries = max(map_entries, num_slots)
        if hash_map_bytes(entries, num_nodes) < table_bytes(num_nodes):
            return new_table(capacity_for(entries), 2, -1, key_dtype(num_nodes)), rec
    nodes = np.zeros((num_nodes, 2), dtype=np.int32)
    nodes[:, SLOT] = -1
    return nodes, rec


@njit(cache=True, nogil=True)
def lru_init(rec: np.ndarray) -> None:
    """Put every slot on the cold list in index order; the foreseen and wanted lists start empty."""
    s = len(rec) - LISTS
    cold = s
    for i in range(s):
        rec[i, PREV] = i - 1 if i > 0 else cold
        rec[i, NEXT] = i + 1 if i < s - 1 else cold
    rec[cold, NEXT] = 0 if s > 0 else cold
    rec[cold, PREV] = s - 1 if s > 0 else cold
    for sentinel in range(s + 1, s + LISTS):  # the foreseen and wanted lists start empty
        rec[sentinel, NEXT] = sentinel
        rec[sentinel, PREV] = sentinel


@njit(cache=True, nogil=True, inline="always")
def _unlink(rec: np.ndarray, slot: np.int64) -> None:
    p, n = rec[slot, PREV], rec[slot, NEXT]
    rec[p, NEXT] = n
    rec[n, PREV] = p
    rec[slot, PREV] = -1
    rec[slot, NEXT] = -1


@njit(cache=True, nogil=True, inline="always")
def _append(rec: np.ndarray, slot: np.int64, sentinel: np.int64) -> None:
    last = rec[sentinel, PREV]
    rec[last, NEXT] = slot
    rec[slot, PREV] = last
    rec[slot, NEXT] = sentinel
    rec[sentinel, PREV] = slot


@njit(cache=True, nogil=True, inline="always")
def _prepend(rec: np.ndarray, slot: np.int64, sentinel: np.int64) -> None:
    first = rec[sentinel, NEXT]
    rec[first, PREV] = slot
    rec[slot, NEXT] = first
    rec[slot, PREV] = sentinel
    rec[sentinel, NEXT] = slot


@njit(cache=True, nogil=True, inline="always")
def _park(rec: np.ndarray, slot: np.int64, which: np.int64) -> None:
    """Put a standby slot on list ``which`` (:func:`_list_for`): at the tail, except on the foreseen list,
    where a row just released or unpinned goes to the head (evicted last of the foreseen).  Why: the
    foreseen tail is evicted first because it holds the rows foreseen last, for the batch furthest
    ahead; a row that a batch just used and one further ahead needs again is a hot row, whose next
    use is usually close, and at the tail it was evicted before them (replaying papers-like's epoch,
    ``benchmarks/replay_window_reads.py``)."""
    sentinel = len(rec) - LISTS + which
    if which == 1:
        _prepend(rec, slot, sentinel)
    else:
        _append(rec, slot, sentinel)


@njit(cache=True, nogil=True, inline="always")
def _list_for(count) -> np.int64:
    """Which standby list (0 cold, 1 foreseen, 2 wanted) a row with this ``nodes[v, WANTED]`` count
    belongs on: wanted when a queued batch pins it, foreseen when only a batch further ahead does."""
    return 2 if count & PIN_MASK else (1 if count else 0)


@njit(cache=True, nogil=True, inline="always")
def _list_of(nodes, rec, slot) -> np.int64:
    """The standby list a released slot belongs on (:func:`_list_for` of its row)."""
    node = rec[slot, NODE]
    count = values_of(nodes)[bucket(nodes, node), WANTED] if node >= 0 else 0  # a node with a slot has a record
    return _list_for(count)


@njit(cache=True, nogil=True, inline="always")
def standby_empty(rec: np.ndarray) -> bool:
    cold = len(rec) - LISTS
    return rec[cold, NEXT] == cold and rec[cold + 1, NEXT] == cold + 1 and rec[cold + 2, NEXT] == cold + 2


@njit(cache=True, nogil=True, inline="always")
def evict_lru_slot(nodes, rec) -> np.int64:
    """Evict a standby slot for a new row: the head of the cold list, else the tail of the foreseen
    list, else the tail of the wanted list (a tail holds the row foreseen or pinned last, for the batch
    furthest ahead); take it off its list, unmap the node whose row it held, return it.
    The caller checks :func:`standby_empty` first.

    The store is branch-free on purpose (an empty slot, ``old == -1``, rewrites ``nodes[0]`` with
    its own value): with a conditional store in here, numba keeps reference counting of the arrays
    on every inlined call, which made :func:`acquire` measurably slower (``benchmarks/bench_buffer_kernels.py``).
    """
    cold = len(rec) - LISTS
    s = rec[cold, NEXT] if rec[cold, NEXT] != cold else (
        rec[cold + 1, PREV] if rec[cold + 1, NEXT] != cold + 1 else rec[cold + 2, PREV])
    _unlink(rec, s)
    old = rec[s, NODE]
    vals = values_of(nodes)
    if is_table(nodes):
        if old >= 0:
            b = bucket(nodes, old)
            vals[b, SLOT] = -1
            _drop_idle(nodes, vals, b)
    else:
        target = max(old, 0)
        vals[target, SLOT] = -1 if old >= 0 else vals[target, SLOT]
    return s


@njit(cache=True, nogil=True, inline="always")
def _drop_idle(nodes, vals, b) -> None:
    """A hash table forgets a node with neither a slot nor a count (nothing when direct)."""
    if is_table(nodes) and b >= 0 and vals[b, SLOT] < 0 and vals[b, WANTED] == 0:
        drop_bucket(nodes, b)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_records(ids, nodes, rec, i, n) -> None:
    """Two-stage prefetch for a loop at row ``i`` of ``ids[:n]``: the node record of the row
    ``2 * AHEAD`` ahead, and the slot record of the row ``AHEAD`` ahead (its node record was
    prefetched ``AHEAD`` rows ago, so reading its slot is a hit by now)."""
    prefetch_home(nodes, ids[min(i + 2 * AHEAD, n - 1)])
    b = bucket(nodes, ids[min(i + AHEAD, n - 1)])
    prefetch(rec, values_of(nodes)[max(b, 0), SLOT])


@njit(cache=True, nogil=True, inline="always")
def _prefetch_direct(ids, nodes, rec, i, n) -> None:
    """:func:`_prefetch_records` of the direct array (the next-use kernels')."""
    prefetch(nodes, ids[min(i + 2 * AHEAD, n - 1)])
    prefetch(rec, nodes[ids[min(i + AHEAD, n - 1)], SLOT])


@njit(cache=True, nogil=True)
def acquire(ids, nodes, rec, slots_out, action_out, limit, unpin=False) -> np.int64:
    """Take a reference on a slot for each id of a prefix of ``ids`` (at most ``limit`` rows).

    Valid rows are hits, rows being read by another batch (or earlier in this prefix) must be
    awaited, the rest get a slot from :func:`evict_lru_slot` and must be read.  Returns the length of
    the prefix taken: ``min(len(ids), limit)`` unless the standby lists ran dry first; the caller
    keeps what was taken (a batch streams through the buffer piece by piece).  ``unpin``: also
    :func:`withdraw` each row taken (the batch's pin counted exactly these ids), in the same pass:
    a held slot is on no standby list, so only the count changes.
    """
    vals = values_of(nodes)
    n = min(len(ids), limit)
    for i in range(n):
        _prefetch_records(ids, nodes, rec, i, n)
        v = ids[i]
        b = bucket(nodes, v)
        s = vals[b, SLOT] if b >= 0 else -1
        if s >= 0:
            state = rec[s, STATE]
            if state > 0:  # valid, or held by a piece that is reading it
                if state < REF:  # valid and on standby
                    _unlink(rec, s)
                rec[s, STATE] = state + REF
                slots_out[i] = s
                action_out[i] = HIT if state & 1 else WAIT
                if unpin:
                    vals[b, WANTED] -= 1
                continue
            # a mapping without a row (a read that failed): drop it, read afresh
            vals[b, SLOT] = -1
            rec[s, NODE] = -1
            _unlink(rec, s)
            _append(rec, s, len(rec) - LISTS)
        if standby_empty(rec):
            _drop_idle(nodes, vals, b)
            return i
        s = evict_lru_slot(nodes, rec)  # may move table entries: v's is looked up again
        b = bucket_or_add(nodes, v, -1)
        rec[s, NODE] = v
        rec[s, STATE] = REF
        vals[b, SLOT] = s
        if unpin:
            vals[b, WANTED] -= 1
        slots_out[i] = s
        action_out[i] = READ
    return n


@njit(cache=True, nogil=True)
def count_actions(actions, counts) -> None:
    """``counts[a] += (actions == a).sum()`` for HIT, READ, WAIT: one pass, no temporaries."""
    for i in range(len(actions)):
        counts[actions[i]] += 1


@njit(cache=True, nogil=True)
def mark_valid(slots, rec) -> None:
    """The rows of ``slots`` (held, just read) are valid now."""
    for i in range(len(slots)):
        rec[slots[i], STATE] |= 1


@njit(cache=True, nogil=True, inline="always")
def _release_one(nodes, rec, s) -> None:
    state = rec[s, STATE] - REF
    rec[s, STATE] = state
    if state < REF:
        _park(rec, s, _list_of(nodes, rec, s))


@njit(cache=True, nogil=True)
def release(slots, nodes, rec) -> None:
    """Drop one reference per slot; slots nobody holds go to the tail (most recent) of their standby
    list: the wanted list when a queued batch needs the row, else the cold list."""
    n = len(slots)
    for i in range(n):
        prefetch(rec, slots[min(i + AHEAD, n - 1)])
        _release_one(nodes, rec, slots[i])


@njit(cache=True, nogil=True)
def gather_release(data, slots, out, nodes, rec) -> None:
    """:func:`gather_rows` then :func:`release`, in one pass over the piece's slots."""
    dim = data.shape[1]
    n = len(slots)
    for i in range(n):
        prefetch_row(data, slots[min(i + AHEAD, n - 1)])
        prefetch(rec, slots[min(i + AHEAD, n - 1)])
        s = slots[i]
        for j in range(dim):
            out[i, j] = data[s, j]
        _release_one(nodes, rec, s)


@njit(cache=True, nogil=True)
def announce(ids, nodes, rec) -> None:
    """A batch that needs ``ids`` was queued: count it, and move the standby slots of rows that just
    became wanted from the cold list to the wanted list."""
    vals = values_of(nodes)
    for i in range(len(ids)):
        v = ids[i]
        b = bucket_or_add(nodes, v, -1)
        w = vals[b, WANTED] + 1
        vals[b, WANTED] = w
        s = vals[b, SLOT]
        if w & PIN_MASK == 1 and s >= 0 and rec[s, STATE] < REF:
            _unlink(rec, s)
            _append(rec, s, len(rec) - 1)


@njit(cache=True, nogil=True)
def withdraw(ids, nodes, rec) -> None:
    """Undo :func:`announce` for ``ids`` (taken by their batch, or dropped): standby slots of rows no
    queued batch needs any more go to the tail of the foreseen list (a batch further ahead needs them)
    or of the cold list."""
    vals = values_of(nodes)
    for i in range(len(ids)):
        b = bucket(nodes, ids[i])
        if b < 0:  # a table lacks only ids nobody counted
            continue
        w = vals[b, WANTED] - 1
        vals[b, WANTED] = w
        s = vals[b, SLOT]
        if w & PIN_MASK == 0 and s >= 0 and rec[s, STATE] < REF:
            _unlink(rec, s)
            _park(rec, s, _list_for(w))
        _drop_idle(nodes, vals, b)


@njit(cache=True, nogil=True)
def foresee(ids, nodes, rec) -> None:
    """A batch further ahead than the queue needs ``ids`` (the loader's foresight): count it, and move
    the standby slots of rows nothing needed before from the cold list to the foreseen list's tail."""
    vals = values_of(nodes)
    for i in range(len(ids)):
        b = bucket_or_add(nodes, ids[i], -1)
        w = vals[b, WANTED] + FORESEE
        vals[b, WANTED] = w
        s = vals[b, SLOT]
        if w == FORESEE and s >= 0 and rec[s, STATE] < REF:
            _unlink(rec, s)
            _append(rec, s, len(rec) - LISTS + 1)


@njit(cache=True, nogil=True)
def unforesee(ids, nodes, rec) -> None:
    """Undo :func:`foresee` for ``ids`` (their batch was pinned, or dropped): standby slots of rows
    nothing needs any more go back to the cold list's tail."""
    vals = values_of(nodes)
    for i in range(len(ids)):
        b = bucket(nodes, ids[i])
        if b < 0:
            continue
        w = vals[b, WANTED] - FORESEE
        vals[b, WANTED] = w
        s = vals[b, SLOT]
        if w == 0 and s >= 0 and rec[s, STATE] < REF:
            _unlink(rec, s)
            _append(rec, s, len(rec) - LISTS)
        _drop_idle(nodes, vals, b)


@njit(cache=True, nogil=True)
def invalidate(slots, nodes, rec) -> None:
    """Forget the rows of held slots whose read failed, so no later batch takes them as hits."""
    for i in range(len(slots)):
        s = slots[i]
        node = rec[s, NODE]
        if node >= 0:
            vals = values_of(nodes)
            b = bucket(nodes, node)
            if b >= 0:
                vals[b, SLOT] = -1
                _drop_idle(nodes, vals, b)
        rec[s, NODE] = -1
        rec[s, STATE] &= ~np.int64(1)


@njit(cache=True, nogil=True)
def gather_rows(data, slots, out) -> None:
    """``out[i] = data[slots[i]]`` for every row: a piece of the batch matrix, from buffer slots.

    An explicit element loop, not ``out[i, :] = data[slots[i], :]``: numba builds two array views
    per row for the slice form, which cost several times the user CPU of this loop, the largest per-row
    cost left in the loader once reads went to numba (``benchmarks/bench_buffer_kernels.py``)."""
    dim = data.shape[1]
    n = len(slots)
    for i in range(n):
        prefetch_row(data, slots[min(i + AHEAD, n - 1)])
        s = slots[i]
        for j in range(dim):
            out[i, j] = data[s, j]


@njit(cache=True, nogil=True)
def slots_of(ids, nodes, out) -> None:
    """``out[i]``: the slot mapped to ``ids[i]`` (-1: none)."""
    vals = values_of(nodes)
    for i in range(len(ids)):
        b = bucket(nodes, ids[i])
        out[i] = vals[b, SLOT] if b >= 0 else -1


@njit(cache=True, nogil=True)
def cold_slot_count(nodes, rec, num_slots) -> np.int64:
    """Standby slots whose row no queued batch pins (empty ones included)."""
    vals = values_of(nodes)
    n = 0
    for s in range(num_slots):
        if rec[s, STATE] < REF:
            node = rec[s, NODE]
            if node < 0 or vals[bucket(nodes, node), WANTED] & PIN_MASK == 0:
                n += 1
    return n


# -- next-use eviction (Belady within the window of queued batches; tests/features/test_next_use.py) ---
#
# Same ``nodes`` and ``rec`` as above, plus the *occurrences* of each row in queued batches: every
# pinned batch ``seq`` that needs node ``v`` is one record ``occ[o] = (SEQ, LINK)`` on ``v``'s chain
# ``head[v] -> ... -> -1``, sorted by seq, so ``occ[head[v], SEQ]`` is the row's next use.  Free records
# are chained from ``meta[FREE]`` (the Python side grows ``occ`` before an announce could run out).
# ``rec`` has ``S + 1 + B`` rows: ``S`` is the cold list (rows with no known next use, evicted first,
# least recently released first: LRU beyond the window) and ``S + 1 + (seq % B)`` the bucket of
# standby rows whose next use is batch ``seq``.  Eviction takes the cold head, else the tail of the
# non-empty bucket of the largest next use, scanning down from ``meta[HI]`` (the largest seq pinned):
# with ``B`` above the span of queued seqs every bucket holds one seq and the choice is Belady's
# within the window (rows of equal next use are interchangeable: both are used by that batch, so
# the rows cached afterwards are the same whichever was kept).
OCC_SEQ, OCC_LINK = 0, 1
FREE, FREE_COUNT, HI, NUM_SLOTS, BUCKETS = 0, 1, 2, 3, 4  # fields of meta


def new_next_use_state(num_nodes: int, num_slots: int, buckets: int,
                       occurrences: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fresh ``(nodes, rec, head, occ, meta)``: every slot empty on the cold list, no row pinned."""
    nodes = np.zeros((num_nodes, 2), dtype=np.int32)
    nodes[:, SLOT] = -1
    rec = np.zeros((num_slots + 1 + buckets, 4), dtype=np.int64)
    rec[:, NODE] = -1
    for b in range(num_slots, num_slots + 1 + buckets):
        rec[b, PREV] = rec[b, NEXT] = b
    for i in range(num_slots):
        rec[i, PREV] = i - 1 if i > 0 else num_slots
        rec[i, NEXT] = i + 1 if i < num_slots - 1 else num_slots
    if num_slots:
        rec[num_slots, NEXT], rec[num_slots, PREV] = 0, num_slots - 1
    head = np.full(num_nodes, -1, dtype=np.int32)
    meta = np.array([-1, 0, -1, num_slots, buckets], dtype=np.int64)
    occ = np.zeros((0, 2), dtype=np.int64)
    return nodes, rec, head, grow_occurrences(occ, meta, occurrences), meta


def grow_occurrences(occ: np.ndarray, meta: np.ndarray, size: int) -> np.ndarray:
    """``occ`` enlarged to ``size`` records, the new ones chained onto the free list."""
    old = len(occ)
    if size <= old:
        return occ
    out = np.zeros((size, 2), dtype=np.int64)
    out[:old] = occ
    out[old:, OCC_LINK] = np.arange(old + 1, size + 1)
    out[size - 1, OCC_LINK] = meta[FREE]
    meta[FREE] = old
    meta[FREE_COUNT] += size - old
    return out


@njit(cache=True, nogil=True, inline="always")
def _nu_list_of(nodes, rec, head, occ, meta, slot) -> np.int64:
    """The standby list a slot with no refs belongs on: its next use's bucket, or cold."""
    node = rec[slot, NODE]
    s = meta[NUM_SLOTS]
    if node < 0 or head[node] < 0:
        return s
    return s + 1 + occ[head[node], OCC_SEQ] % meta[BUCKETS]


@njit(cache=True, nogil=True, inline="always")
def _nu_insert(v, seq, head, occ, meta) -> bool:
    """Add batch ``seq`` to ``v``'s chain (kept sorted); True when it became the next use."""
    o = meta[FREE]
    meta[FREE] = occ[o, OCC_LINK]
    meta[FREE_COUNT] -= 1
    occ[o, OCC_SEQ] = seq
    h = head[v]
    if h < 0 or occ[h, OCC_SEQ] > seq:
        occ[o, OCC_LINK] = h
        head[v] = o
        return True
    p = h
    while occ[p, OCC_LINK] >= 0 and occ[occ[p, OCC_LINK], OCC_SEQ] <= seq:
        p = occ[p, OCC_LINK]
    occ[o, OCC_LINK] = occ[p, OCC_LINK]
    occ[p, OCC_LINK] = o
    return False


@njit(cache=True, nogil=True, inline="always")
def _nu_remove(v, seq, head, occ, meta) -> bool:
    """Drop batch ``seq`` from ``v``'s chain (no-op if absent); True when it was the next use."""
    p = -1
    o = head[v]
    while o >= 0 and occ[o, OCC_SEQ] != seq:
        p = o
        o = occ[o, OCC_LINK]
    if o < 0:
        return False
    if p < 0:
        head[v] = occ[o, OCC_LINK]
    else:
        occ[p, OCC_LINK] = occ[o, OCC_LINK]
    occ[o, OCC_LINK] = meta[FREE]
    meta[FREE] = o
    meta[FREE_COUNT] += 1
    return p < 0


@njit(cache=True, nogil=True)
def nu_announce(ids, seq, nodes, rec, head, occ, meta) -> None:
    """Batch ``seq`` needing ``ids`` was queued: count it, chain it, and move standby slots whose
    next use became ``seq`` to its bucket.  The caller made sure ``len(ids)`` free records exist."""
    if seq > meta[HI]:
        meta[HI] = seq
    for i in range(len(ids)):
        v = ids[i]
        nodes[v, WANTED] += 1
        if _nu_insert(v, seq, head, occ, meta):
            s = nodes[v, SLOT]
            if s >= 0 and rec[s, STATE] < REF:
                _unlink(rec, s)
                _append(rec, s, _nu_list_of(nodes, rec, head, occ, meta, s))


@njit(cache=True, nogil=True)
def nu_withdraw(ids, seq, nodes, rec, head, occ, meta) -> None:
    """Undo :func:`nu_announce` for ``ids`` of batch ``seq`` (taken, or dropped): standby slots whose
    next use changed move to its new bucket (or the cold list's tail)."""
    for i in range(len(ids)):
        v = ids[i]
        nodes[v, WANTED] -= 1
        if _nu_remove(v, seq, head, occ, meta):
            s = nodes[v, SLOT]
            if s >= 0 and rec[s, STATE] < REF:
                _unlink(rec, s)
                _append(rec, s, _nu_list_of(nodes, rec, head, occ, meta, s))


@njit(cache=True, nogil=True, inline="always")
def nu_evict_slot(nodes, rec, meta) -> np.int64:
    """Evict a standby slot (-1 if none): the cold head, else the tail of the bucket of the furthest
    next use; unmap the node whose row it held.  Branch-free store as in :func:`evict_lru_slot`."""
    cold = meta[NUM_SLOTS]
    s = rec[cold, NEXT]
    if s == cold:
        b = meta[BUCKETS]
        hi = max(meta[HI], 0)
        s = -1
        for k in range(b):
            bucket = cold + 1 + (hi - k) % b
            if rec[bucket, PREV] != bucket:
                s = rec[bucket, PREV]
                break
        if s < 0:
            return s
    _unlink(rec, s)
    old = rec[s, NODE]
    target = max(old, 0)
    nodes[target, SLOT] = -1 if old >= 0 else nodes[target, SLOT]
    return s


@njit(cache=True, nogil=True)
def nu_acquire(ids, nodes, rec, head, occ, meta, slots_out, action_out, limit, unpin_seq) -> np.int64:
    """:func:`acquire` with next-use eviction; ``unpin_seq >= 0``: withdraw each row taken from
    batch ``unpin_seq``'s pin in the same pass (the slot is held: only the chain changes)."""
    n = min(len(ids), limit)
    for i in range(n):
        _prefetch_direct(ids, nodes, rec, i, n)
        v = ids[i]
        s = nodes[v, SLOT]
        if s >= 0:
            state = rec[s, STATE]
            if state > 0:
                if state < REF:
                    _unlink(rec, s)
                rec[s, STATE] = state + REF
                slots_out[i] = s
                action_out[i] = HIT if state & 1 else WAIT
                if unpin_seq >= 0:
                    nodes[v, WANTED] -= 1
                    _nu_remove(v, unpin_seq, head, occ, meta)
                continue
            nodes[v, SLOT] = -1
            rec[s, NODE] = -1
            _unlink(rec, s)
            _append(rec, s, meta[NUM_SLOTS])
        s = nu_evict_slot(nodes, rec, meta)
        if s < 0:
            return i
        rec[s, NODE] = v
        rec[s, STATE] = REF
        nodes[v, SLOT] = s
        if unpin_seq >= 0:
            nodes[v, WANTED] -= 1
            _nu_remove(v, unpin_seq, head, occ, meta)
        slots_out[i] = s
        action_out[i] = READ
    return n


@njit(cache=True, nogil=True, inline="always")
def _nu_release_one(nodes, rec, head, occ, meta, s) -> None:
    state = rec[s, STATE] - REF
    rec[s, STATE] = state
    if state < REF:
        _append(rec, s, _nu_list_of(nodes, rec, head, occ, meta, s))


@njit(cache=True, nogil=True)
def nu_release(slots, nodes, rec, head, occ, meta) -> None:
    """:func:`release` with next-use lists: a slot nobody holds goes to its next use's bucket."""
    n = len(slots)
    for i in range(n):
        prefetch(rec, slots[min(i + AHEAD, n - 1)])
        _nu_release_one(nodes, rec, head, occ, meta, slots[i])


@njit(cache=True, nogil=True)
def nu_gather_release(data, slots, out, nodes, rec, head, occ, meta) -> None:
    """:func:`gather_rows` then :func:`nu_release`, in one pass."""
    dim = data.shape[1]
    n = len(slots)
    for i in range(n):
        prefetch_row(data, slots[min(i + AHEAD, n - 1)])
        prefetch(rec, slots[min(i + AHEAD, n - 1)])
        s = slots[i]
        for j in range(dim):
            out[i, j] = data[s, j]
        _nu_release_one(nodes, rec, head, occ, meta, s)


@njit(cache=True, nogil=True)
def nu_free_slots(rec, num_slots) -> np.int64:
    """Slots nobody holds (the cold list and every bucket)."""
    n = 0
    for s in range(num_slots):
        if rec[s, STATE] < REF:
            n += 1
    return n
