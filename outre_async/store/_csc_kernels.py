"""numba kernels over the store's CSC that the partitioner and the caches share: arrays in, arrays out.

``indptr`` int64 [N+1] and ``indices`` (possibly a memmap) as in :class:`~outre_async.Dataset`.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def max_degree(indptr):
    """Largest ``indptr[v+1] - indptr[v]`` (0 for no nodes), without an O(N) temporary."""
    best = 0
    for v in range(len(indptr) - 1):
        d = indptr[v + 1] - indptr[v]
        if d > best:
            best = d
    return best


@njit(cache=True, nogil=True)
def gather_lists(indptr, indices, nodes, out_ptr, out_buf):
    """Copy the neighbour lists of ``nodes`` (any order) into ``out_buf``; ``out_ptr`` receives offsets."""
    pos = 0
    out_ptr[0] = 0
    for i in range(len(nodes)):
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            out_buf[pos] = indices[e]
            pos += 1
        out_ptr[i + 1] = pos
