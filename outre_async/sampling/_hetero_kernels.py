"""numba kernel of the per-edge-type neighbour sampler over a typed CSC (arrays in, arrays out).

The typed store keeps one CSC over global node ids with ``type_per_edge`` beside ``indices``, every
neighbour list sorted by edge type (``store._type_manifest``), so the in-neighbours of ``v`` through
edge type ``r`` are one run of ``v``'s list.  The kernel samples PyG's hetero ``NeighborSampler``
(directed, non-disjoint, without replacement): in hop ``h`` every node first discovered in hop ``h-1``
(hop 0: the seeds) takes ``fanouts[r, h]`` of its in-neighbours of each edge type ``r`` whose
destination is its type (-1: all of them, 0: none), positions chosen as the homogeneous kernel does
(``_sampler_kernels._choose``: Floyd or selection sampling, none drawn when all are taken).

Order, which fixes the random numbers drawn and so the sample for ``(seed, stream)``: targets in local
id order, within a target its runs in edge type order.  Relabelling is over global ids (seeds
``0..B-1``, then discovery order across all types): the caller splits nodes and edges by type.  Each
edge is emitted with its edge type and its CSC position (``e_id``).

Files are untrusted: an edge type id at or past ``num_edge_types`` is ``EDGE_TYPE_OUT_OF_RANGE`` before
it indexes ``fanouts``; a list whose runs are not ascending is ``TYPES_UNSORTED``; neighbour ids are
range-checked by ``_emit``.  Runs are found by binary search, so every index stays inside the list
even when it is unsorted.  The relabel scratch ``g2l`` is reset on every path, as in the homogeneous kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._sampler_kernels import NEIGHBOR_OUT_OF_RANGE, OK, _add_seeds, _choose, _emit, _grow, _reset

EDGE_TYPE_OUT_OF_RANGE, TYPES_UNSORTED = 4, 5


@njit(cache=True, nogil=True)
def sample_hetero(indptr, indices, type_per_edge, seeds, fanouts, state, g2l):
    """Sample every hop of one batch; ``fanouts`` int64 ``[num_edge_types, hops]``.

    Returns ``(status, where, n_id, rows, cols, edge_type, e_id, nodes_per_hop, edges_per_hop)``:
    ``rows``/``cols`` local ids (source, target), ``edge_type`` int64 per edge.  On ``status != OK``
    the arrays are empty and ``where`` is the seed position or the CSC position at fault.
    """
    num_types, num_hops = fanouts.shape
    nodes_per_hop = np.zeros(num_hops + 1, np.int64)
    edges_per_hop = np.zeros(num_hops, np.int64)
    n_id = np.empty(max(2 * len(seeds), 16), np.int64)
    status, where = _add_seeds(seeds, len(indptr) - 1, g2l, n_id)
    if status != OK:
        _reset(g2l, n_id, where)
        return _failed(status, where, nodes_per_hop, edges_per_hop)
    nodes_per_hop[0] = len(seeds)
    cap = max(4 * len(seeds), 16)
    rows, cols = np.empty(cap, np.int64), np.empty(cap, np.int64)
    kinds, eids = np.empty(cap, np.int64), np.empty(cap, np.int64)
    picks = np.empty(max(1, fanouts.max()), np.int64)
    lo, n_total, e = 0, len(seeds), 0
    for h in range(num_hops):
        hi = n_total
        # room for every edge this hop can emit, grown once per hop (not per run: each growth check on
        # five arrays inside the loop costs reference counting per list)
        need = _hop_bound(indptr, n_id, lo, hi, fanouts[:, h])
        n_id = _grow(n_id, n_total + need)
        rows, cols, kinds, eids = _grow(rows, e + need), _grow(cols, e + need), _grow(kinds, e + need), _grow(eids, e + need)
        for t in range(lo, hi):
            v = n_id[t]
            p, end, last = indptr[v], indptr[v + 1], -1
            while p < end:
                r = np.int64(type_per_edge[p])
                if r >= num_types:
                    _reset(g2l, n_id, n_total)
                    return _failed(EDGE_TYPE_OUT_OF_RANGE, p, nodes_per_hop, edges_per_hop)
                q = _run_end(type_per_edge, p, end, r)
                if r <= last or type_per_edge[q - 1] != r:
                    _reset(g2l, n_id, n_total)
                    return _failed(TYPES_UNSORTED, p, nodes_per_hop, edges_per_hop)
                k = fanouts[r, h]
                if k != 0:
                    d = q - p
                    m = _choose(state, d, k, picks)
                    before = e
                    bad, n_total, e = _emit(indices, p, p, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e,
                                            len(indptr) - 1)
                    if bad >= 0:
                        _reset(g2l, n_id, n_total)
                        return _failed(NEIGHBOR_OUT_OF_RANGE, p + bad, nodes_per_hop, edges_per_hop)
                    for i in range(before, e):
                        kinds[i] = r
                last, p = r, q
        nodes_per_hop[h + 1] = n_total - hi
        edges_per_hop[h] = e - edges_per_hop[:h].sum()
        lo = hi
    _reset(g2l, n_id, n_total)
    return (OK, -1, n_id[:n_total].copy(), rows[:e].copy(), cols[:e].copy(), kinds[:e].copy(), eids[:e].copy(),
            nodes_per_hop, edges_per_hop)


@njit(cache=True, nogil=True)
def _hop_bound(indptr, n_id, lo, hi, hop_fanouts):
    """The most edges one hop can emit: per target its degree, or the sum of the positive fanouts when
    no edge type takes all (-1) and that sum is smaller."""
    cap, total = 0, 0
    for k in hop_fanouts:
        if k < 0:
            cap = -1
            break
        cap += k
    for t in range(lo, hi):
        d = indptr[n_id[t] + 1] - indptr[n_id[t]]
        total += d if cap < 0 or d < cap else cap
    return total


@njit(cache=True, nogil=True)
def _run_end(type_per_edge, p, end, r):
    """The first position in ``(p, end]`` whose type is above ``r`` (binary search; a sorted list's run
    of ``r`` starting at ``p`` ends there).  Stays in ``[p + 1, end]`` whatever the values."""
    lo, hi = p + 1, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if type_per_edge[mid] > r:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def _failed(status, where, nodes_per_hop, edges_per_hop):
    empty = np.empty(0, np.int64)
    return status, where, empty, empty, empty, empty, empty, nodes_per_hop, edges_per_hop
