"""numba kernels of the uniform neighbour sampler: arrays in, arrays out, explicit RNG state.

One call samples every hop of one batch (PyG ``NeighborSampler`` semantics: directed, non-disjoint,
without replacement) so the whole batch runs in one ``nogil`` stretch.  The caller passes:

* ``indptr`` int64 [N+1], ``indices`` int32/int64 [E]: the CSC, ``indices[indptr[v]:indptr[v+1]]``
  are v's in-neighbours (messages flow neighbour -> v);
* ``seeds`` int64 [B] (unique), ``fanouts`` int64 [H] (each > 0, or -1 for all neighbours);
* ``state`` uint64 [1]: splitmix64 state (``_rng.stream_state(seed, stream)``), advanced in place;
* ``g2l``: the global -> local relabel scratch, either [N] int32/int64 filled with -1 or an empty
  hash table ``(keys, vals)`` (``outre_async.sampling._id_map_kernels``, one int32 value, room for every node
  the batch can reach at most half full: ``NeighborSampler`` picks the smaller).  It is reset before
  returning by touching only the entries that were set (O(sampled), not O(N)), on every path.

Relabelling: seeds get local ids ``0..B-1`` in the given order, then each hop's newly discovered
nodes in discovery order; hop ``h+1`` expands exactly the nodes first discovered in hop ``h``.
Edges are emitted hop by hop, target by target, as ``(source=neighbour, target)`` local pairs, each
with its edge id ``e_id``: the edge's position in the CSC's ``indices`` (``indptr[target] + offset``,
whichever tier the list was read from), which is what PyG's ``NeighborLoader`` reports as ``e_id``
and what per-edge arrays stored in CSC order are indexed by.

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

Where a list is read from (``tiers``).  The plain sampler reads every list from the CSC and passes
no tiers (``None``: numba compiles that call without the look-ups).  The partition sampler
(``outre_async.partition``, OUTRE §4.2) passes :class:`NeighborTiers` and each list is read from the
first tier that holds it: the global neighbour cache, then the macro batch's partition adjacency,
then the CSC.  Every tier holds the same list in the same order and the positions are drawn before
the tier is chosen, so both samplers return the same sample for the same ``(seeds, fanouts, state)``
bit for bit; only where the ids are read from differs.  ``served`` counts the lists of each tier.

Pruning (``prune``, the historical embedding cache, OUTRE §4.3).  With :class:`HistoryPrune`, a node
first discovered by hop 1 (the last layer's frontier) whose ``slot_of[v] >= 0`` and ``valid[slot] != 0``
is not expanded: it adds no children and draws no random numbers, so its (L-1)-deep subtree is not
sampled; everything else follows the layout above.  ``None`` (no history) compiles without the test.

Kernels report bad input through a status code and position (no exceptions under ``nogil``): see
``OK``, ``SEED_OUT_OF_RANGE``, ``SEED_REPEATED``, ``NEIGHBOR_OUT_OF_RANGE``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .._cache_hints import prefetch
from ._id_map_kernels import assign, forget, lookup
from .._rng import bounded

OK, SEED_OUT_OF_RANGE, SEED_REPEATED, NEIGHBOR_OUT_OF_RANGE = 0, 1, 2, 3
FLOYD_FACTOR = 20  # Floyd when k * (k + FLOYD_FACTOR) <= FLOYD_FACTOR * d, else selection
CACHE, MACRO, DISK = 0, 1, 2  # the tiers, as indices of NeighborTiers.served
AHEAD = 8  # prefetch distance in targets (see _sample_hop)


class NeighborTiers(NamedTuple):
    """The partition sampler's copies of neighbour lists, looked up before the CSC.

    Cache: ``cache_slot[v] >= 0`` (``cache_slot`` empty: no cache) holds v's list at
    ``cache_idx[cache_ptr[s]:]``.  Macro batch: v's partition ``p = part_of[v]`` is partition
    ``b = macro_of_part[p] >= 0`` of the loaded block, whose local list slot is
    ``macro_base[b] + slot_of_node[v] - part_ptr[p]`` in ``macro_ptr``/``macro_idx``.
    """

    cache_slot: np.ndarray     # int32 [N] or [0]
    cache_ptr: np.ndarray      # int64 [c + 1]
    cache_idx: np.ndarray      # [E_c]
    part_of: np.ndarray        # int32 [N]: the partition of every node
    slot_of_node: np.ndarray   # [N]: the node's position in the partition-ordered lists
    part_ptr: np.ndarray       # int64 [K + 1]: first slot of each partition
    macro_of_part: np.ndarray  # int32 [K]: index of the partition inside the macro batch, or -1
    macro_base: np.ndarray     # int64 [P]: first block slot of each of the macro batch's partitions
    macro_ptr: np.ndarray      # int64: the block's list offsets
    macro_idx: np.ndarray      # the block's lists
    served: np.ndarray         # int64 [3]: lists read from CACHE, MACRO, DISK (advanced in place)


class HistoryPrune(NamedTuple):
    """Which hop-1 nodes are not expanded: ``slot_of`` int32 [N] (the history slot or -1) and
    ``valid`` uint8 [C] (nonzero: the slot's history will be fresh enough when the batch is trained;
    the kernels read only that.  The loader's code: 1, fresh as it stands or promised from outside the
    overtaking window; ``1 + g``, promised by the batch ``g`` places back, inside the window, so the
    batch is delivered after that one: ``HistoryDecision.wait_gap``)."""

    slot_of: np.ndarray
    valid: np.ndarray


@njit(cache=True, nogil=True)
def sample_multihop(indptr, indices, seeds, fanouts, state, g2l, tiers=None, prune=None):
    """Sample every hop of one batch, reading lists from ``tiers`` first when given and leaving the
    hop-1 nodes that ``prune`` marks unexpanded.

    Returns ``(status, where, n_id, edge_index, e_id, num_nodes_per_hop, num_edges_per_hop)``: on
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
    # room for every edge the fanouts allow, at once: each hop's _grow is then a no-op instead of
    # copying what earlier hops wrote (3 arrays); pages nobody writes are never touched.  A hop
    # that takes every neighbour (k < 0) has no bound and grows as it goes.
    bound = _edge_bound(len(seeds), fanouts)
    rows = np.empty(max(bound, 16), np.int64)
    cols = np.empty(max(bound, 16), np.int64)
    eids = np.empty(max(bound, 16), np.int64)
    n_id = _grow(n_id, len(seeds) + bound)
    picks = np.empty(max(1, _max_fanout(fanouts)), np.int64)
    n_total, e_total, lo = len(seeds), 0, 0
    for h in range(num_hops):
        k = fanouts[h]
        need = (n_total - lo) * k if k > 0 else _hop_edge_count(indptr, n_id, lo, n_total)
        n_id = _grow(n_id, n_total + need)
        rows = _grow(rows, e_total + need)
        cols = _grow(cols, e_total + need)
        eids = _grow(eids, e_total + need)
        status, where, n_new, e_new = _sample_hop(indptr, indices, tiers, n_id, lo, n_total, k,
                                                  state, g2l, rows, cols, eids, e_total, picks, prune, h == 1)
        if status != OK:
            _reset(g2l, n_id, n_new)
            return _failed(status, where, nodes_per_hop, edges_per_hop)
        nodes_per_hop[h + 1] = n_new - n_total
        edges_per_hop[h] = e_new - e_total
        lo, n_total, e_total = n_total, n_new, e_new
    _reset(g2l, n_id, n_total)
    return (OK, -1, n_id[:n_total].copy(), _stack(rows, cols, e_total), eids[:e_total].copy(), nodes_per_hop,
            edges_per_hop)


