"""numba kernels of the uniform neighbour sampler: arrays in, arrays out, explicit RNG state.

One call samples every hop of one batch (PyG ``NeighborSampler`` semantics: directed, non-disjoint,
without replacement) so the whole batch runs in one ``nogil`` stretch.  The caller passes:

* ``indptr`` int64 [N+1], ``indices`` int32/int64 [E]: the CSC, ``indices[indptr[v]:indptr[v+1]]``
  are v's in-neighbours (messages flow neighbour -> v);
* ``seeds`` int64 [B] (unique), ``fanouts`` int64 [H] (each > 0, or -1 for all neighbours);
* ``state`` uint64 [1]: splitmix64 state (``_rng.stream_state(seed, stream)``), advanced in place;
* ``g2l`` [N] int32/int64 filled with -1: the global -> local relabel scratch.  It is reset before
  returning by touching only the entries that were set (O(sampled), not O(N)), on every path.

Relabelling: seeds get local ids ``0..B-1`` in the given order, then each hop's newly discovered
nodes in discovery order; hop ``h+1`` expands exactly the nodes first discovered in hop ``h``.
Edges are emitted hop by hop, target by target, as ``(source=neighbour, target)`` local pairs.

Choosing ``k`` of ``d`` neighbour positions (``d > k``; ``d <= k`` takes all, in CSC order, without
touching the RNG).  Two exact uniform-subset algorithms, picked per node by cost:

* Floyd's algorithm: ``k`` random numbers; membership is a linear scan of the (small) chosen array,
  ~k²/2 compares and no extra scratch (no hash set, unlike PyG's).  Picks in insertion order.
* Selection sampling, Knuth's Algorithm S: one pass over the positions, taking position ``i`` with
  probability ``(k - taken) / (d - i)``; up to ``d`` random numbers.  Picks ascending.

Measured on the development machine, Floyd costs about ``0.3 ns * k² + 5 ns * k`` and selection
``6 ns * d``, so Floyd is used when ``k * (k + FLOYD_FACTOR) <= FLOYD_FACTOR * d`` (FACTOR = 20):
selection only when ``d`` is within a few ``k`` of ``k`` (k=10: d < 15; k=25: d < 57; k=100:
d < 600), where a pass over ``d`` is cheaper than k² compares.  Per node the cost is therefore
``O(min(k², d) + k)``.  Positions are sampled, not ids: a multigraph that lists a neighbour twice
can yield it twice (as in PyG).  ``bounded`` needs degrees below 2**32.

Kernels report bad input through a status code and position (no exceptions under ``nogil``): see
``OK``, ``SEED_OUT_OF_RANGE``, ``SEED_REPEATED``, ``NEIGHBOR_OUT_OF_RANGE``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._rng import bounded

OK, SEED_OUT_OF_RANGE, SEED_REPEATED, NEIGHBOR_OUT_OF_RANGE = 0, 1, 2, 3
FLOYD_FACTOR = 20  # Floyd when k * (k + FLOYD_FACTOR) <= FLOYD_FACTOR * d, else selection


@njit(cache=True, nogil=True)
def sample_multihop(indptr, indices, seeds, fanouts, state, g2l):
    """Sample every hop of one batch.

    Returns ``(status, where, n_id, edge_index, num_nodes_per_hop, num_edges_per_hop)``: on
    ``status != OK`` the arrays are empty and ``where`` is the seed position (seed errors) or the
    ``indices`` position (corrupt neighbour id) at fault.
    """
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
    for h in range(num_hops):
        k = fanouts[h]
        need = (n_total - lo) * k if k > 0 else _hop_edge_count(indptr, n_id, lo, n_total)
        n_id = _grow(n_id, n_total + need)
        rows = _grow(rows, e_total + need)
        cols = _grow(cols, e_total + need)
        status, where, n_new, e_new = _sample_hop(indptr, indices, n_id, lo, n_total, k, state,
                                                  g2l, rows, cols, e_total, picks)
        if status != OK:
            _reset(g2l, n_id, n_new)
            return _failed(status, where, nodes_per_hop, edges_per_hop)
        nodes_per_hop[h + 1] = n_new - n_total
        edges_per_hop[h] = e_new - e_total
        lo, n_total, e_total = n_total, n_new, e_new
    _reset(g2l, n_id, n_total)
    return OK, -1, n_id[:n_total].copy(), _stack(rows, cols, e_total), nodes_per_hop, edges_per_hop


@njit(cache=True, nogil=True)
def _failed(status, where, nodes_per_hop, edges_per_hop):
    empty = np.empty((2, 0), np.int64)
    return status, where, np.empty(0, np.int64), empty, nodes_per_hop, edges_per_hop


@njit(cache=True, nogil=True)
def _add_seeds(seeds, num_nodes, g2l, n_id):
    """Give seed ``i`` local id ``i``; returns ``(status, count of seeds set in g2l)``."""
    for i in range(len(seeds)):
        v = seeds[i]
        if v < 0 or v >= num_nodes:
            return SEED_OUT_OF_RANGE, i
        if g2l[v] >= 0:
            return SEED_REPEATED, i
        g2l[v] = i
        n_id[i] = v
    return OK, len(seeds)


@njit(cache=True, nogil=True)
def _sample_hop(indptr, indices, n_id, lo, hi, k, state, g2l, rows, cols, e, picks):
    """Sample the in-neighbours of local ids ``[lo, hi)`` into edges ``e...``.

    Returns ``(status, where, n_total, e_total)``.  ``rows``/``cols``/``n_id`` must already hold
    room for every edge the hop can emit (``(hi - lo) * k``, or the degree sum when ``k < 0``;
    new nodes are at most as many as edges), so the loop never checks capacity.
    """
    n_total = hi
    num_nodes = len(indptr) - 1
    for t in range(lo, hi):
        start = indptr[n_id[t]]
        d = indptr[n_id[t] + 1] - start
        m = _choose(state, d, k, picks)
        for i in range(m):
            pos = start + (picks[i] if m < d else i)
            u = indices[pos]
            if u < 0 or u >= num_nodes:
                return NEIGHBOR_OUT_OF_RANGE, pos, n_total, e
            local = g2l[u]
            if local < 0:
                local = n_total
                g2l[u] = n_total
                n_id[n_total] = u
                n_total += 1
            rows[e] = local
            cols[e] = t
            e += 1
    return OK, -1, n_total, e


@njit(cache=True, nogil=True, inline="always")
def _choose(state, d, k, picks):
    """Fill ``picks`` with ``k`` distinct positions in ``[0, d)``; returns how many edges to emit.

    Returns ``d`` (and leaves ``picks`` alone) when every neighbour is taken.
    """
    if k < 0 or d <= k:
        return d
    if uses_floyd(d, k):
        floyd(state, d, k, picks)
    else:
        selection(state, d, k, picks)
    return k


@njit(cache=True, nogil=True, inline="always")
def uses_floyd(d, k):
    """Whether choosing ``k < d`` positions goes to Floyd (else selection sampling)."""
    return k * (k + FLOYD_FACTOR) <= FLOYD_FACTOR * d


@njit(cache=True, nogil=True)
def floyd(state, d, k, picks):
    """Floyd's algorithm: ``k`` distinct uniform positions of ``[0, d)`` in ``picks[:k]``."""
    m = 0
    for j in range(d - k, d):
        t = bounded(state, j + 1)
        for i in range(m):
            if picks[i] == t:
                t = j  # j itself cannot be taken yet: every earlier pick is < j
                break
        picks[m] = t
        m += 1


