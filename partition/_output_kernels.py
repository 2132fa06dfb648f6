"""numba kernels of the partitioner's outputs: cut statistics, grouping nodes by partition, and the
partition-ordered adjacency (list ends and bucketed copies).  Arrays in, arrays out, no I/O.

Chunks are as in ``_fennel_kernels``: ``nodes``, ``ptr`` (offsets into ``buf``) and ``buf`` (their
in-neighbour lists).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def cut_chunk(nodes, ptr, buf, assign, cross, internal):
    """Per node of the chunk: neighbours in another partition (``cross[i]``, chunk-local); per
    partition: internal edges.  Returns the chunk's cut edge count."""
    cut = 0
    for i in range(len(nodes)):
        p = assign[nodes[i]]
        c = 0
        for e in range(ptr[i], ptr[i + 1]):
            if assign[buf[e]] != p:
                c += 1
        cross[i] = c
        internal[p] += ptr[i + 1] - ptr[i] - c
        cut += c
    return cut


@njit(cache=True, nogil=True)
def group_by_part(assign, ids, num_parts):
    """Stable counting sort of ``ids`` by ``assign[ids]``: ``(ptr [K+1], ids grouped by partition)``."""
    ptr = np.zeros(num_parts + 1, np.int64)
    for v in ids:
        ptr[assign[v] + 1] += 1
    for p in range(num_parts):
        ptr[p + 1] += ptr[p]
    fill = ptr[:-1].copy()
    out = np.empty(len(ids), np.int64)
    for v in ids:
        p = assign[v]
        out[fill[p]] = v
        fill[p] += 1
    return ptr, out


@njit(cache=True, nogil=True)
def edges_per_part(assign, indptr, out):
    """``out[p]`` += the in-degrees of partition p's nodes (its share of the adjacency); returns ``out``."""
    for v in range(len(assign)):
        out[assign[v]] += indptr[v + 1] - indptr[v]
    return out


@njit(cache=True, nogil=True)
def running_ends(part, ptr, fill, out):
    """``out[i]``: where list ``i`` ends in the partition-ordered output, ``fill[p]`` being where the
    next list of partition ``p`` starts (advanced here): the partition-wise ``adj_ptr`` entries."""
    for i in range(len(part)):
        p = part[i]
        fill[p] += ptr[i + 1] - ptr[i]
        out[i] = fill[p]


@njit(cache=True, nogil=True)
def bucket_lists(part, ptr, buf, i0, bucket, fill):
    """Append lists ``i0, i0+1, ...`` (``buf[ptr[i]:ptr[i+1]]``, bound for partition ``part[i]``)
    to their partition's row of ``bucket`` (``fill[p]`` items used).  Stops at the first list that
    does not fit in its row and returns its index (the caller drains that row, or writes a list
    longer than a whole row itself); returns ``len(part)`` when every list went in."""
    room = bucket.shape[1]
    for i in range(i0, len(part)):
        p = part[i]
        lo, hi = ptr[i], ptr[i + 1]
        at = fill[p]
        if at + hi - lo > room:
            return i
        for e in range(lo, hi):
            bucket[p, at + e - lo] = buf[e]
        fill[p] = at + hi - lo
    return len(part)