@njit(cache=True, nogil=True)
def _failed(status, where, nodes_per_hop, edges_per_hop):
    empty = np.empty((2, 0), np.int64)
    return status, where, np.empty(0, np.int64), empty, np.empty(0, np.int64), nodes_per_hop, edges_per_hop


@njit(cache=True, nogil=True)
def _add_seeds(seeds, num_nodes, g2l, n_id):
    """Give seed ``i`` local id ``i``; returns ``(status, count of seeds set in g2l)``."""
    for i in range(len(seeds)):
        v = seeds[i]
        if v < 0 or v >= num_nodes:
            return SEED_OUT_OF_RANGE, i
        if lookup(g2l, v, -1) >= 0:
            return SEED_REPEATED, i
        assign(g2l, v, i)
        n_id[i] = v
    return OK, len(seeds)


@njit(cache=True, nogil=True)
def _sample_hop(indptr, indices, tiers, n_id, lo, hi, k, state, g2l, rows, cols, eids, e, picks, prune, frontier):
    """Sample the in-neighbours of local ids ``[lo, hi)`` into edges ``e...`` (skipping the nodes
    ``prune`` marks when ``frontier``: the hop expanding hop 1's nodes).

    Returns ``(status, where, n_total, e_total)``.  ``rows``/``cols``/``eids``/``n_id`` must already hold
    room for every edge the hop can emit (``(hi - lo) * k``, or the degree sum when ``k < 0``;
    new nodes are at most as many as edges), so the loop never checks capacity.
    """
    n_total = hi
    num_nodes = len(indptr) - 1
    if tiers is not None:  # unpacked here: a field read inside the loop counts a reference each time
        c_slot, c_ptr, c_idx, part_of, slot_of_node, part_ptr, of_part, base, m_ptr, m_idx, served = tiers
    if prune is not None:
        h_slot, h_valid = prune
    for t in range(lo, hi):
        # the targets are random nodes: prefetch indptr of the one 2 * AHEAD ahead and, its offset
        # being cached by now, the start of the CSC list of the one AHEAD ahead (n_id[hi:] is unset)
        prefetch(indptr, n_id[min(t + 2 * AHEAD, hi - 1)])
        if tiers is None:
            prefetch(indices, indptr[n_id[min(t + AHEAD, hi - 1)]])
        v = n_id[t]
        if prune is not None and frontier:
            s = h_slot[v]
            if s >= 0 and h_valid[s] != 0:
                continue
        start = indptr[v]
        d = indptr[v + 1] - start
        m = _choose(state, d, k, picks)
        if tiers is None:
            bad, n_total, e = _emit(indices, start, start, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e,
                                    num_nodes)
        else:
            tier, at = _find_list(v, start, c_slot, c_ptr, part_of, slot_of_node, part_ptr, of_part, base,
                                  m_ptr)
            served[tier] += 1
            if tier == CACHE:
                bad, n_total, e = _emit(c_idx, at, start, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e,
                                        num_nodes)
            elif tier == MACRO:
                bad, n_total, e = _emit(m_idx, at, start, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e,
                                        num_nodes)
            else:
                bad, n_total, e = _emit(indices, at, start, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e,
                                        num_nodes)
        if bad >= 0:
            return NEIGHBOR_OUT_OF_RANGE, start + bad, n_total, e
    return OK, -1, n_total, e


