"""numba bookkeeping of the feature buffer (GNNDrive §4.2, Algorithm 1, plus GIDS's window
buffering): arrays in, arrays out.

State arrays (all owned by one event loop, so no locks):

* ``slot_of[N]``   node → slot, -1 when the node has no slot
* ``node_of[S]``   slot → node, -1 when the slot is empty
* ``refs[S]``      pieces of batches currently holding the slot
* ``valid[S]``     1 when the slot's row has been read
* ``wanted[N]``    look-ahead count: batches sampled and queued (not yet extracted) that need the node
* ``prev[S+2]``, ``next_[S+2]``  two doubly-linked standby lists of slots with ``refs == 0``, each in
  release order (head = least recently released): sentinel ``S`` heads the *cold* list (rows no
  queued batch needs), sentinel ``S+1`` the *wanted* list (rows a queued batch will read again).

A slot on a standby list keeps its row: a later batch that needs the node takes it back without I/O.
Eviction takes the head of the cold list (least recently released); only when the cold list is
empty does it take the *tail* of the wanted list: the row most recently pinned or released, which
is needed by the batch queued last, so furthest in the future (Belady's choice, approximately;
the head holds rows of the batches queued first, needed soonest).  The pin is a preference, never a
reason to wait: a batch that finds only wanted rows on standby evicts one rather than wait for a
release that may never come.
"""

from __future__ import annotations

import numpy as np
from numba import njit

HIT, READ, WAIT = 0, 1, 2  # what acquire decided for each row


@njit(cache=True, nogil=True)
def lru_init(prev: np.ndarray, next_: np.ndarray) -> None:
    """Put every slot on the cold list in index order; the wanted list starts empty."""
    s = len(prev) - 2
    cold, wanted = s, s + 1
    for i in range(s):
        prev[i] = i - 1 if i > 0 else cold
        next_[i] = i + 1 if i < s - 1 else cold
    next_[cold] = 0 if s > 0 else cold
    prev[cold] = s - 1 if s > 0 else cold
    next_[wanted] = wanted
    prev[wanted] = wanted


@njit(cache=True, nogil=True, inline="always")
def _unlink(prev: np.ndarray, next_: np.ndarray, slot: np.int64) -> None:
    p, n = prev[slot], next_[slot]
    next_[p] = n
    prev[n] = p
    prev[slot] = -1
    next_[slot] = -1


@njit(cache=True, nogil=True, inline="always")
def _append(prev: np.ndarray, next_: np.ndarray, slot: np.int64, sentinel: np.int64) -> None:
    last = prev[sentinel]
    next_[last] = slot
    prev[slot] = last
    next_[slot] = sentinel
    prev[sentinel] = slot


@njit(cache=True, nogil=True, inline="always")
def _list_of(node_of, wanted, prev, slot) -> np.int64:
    """The standby list a released slot belongs on: wanted when a queued batch needs its row."""
    node = node_of[slot]
    return len(prev) - 1 if node >= 0 and wanted[node] > 0 else len(prev) - 2


@njit(cache=True, nogil=True, inline="always")
def standby_empty(next_: np.ndarray) -> bool:
    cold = len(next_) - 2
    return next_[cold] == cold and next_[cold + 1] == cold + 1


@njit(cache=True, nogil=True, inline="always")
def evict_lru_slot(slot_of, node_of, prev, next_) -> np.int64:
    """Evict a standby slot for a new row: the head of the cold list, or the tail of the wanted list
    when the cold list is empty; take it off its list, unmap the node whose row it held, return it.
    The caller checks :func:`standby_empty` first.

    The store is branch-free on purpose (an empty slot, ``old == -1``, rewrites ``slot_of[0]`` with
    its own value): with a conditional store in here, numba keeps reference counting of the arrays
    on every inlined call, which made :func:`acquire` ~40 % slower.
    """
    cold = len(prev) - 2
    s = next_[cold] if next_[cold] != cold else prev[cold + 1]
    _unlink(prev, next_, s)
    old = node_of[s]
    target = max(old, 0)
    slot_of[target] = -1 if old >= 0 else slot_of[target]
    return s