@njit(cache=True, nogil=True)
def selection(state, d, k, picks):
    """Knuth's Algorithm S: ``k`` distinct uniform positions of ``[0, d)``, ascending."""
    m = 0
    for i in range(d):
        if bounded(state, d - i) < k - m:
            picks[m] = i
            m += 1
            if m == k:
                return


@njit(cache=True, nogil=True)
def _hop_edge_count(indptr, n_id, lo, hi):
    """Edge count of a hop that takes every neighbour (fanout -1): the in-degree sum."""
    total = 0
    for t in range(lo, hi):
        total += indptr[n_id[t] + 1] - indptr[n_id[t]]
    return total


@njit(cache=True, nogil=True)
def _grow(buf, need):
    """``buf`` if it holds ``need`` entries, else a copy with at least doubled capacity."""
    if need <= len(buf):
        return buf
    out = np.empty(max(need, 2 * len(buf)), buf.dtype)
    out[: len(buf)] = buf
    return out


@njit(cache=True, nogil=True)
def _reset(g2l, n_id, count):
    """Undo the relabelling of ``n_id[:count]``: O(sampled), so a batch never pays O(N)."""
    for i in range(count):
        g2l[n_id[i]] = -1


@njit(cache=True, nogil=True)
def _stack(rows, cols, e):
    out = np.empty((2, e), np.int64)
    out[0, :] = rows[:e]
    out[1, :] = cols[:e]
    return out


@njit(cache=True, nogil=True)
def _max_fanout(fanouts):
    best = 0
    for f in fanouts:
        best = max(best, f)
    return best
