"""numba kernels of an open-addressing hash table from node ids to a few int32 values: arrays in,
arrays out (the owner is :class:`outre_async.sampling._id_map.IdMap`, or a kernel that keeps the arrays).

Why: a per-node array (``slot_of[v]``) costs its bytes for every node of the graph in every process,
while the loader only ever maps the nodes a buffer, a queue or one batch holds at once; at 10^8 nodes
the arrays alone were gigabytes.  A table sized by what it holds costs bytes per entry instead.

Layout: ``keys`` ``[cap]``, int64, or int32 where every node id fits (``key_dtype``: 4 bytes a bucket
less; ``EMPTY`` = -1 marks a free bucket; node ids are >= 0) and ``vals``
int32 ``[cap, W]`` (the entry's ``W`` values), ``cap`` a power of two.  Hashing: the id times the
golden-ratio constant, its high half folded into the low one (``home``), masked to the capacity.
Linear probing; deletion is backward shift (no tombstones): the entries after the removed one on its
probe run move back where their home allows, so a lookup stops at the first free bucket and the
table never needs rebuilding to stay fast.  A removal may move other entries: an index taken before
a removal is stale after it (callers look a key up again).

Sizing is the owner's job: keep the entries at most half the capacity (``capacity_for``); a full
table makes :func:`place` return -1 rather than loop.

The kernels of other modules compile these helpers into themselves, and numba's on-disk cache is keyed
by each kernel's own source file: a change here needs their caches cleared (as for ``_cache_hints``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .._cache_hints import prefetch

EMPTY = -1  # the key of a free bucket
INT32_MAX = 2**31 - 1
MIN_CAPACITY = 8
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FOLD = np.uint64(32)


def capacity_for(entries: int) -> int:
    """Buckets for ``entries`` keys: the power of two at least twice as many (load at most one half)."""
    return max(MIN_CAPACITY, 1 << max(0, (2 * int(entries) - 1).bit_length()))


def key_dtype(num_nodes: int | None = None) -> np.dtype:
    """Keys for ids below ``num_nodes``: int32 where they fit, else (or unknown) int64."""
    return np.dtype(np.int32 if num_nodes is not None and num_nodes <= INT32_MAX else np.int64)


def table_bytes(entries: int, width: int, num_nodes: int | None = None) -> int:
    """What a table for ``entries`` keys below ``num_nodes`` takes (``capacity_for`` buckets)."""
    return capacity_for(entries) * (key_dtype(num_nodes).itemsize + 4 * width)


def new_table(capacity: int, width: int, fill: int = 0,
              keys: np.dtype | type = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Empty ``(keys, vals)`` of ``capacity`` buckets (a power of two), ``width`` values each."""
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(f"capacity={capacity} should be a power of two")
    return np.full(capacity, EMPTY, keys), np.full((capacity, width), fill, np.int32)


@njit(cache=True, nogil=True, inline="always")
def home(key, mask) -> np.int64:
    """The bucket where ``key``'s probe run starts."""
    h = np.uint64(key) * _GOLDEN
    return np.int64((h ^ (h >> _FOLD)) & np.uint64(mask))


@njit(cache=True, nogil=True, inline="always")
def find(keys, key) -> np.int64:
    """The bucket holding ``key``, or -1."""
    mask = len(keys) - 1
    i = home(key, mask)
    for _ in range(len(keys)):
        k = keys[i]
        if k == key:
            return i
        if k == EMPTY:
            return -1
        i = (i + 1) & mask
    return -1


@njit(cache=True, nogil=True, inline="always")
def place(keys, key) -> np.int64:
    """The bucket holding ``key``, else the free bucket where it goes (``keys[i] == EMPTY``: the caller
    stores the key and its values there); -1 when the table is full and lacks it."""
    mask = len(keys) - 1
    i = home(key, mask)
    for _ in range(len(keys)):
        k = keys[i]
        if k == key or k == EMPTY:
            return i
        i = (i + 1) & mask
    return -1