@njit(cache=True, nogil=True)
def acquire(ids, slot_of, node_of, refs, valid, wanted, prev, next_, slots_out, action_out, limit) -> np.int64:
    """Take a reference on a slot for each id of a prefix of ``ids`` (at most ``limit`` rows).

    Valid rows are hits, rows being read by another batch (or earlier in this prefix) must be
    awaited, the rest get a slot from :func:`evict_lru_slot` and must be read.  Returns the length of
    the prefix taken: ``min(len(ids), limit)`` unless the standby lists ran dry first; the caller
    keeps what was taken (a batch streams through the buffer piece by piece).
    """
    n = min(len(ids), limit)
    for i in range(n):
        v = ids[i]
        s = slot_of[v]
        if s >= 0 and (valid[s] or refs[s] > 0):
            if refs[s] == 0:
                _unlink(prev, next_, s)
            refs[s] += 1
            slots_out[i] = s
            action_out[i] = HIT if valid[s] else WAIT
            continue
        if s >= 0:  # a mapping without a row (a read that failed): drop it, read afresh
            slot_of[v] = -1
            node_of[s] = -1
            _unlink(prev, next_, s)
            _append(prev, next_, s, len(prev) - 2)
        if standby_empty(next_):
            return i
        s = evict_lru_slot(slot_of, node_of, prev, next_)
        node_of[s] = v
        slot_of[v] = s
        refs[s] = 1
        valid[s] = 0
        slots_out[i] = s
        action_out[i] = READ
    return n


@njit(cache=True, nogil=True)
def release(slots, refs, node_of, wanted, prev, next_) -> None:
    """Drop one reference per slot; slots nobody holds go to the tail (most recent) of their standby
    list: the wanted list when a queued batch needs the row, else the cold list."""
    for i in range(len(slots)):
        s = slots[i]
        refs[s] -= 1
        if refs[s] == 0:
            _append(prev, next_, s, _list_of(node_of, wanted, prev, s))


@njit(cache=True, nogil=True)
def announce(ids, wanted, slot_of, refs, prev, next_) -> None:
    """A batch that needs ``ids`` was queued: count it, and move the standby slots of rows that just
    became wanted from the cold list to the wanted list."""
    for i in range(len(ids)):
        v = ids[i]
        wanted[v] += 1
        s = slot_of[v]
        if wanted[v] == 1 and s >= 0 and refs[s] == 0:
            _unlink(prev, next_, s)
            _append(prev, next_, s, len(prev) - 1)


@njit(cache=True, nogil=True)
def withdraw(ids, wanted, slot_of, refs, prev, next_) -> None:
    """Undo :func:`announce` for ``ids`` (taken by their batch, or dropped): standby slots of rows no
    queued batch needs any more go back to the cold list's tail."""
    for i in range(len(ids)):
        v = ids[i]
        wanted[v] -= 1
        s = slot_of[v]
        if wanted[v] == 0 and s >= 0 and refs[s] == 0:
            _unlink(prev, next_, s)
            _append(prev, next_, s, len(prev) - 2)


@njit(cache=True, nogil=True)
def invalidate(slots, slot_of, node_of, valid) -> None:
    """Forget the rows of held slots whose read failed, so no later batch takes them as hits."""
    for i in range(len(slots)):
        s = slots[i]
        node = node_of[s]
        if node >= 0:
            slot_of[node] = -1
        node_of[s] = -1
        valid[s] = 0


@njit(cache=True, nogil=True)
def gather_rows(data, slots, out) -> None:
    """``out[i] = data[slots[i]]`` for every row: a piece of the batch matrix, from buffer slots.

    An explicit element loop, not ``out[i, :] = data[slots[i], :]``: numba builds two array views
    per row for the slice form, which measured 4x the user CPU of this loop (0.40 vs 0.09 µs per
    1 KiB row), the largest per-row cost left in the loader once reads went to numba."""
    dim = data.shape[1]
    for i in range(len(slots)):
        s = slots[i]
        for j in range(dim):
            out[i, j] = data[s, j]