@njit(cache=True, nogil=True, inline="always")
def _find_list(v, start, c_slot, c_ptr, part_of, slot_of_node, part_ptr, of_part, base, m_ptr):
    """``(tier, where v's list starts in that tier's ids)``: the first of cache, macro batch, CSC
    (``start``) that holds it (the lists are equal, so any holder would do; the first is cheapest)."""
    s = c_slot[v] if len(c_slot) else -1
    if s >= 0:
        return CACHE, c_ptr[s]
    p = part_of[v]
    b = of_part[p]
    if b >= 0:
        return MACRO, m_ptr[base[b] + slot_of_node[v] - part_ptr[p]]
    return DISK, start


@njit(cache=True, nogil=True)
def _emit(arr, start, csc_start, m, d, picks, t, g2l, n_id, rows, cols, eids, n_total, e, num_nodes):
    """Emit the ``m`` picked neighbours of target ``t`` from the list ``arr[start:start+d]``, each with
    its CSC edge id ``csc_start + offset`` (the list's position in the CSC, whichever tier ``arr`` is).

    Returns ``(offset in the list of a bad id or -1, n_total, e)``.  A call, not ``inline="always"``:
    numba's IR inlining made the plain sampler slower; the call costs nothing measurable
    (``benchmarks/bench_sampler.py``).
    """
    for i in range(m):
        off = picks[i] if m < d else i
        u = arr[start + off]
        if u < 0 or u >= num_nodes:
            return off, n_total, e
        local = lookup(g2l, u, -1)
        if local < 0:
            local = n_total
            assign(g2l, u, n_total)
            n_id[n_total] = u
            n_total += 1
        rows[e] = local
        cols[e] = t
        eids[e] = csc_start + off
        e += 1
    return -1, n_total, e


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
    forget(g2l, n_id, count, -1)


@njit(cache=True, nogil=True)
def _stack(rows, cols, e):
    out = np.empty((2, e), np.int64)
    out[0, :] = rows[:e]
    out[1, :] = cols[:e]
    return out


@njit(cache=True, nogil=True)
def _edge_bound(num_seeds, fanouts):
    """The most edges the hops can emit when every fanout is positive (each hop's targets are at most
    the previous hop's edges), capped at 2**24; 0 when a fanout is -1 or past the cap (grow instead)."""
    total, frontier = 0, num_seeds
    for k in fanouts:
        if k < 0:
            return 0
        frontier *= k
        total += frontier
        if total > 1 << 24:
            return 0
    return total


@njit(cache=True, nogil=True)
def _max_fanout(fanouts):
    best = 0
    for f in fanouts:
        best = max(best, f)
    return best
