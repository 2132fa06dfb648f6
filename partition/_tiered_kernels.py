"""numba kernel of the tiered neighbour sampler: the uniform sampler of ``outre_async.sampling._sampler_kernels``
with each in-neighbour list resolved from, in order,

1. the global neighbour cache (``c_slot[v] >= 0``: ``c_idx[c_ptr[s]:c_ptr[s+1]]``),
2. the macro batch's partition adjacency (``m_of_part[assignment[v]] >= 0``: the block's local slot is
   ``m_base[mb] + slot_of_node[v] - part_ptr[p]``),
3. the memory-mapped CSC (``indptr``/``indices``).

Every tier holds the same list in the same order, and the random positions are drawn exactly as the
plain kernel draws them (same ``_choose``, same RNG stream), so a sample equals the plain sampler's
sample for the same ``(seeds, fanouts, state)`` bit for bit; only where the ids are read from differs.
``tiers`` [3] int64 counts the lists served by each tier.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from outre_async.sampling._sampler_kernels import (
    NEIGHBOR_OUT_OF_RANGE,
    OK,
    _add_seeds,
    _choose,
    _failed,
    _grow,
    _max_fanout,
    _reset,
    _stack,
)

CACHE, MACRO, DISK = 0, 1, 2


@njit(cache=True, nogil=True)
def sample_multihop_tiered(indptr, indices, c_slot, c_ptr, c_idx, assignment, slot_of_node, part_ptr, m_of_part,
                           m_base, m_ptr, m_idx, seeds, fanouts, state, g2l, tiers):
    num_hops = len(fanouts)
    nodes_per_hop = np.zeros(num_hops + 1, np.int64)
    edges_per_hop = np.zeros(num_hops, np.int64)
    n_id = np.empty(max(2 * len(seeds), 16), np.int64)
    status, where = _add_seeds(seeds, len(indptr) - 1, g2l, n_id)
    if status != OK:
        _reset(g2l, n_id, where)
        return _failed(status, where, nodes_per_hop, edges_per_hop)
    nodes_per_hop[0] = len(seeds)
    rows = np.empty(16, np.int64)
    cols = np.empty(16, np.int64)
    picks = np.empty(max(1, _max_fanout(fanouts)), np.int64)
    n_total, e_total, lo = len(seeds), 0, 0
    num_nodes = len(indptr) - 1
    for h in range(num_hops):
        k = fanouts[h]
        need = 0
        if k > 0:
            need = (n_total - lo) * k
        else:
            for t in range(lo, n_total):
                need += indptr[n_id[t] + 1] - indptr[n_id[t]]
        n_id = _grow(n_id, n_total + need)
        rows = _grow(rows, e_total + need)
        cols = _grow(cols, e_total + need)
        n_new, e_new = n_total, e_total
        for t in range(lo, n_total):
            v = n_id[t]
            d = indptr[v + 1] - indptr[v]
            m = _choose(state, d, k, picks)
            s = c_slot[v] if len(c_slot) else -1
            if s >= 0:
                tiers[CACHE] += 1
                bad, n_new, e_new = _emit(c_idx, c_ptr[s], m, d, picks, t, g2l, n_id, rows, cols, n_new, e_new,
                                          num_nodes)
            else:
                p = assignment[v]
                mb = m_of_part[p]
                if mb >= 0:
                    tiers[MACRO] += 1
                    start = m_ptr[m_base[mb] + slot_of_node[v] - part_ptr[p]]
                    bad, n_new, e_new = _emit(m_idx, start, m, d, picks, t, g2l, n_id, rows, cols, n_new, e_new,
                                              num_nodes)
                else:
                    tiers[DISK] += 1
                    bad, n_new, e_new = _emit(indices, indptr[v], m, d, picks, t, g2l, n_id, rows, cols, n_new,
                                              e_new, num_nodes)
            if bad >= 0:
                _reset(g2l, n_id, n_new)
                return _failed(NEIGHBOR_OUT_OF_RANGE, indptr[v] + bad, nodes_per_hop, edges_per_hop)
        nodes_per_hop[h + 1] = n_new - n_total
        edges_per_hop[h] = e_new - e_total
        lo, n_total, e_total = n_total, n_new, e_new
    _reset(g2l, n_id, n_total)
    return OK, -1, n_id[:n_total].copy(), _stack(rows, cols, e_total), nodes_per_hop, edges_per_hop


@njit(cache=True, nogil=True, inline="always")
def _emit(arr, start, m, d, picks, t, g2l, n_id, rows, cols, n_new, e_new, num_nodes):
    """Emit the ``m`` picked neighbours of target ``t`` from ``arr[start:start+d]``.  Returns
    ``(offset of a bad id or -1, n_new, e_new)``."""
    for i in range(m):
        off = picks[i] if m < d else i
        u = arr[start + off]
        if u < 0 or u >= num_nodes:
            return off, n_new, e_new
        local = g2l[u]
        if local < 0:
            local = n_new
            g2l[u] = n_new
            n_id[n_new] = u
            n_new += 1
        rows[e_new] = local
        cols[e_new] = t
        e_new += 1
    return -1, n_new, e_new