@njit(cache=True, nogil=True, inline="always")
def remove_at(keys, vals, i) -> None:
    """Free bucket ``i`` (it holds a key), shifting back the entries after it whose home allows."""
    mask = len(keys) - 1
    width = vals.shape[1]
    keys[i] = EMPTY  # the hole: the scan below ends at it at the latest, even in a full table
    j = i
    while True:
        j = (j + 1) & mask
        k = keys[j]
        if k == EMPTY:
            break
        # the entry at j may fill the hole at i when i lies on its probe run from home to j
        if ((j - home(k, mask)) & mask) >= ((j - i) & mask):
            keys[i] = k
            for c in range(width):
                vals[i, c] = vals[j, c]
            keys[j] = EMPTY
            i = j


@njit(cache=True, nogil=True)
def lookup_many(keys, vals, ids, fill, out) -> None:
    """``out[i] = vals[bucket of ids[i]]``, or ``fill`` for an id the table lacks."""
    width = vals.shape[1]
    for i in range(len(ids)):
        b = find(keys, ids[i])
        for c in range(width):
            out[i, c] = fill
        if b >= 0:
            for c in range(width):
                out[i, c] = vals[b, c]


@njit(cache=True, nogil=True)
def insert_many(keys, vals, ids, values) -> np.int64:
    """Map each ``ids[i]`` to ``values[i]`` (replacing what it had); returns the keys added, or -1 - i
    when the table filled up at ``ids[i]`` (what came before is in)."""
    width = vals.shape[1]
    added = 0
    for i in range(len(ids)):
        b = place(keys, ids[i])
        if b < 0:
            return -1 - i
        if keys[b] == EMPTY:
            keys[b] = ids[i]
            added += 1
        for c in range(width):
            vals[b, c] = values[i, c]
    return added


@njit(cache=True, nogil=True)
def remove_many(keys, vals, ids) -> np.int64:
    """Unmap each of ``ids`` (absent ones are skipped); returns the keys removed."""
    removed = 0
    for i in range(len(ids)):
        b = find(keys, ids[i])
        if b >= 0:
            remove_at(keys, vals, b)
            removed += 1
    return removed


@njit(cache=True, nogil=True)
def rehash(keys, vals, new_keys, new_vals) -> None:
    """Copy every entry of ``(keys, vals)`` into the empty, larger ``(new_keys, new_vals)``."""
    width = vals.shape[1]
    for i in range(len(keys)):
        k = keys[i]
        if k != EMPTY:
            b = place(new_keys, k)
            new_keys[b] = k
            for c in range(width):
                new_vals[b, c] = vals[i, c]


# -- one kernel, two layouts ------------------------------------------------------------------------
#
# A kernel that keeps a per-node map takes ``table``: either the direct array (the values indexed by
# node id, ``[N, W]``, or ``[N]`` for the single-value helpers) or the hash table's ``(keys, vals)``
# tuple.  numba compiles one specialisation per layout, so the direct one runs the array code it
# always ran (the helpers below fold to a plain index) and the owner picks the layout by size.  The
# Python bodies are what runs under ``NUMBA_DISABLE_JIT=1``; the ``overload``s are what numba compiles.


def is_table(table) -> bool:
    """Whether ``table`` is a hash table (a constant once compiled)."""
    return isinstance(table, tuple)


def values_of(table):
    """The ``[rows, W]`` values: the direct array itself, or the table's ``vals``."""
    return table[1] if isinstance(table, tuple) else table


def bucket(table, key):
    """The row of :func:`values_of` holding ``key``'s values (the id itself when direct), or -1."""
    return find(table[0], key) if isinstance(table, tuple) else key


def bucket_or_add(table, key, fill):
    """:func:`bucket`, adding ``key`` when the table lacks it, its first value ``fill`` and the others 0
    (the owner keeps the table at most half full, so there is always room)."""
    if not isinstance(table, tuple):
        return key
    keys, vals = table
    b = place(keys, key)
    if keys[b] == EMPTY:
        keys[b] = key
        vals[b, 0] = fill
        for c in range(1, vals.shape[1]):
            vals[b, c] = 0
    return b


