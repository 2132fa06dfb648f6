"""Rows a cache of ``C`` rows must read over a known sequence of row accesses, under three policies
(how far the loader's buffer is from the optimum: ``benchmarks/simulate_cache_policies.py``).

The sequence is one epoch's row accesses in order, each batch's rows once (a batch reads a row once
however many of its subtrees hold it), as dense ids ``0..U-1`` (:func:`dense_ids`).  A miss is one row
read from disk; the first access of every row is a miss under every policy (nothing is preloaded,
except the static cache, whose preload is counted as reads).

* **LRU**: on a miss the row is cached; when full, the least recently used row is evicted.
* **static top-C**: the ``C`` most frequent rows of the epoch are read once up front and stay; every
  access of any other row is a read (the profile's static cache, with perfect counts).
* **Belady MIN** (optimal): on a miss, of the cached rows and the row just read, the one whose next
  use is furthest away is not kept (the row just read may be dropped at once: it had to be read,
  not kept).  Optimal for this model (Belady 1966; Mattson et al. 1970 for the bypass form).

LRU and MIN run in ``O(n log n)``: a binary heap of ``(key, row)`` with lazy deletion (an entry is
stale when the row left the cache or its key moved on; ``key[row]`` holds the live one).  Next uses
come from one backward pass (:func:`next_uses`).  Kernels only: arrays in, counts out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NEVER = np.int64(1) << np.int64(62)  # the next use of a row that is not used again


def dense_ids(seq: np.ndarray) -> tuple[np.ndarray, int]:
    """``(dense, U)``: ``seq`` renumbered ``0..U-1`` (the kernels index arrays of size U by it)."""
    uniq, dense = np.unique(np.asarray(seq, dtype=np.int64), return_inverse=True)
    return dense.astype(np.int64), len(uniq)


@njit(cache=True, nogil=True)
def next_uses(seq: np.ndarray, num_rows: int) -> np.ndarray:
    """``nxt[i]``: the next position after ``i`` that holds ``seq[i]`` again, or :data:`NEVER`."""
    n = len(seq)
    nxt = np.empty(n, dtype=np.int64)
    last = np.full(num_rows, NEVER, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        nxt[i] = last[seq[i]]
        last[seq[i]] = i
    return nxt


@njit(cache=True, nogil=True, inline="always")
def _push(hk: np.ndarray, hr: np.ndarray, size: int, key: int, row: int, sign: int) -> int:
    """Push ``(key, row)`` onto the heap of ``size`` entries; ``sign`` 1: max-heap, -1: min-heap."""
    i = size
    hk[i] = key
    hr[i] = row
    while i > 0:
        parent = (i - 1) >> 1
        if sign * hk[parent] >= sign * hk[i]:
            break
        hk[parent], hk[i] = hk[i], hk[parent]
        hr[parent], hr[i] = hr[i], hr[parent]
        i = parent
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def _pop(hk: np.ndarray, hr: np.ndarray, size: int, sign: int) -> int:
    """Remove the top entry (read it first at ``hk[0]``, ``hr[0]``); returns the new size."""
    size -= 1
    hk[0] = hk[size]
    hr[0] = hr[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        best = left
        if left + 1 < size and sign * hk[left + 1] > sign * hk[left]:
            best = left + 1
        if sign * hk[i] >= sign * hk[best]:
            break
        hk[best], hk[i] = hk[i], hk[best]
        hr[best], hr[i] = hr[i], hr[best]
        i = best
    return size


@njit(cache=True, nogil=True)
def _top_live(hk: np.ndarray, hr: np.ndarray, size: int, key: np.ndarray, cached: np.ndarray, sign: int) -> int:
    """Drop stale entries from the top until the top is live; returns the new size."""
    while size > 0 and (not cached[hr[0]] or key[hr[0]] != hk[0]):
        size = _pop(hk, hr, size, sign)
    return size


@njit(cache=True, nogil=True)
def reads_min(seq: np.ndarray, num_rows: int, capacity: int) -> int:
    """Rows read by Belady's MIN (with bypass) with room for ``capacity`` rows (module docstring)."""
    nxt = next_uses(seq, num_rows)
    n = len(seq)
    cached = np.zeros(num_rows, dtype=np.bool_)
    key = np.zeros(num_rows, dtype=np.int64)   # the live next use of each cached row
    hk = np.empty(n + 1, dtype=np.int64)
    hr = np.empty(n + 1, dtype=np.int64)
    size = used = reads = 0
    for i in range(n):
        r = seq[i]
        nu = nxt[i]
        if cached[r]:
            key[r] = nu
            size = _push(hk, hr, size, nu, r, 1)
            continue
        reads += 1
        if capacity == 0 or nu == NEVER:
            continue  # not used again (or no room at all): not worth a slot
        if used == capacity:
            size = _top_live(hk, hr, size, key, cached, 1)
            if hk[0] <= nu:
                continue  # every cached row is needed before this one: drop it
            cached[hr[0]] = False
            size = _pop(hk, hr, size, 1)
            used -= 1
        cached[r] = True
        key[r] = nu
        used += 1
        size = _push(hk, hr, size, nu, r, 1)
    return reads


@njit(cache=True, nogil=True)
def reads_lru(seq: np.ndarray, num_rows: int, capacity: int) -> int:
    """Rows read by LRU with room for ``capacity`` rows (every row read is cached)."""
    n = len(seq)
    cached = np.zeros(num_rows, dtype=np.bool_)
    key = np.zeros(num_rows, dtype=np.int64)   # the last use of each cached row
    hk = np.empty(n + 1, dtype=np.int64)
    hr = np.empty(n + 1, dtype=np.int64)
    size = used = reads = 0
    for i in range(n):
        r = seq[i]
        if cached[r]:
            key[r] = i
            size = _push(hk, hr, size, i, r, -1)
            continue
        reads += 1
        if capacity == 0:
            continue
        if used == capacity:
            size = _top_live(hk, hr, size, key, cached, -1)
            cached[hr[0]] = False
            size = _pop(hk, hr, size, -1)
            used -= 1
        cached[r] = True
        key[r] = i
        used += 1
        size = _push(hk, hr, size, i, r, -1)
    return reads


def reads_static(seq: np.ndarray, num_rows: int, capacity: int) -> int:
    """Rows read with the ``capacity`` most frequent rows preloaded (counted) and every other access
    read from disk (ties between equally frequent rows do not change the count)."""
    freq = np.bincount(seq, minlength=num_rows)
    kept = min(capacity, num_rows)
    top = np.sort(freq)[::-1][:kept]
    return int(kept + len(seq) - top.sum())