def drop_bucket(table, b) -> None:
    """Free row ``b`` of a hash table (:func:`remove_at`); nothing when direct."""
    if isinstance(table, tuple):
        remove_at(table[0], table[1], b)


def prefetch_home(table, key) -> None:
    """Prefetch where ``key``'s values start: its row when direct, its home bucket's key and values."""
    if isinstance(table, tuple):
        h = home(key, len(table[0]) - 1)
        prefetch(table[0], h)
        prefetch(table[1], h)
    else:
        prefetch(table, key)


def lookup(table, key, absent):
    """Single value: ``table[key]`` when direct (``[N]``), else the table's column 0 or ``absent``."""
    if not isinstance(table, tuple):
        return table[key]
    b = find(table[0], key)
    return table[1][b, 0] if b >= 0 else absent


def assign(table, key, value) -> None:
    """Single value: ``table[key] = value`` (adding ``key`` to a hash table)."""
    if not isinstance(table, tuple):
        table[key] = value
        return
    keys, vals = table
    b = place(keys, key)
    keys[b] = key
    vals[b, 0] = value


def forget(table, ids, count, absent) -> None:
    """Unmap ``ids[:count]``, which were mapped in that order and nothing since: direct, each entry
    back to ``absent``; a hash table, each key's bucket freed in reverse order (each probe run then
    still passes only buckets of keys mapped before it, so :func:`find` reaches it: O(count), not
    O(capacity))."""
    if not isinstance(table, tuple):
        for i in range(count):
            table[ids[i]] = absent
        return
    keys = table[0]
    for i in range(count - 1, -1, -1):
        b = find(keys, ids[i])
        if b >= 0:
            keys[b] = EMPTY


def _direct(table) -> bool:
    return isinstance(table, types.Array)


@overload(is_table)
def _ol_is_table(table):
    flag = not _direct(table)
    return lambda table: flag


@overload(values_of)
def _ol_values_of(table):
    if _direct(table):
        return lambda table: table
    return lambda table: table[1]


@overload(bucket)
def _ol_bucket(table, key):
    if _direct(table):
        return lambda table, key: key
    return lambda table, key: find(table[0], key)


@overload(bucket_or_add)
def _ol_bucket_or_add(table, key, fill):
    if _direct(table):
        return lambda table, key, fill: key

    def impl(table, key, fill):
        keys, vals = table
        b = place(keys, key)
        if keys[b] == EMPTY:
            keys[b] = key
            vals[b, 0] = fill
            for c in range(1, vals.shape[1]):
                vals[b, c] = 0
        return b
    return impl


@overload(drop_bucket)
def _ol_drop_bucket(table, b):
    if _direct(table):
        return lambda table, b: None
    return lambda table, b: remove_at(table[0], table[1], b)


@overload(prefetch_home)
def _ol_prefetch_home(table, key):
    if _direct(table):
        def direct(table, key):
            prefetch(table, key)
        return direct

    def impl(table, key):
        h = home(key, len(table[0]) - 1)
        prefetch(table[0], h)
        prefetch(table[1], h)
    return impl


@overload(lookup)
def _ol_lookup(table, key, absent):
    if _direct(table):
        return lambda table, key, absent: table[key]

    def impl(table, key, absent):
        b = find(table[0], key)
        return table[1][b, 0] if b >= 0 else absent
    return impl


@overload(assign)
def _ol_assign(table, key, value):
    if _direct(table):
        def direct(table, key, value):
            table[key] = value
        return direct

    def impl(table, key, value):
        keys, vals = table
        b = place(keys, key)
        keys[b] = key
        vals[b, 0] = value
    return impl


@overload(forget)
def _ol_forget(table, ids, count, absent):
    if _direct(table):
        def direct(table, ids, count, absent):
            for i in range(count):
                table[ids[i]] = absent
        return direct

    def impl(table, ids, count, absent):
        keys = table[0]
        for i in range(count - 1, -1, -1):
            b = find(keys, ids[i])
            if b >= 0:
                keys[b] = EMPTY
    return impl
