"""numba kernels of streaming FENNEL: scoring, the partition heaps, and placing a chunk of nodes.

Arrays in, arrays out, no I/O, no Python objects.  The streaming orchestration (``_stream``) hands
one chunk of nodes at a time: ``nodes`` (the node ids, in stream order), ``ptr`` (int64,
``len(nodes) + 1`` offsets into ``buf``) and ``buf`` (the nodes' in-neighbour lists, copied from the
CSC ``indices``).  Everything else is state that lives across chunks and passes:

* ``assign`` [N] int32: partition of every node, ``-1`` while unplaced;
* ``size``/``tsize`` [K] int64: nodes and training nodes per partition;
* ``counts`` [K] int64 (all zero between nodes) and ``touched`` [K] int64: the per-node scratch;
* two indexed binary min-heaps per *group* (``heap``/``hpos``/``key``, shape [2, K]): heap 0 ranks
  the partitions for an ordinary node, heap 1 for a training node.

Groups: a single-level run has one group holding partitions ``0..K-1``; the second level of a
two-level run has ``k1`` groups of ``kk`` partitions each, group ``g`` owning ``[g*kk, (g+1)*kk)``
and node ``v`` being placed in group ``node_group[v]`` (its first-level part).  Only neighbours
already placed in v's group count.  Per group: ``alpha[g]``, ``alpha_t[g]``, ``cap[g]``, ``tcap[g]``.

Scoring (FENNEL with OUTRE's training balance): placing v in partition p scores
``c_p(v) - cost_p(v)`` with ``c_p`` = v's neighbours in p and
``cost_p(v) = alpha gamma size_p^(gamma-1)  [+ alpha_t gamma tsize_p^(gamma-1) if v trains]``.
Allowed partitions have ``size_p < cap`` (and ``tsize_p < tcap`` for a training node; if no
partition of the group has training room left, the node is placed as an ordinary node).  Ties go to
the smaller partition, then the lower id.  Only partitions holding a neighbour are scored one by
one; every other partition scores ``-cost_p``, so the best of them is the top of the heap keyed by
``(cost_p, size_p, p)`` (``inf`` when not allowed).  If that top holds a neighbour, its real score is
higher than ``-cost`` and was already scored: the comparison stays exact.  Cost per node:
``O(deg v + log K)``.  ``objective == LDG`` scores ``c_p (1 - size_p / cap)`` (linear deterministic
greedy) instead, with the least-loaded partition as the best of the rest.

The Bloom-filter variant (``_bloom_kernels``) scores with the same heaps
(:func:`choose_partition`, :func:`refresh_heaps`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

FENNEL, LDG = 0, 1
INF = np.inf


# -- costs and heaps -------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _cost(p, t, size, tsize, alpha, alpha_t, gamma, objective):
    if objective == LDG:
        return 0.0
    c = alpha * gamma * float(size[p]) ** (gamma - 1.0)
    if t:
        c = c + alpha_t * gamma * float(tsize[p]) ** (gamma - 1.0)
    return c


@njit(cache=True, nogil=True, inline="always")
def _allowed(p, t, size, tsize, cap, tcap):
    if size[p] >= cap:
        return False
    return (not t) or tsize[p] < tcap


@njit(cache=True, nogil=True)
def _key(h, p, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective):
    t = h == 1
    if not _allowed(p, t, size, tsize, cap, tcap):
        return INF
    if objective == LDG:
        return float(size[p])
    return _cost(p, t, size, tsize, alpha, alpha_t, gamma, objective)


@njit(cache=True, nogil=True, inline="always")
def _less(h, a, b, key, size):
    ka, kb = key[h, a], key[h, b]
    if ka != kb:
        return ka < kb
    if size[a] != size[b]:
        return size[a] < size[b]
    return a < b


@njit(cache=True, nogil=True)
def _sift(h, base, kk, i, heap, hpos, key, size):
    """Restore the heap order around heap-local position ``i`` of the group starting at ``base``."""
    while i > 0:  # up
        parent = (i - 1) >> 1
        a, b = heap[h, base + i], heap[h, base + parent]
        if not _less(h, a, b, key, size):
            break
        heap[h, base + i], heap[h, base + parent] = b, a
        hpos[h, a], hpos[h, b] = parent, i
        i = parent
    while True:  # down
        left = 2 * i + 1
        if left >= kk:
            break
        best = left
        if left + 1 < kk and _less(h, heap[h, base + left + 1], heap[h, base + left], key, size):
            best = left + 1
        a, b = heap[h, base + i], heap[h, base + best]
        if not _less(h, b, a, key, size):
            break
        heap[h, base + i], heap[h, base + best] = b, a
        hpos[h, b], hpos[h, a] = i, best
        i = best


@njit(cache=True, nogil=True)
def refresh_heaps(p, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective):
    """Recompute partition p's keys in both heaps of its group and re-sift."""
    g = p // kk
    for h in range(2):
        key[h, p] = _key(h, p, size, tsize, alpha[g], alpha_t[g], gamma, cap[g], tcap[g], objective)
        _sift(h, g * kk, kk, hpos[h, p], heap, hpos, key, size)


@njit(cache=True, nogil=True)
def init_heaps(kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective):
    """Build both heaps of every group from the current sizes (O(K log K))."""
    num_parts = heap.shape[1]
    for h in range(2):
        for p in range(num_parts):
            heap[h, p] = p
            hpos[h, p] = p % kk
            g = p // kk
            key[h, p] = _key(h, p, size, tsize, alpha[g], alpha_t[g], gamma, cap[g], tcap[g], objective)
    for p in range(num_parts):
        refresh_heaps(p, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)


# -- placing nodes ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _better(s1, z1, p1, s2, z2, p2):
    if s1 != s2:
        return s1 > s2
    if z1 != z2:
        return z1 < z2
    return p1 < p2


@njit(cache=True, nogil=True)
def choose_partition(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t, gamma, cap,
                     tcap, objective):
    """Best partition of v given the counts of the ``nt`` touched partitions; resets the counts."""
    best, best_s = -1, -INF
    for j in range(nt):
        p = touched[j]
        c = counts[p]
        counts[p] = 0
        if not _allowed(p, t, size, tsize, cap[g], tcap[g]):
            continue
        if objective == LDG:
            s = c * (1.0 - size[p] / cap[g])
        else:
            s = c - _cost(p, t, size, tsize, alpha[g], alpha_t[g], gamma, objective)
        if best < 0 or _better(s, size[p], p, best_s, size[best], best):
            best, best_s = p, s
    h = 1 if t else 0
    q = heap[h, g * kk]
    s = 0.0 if objective == LDG else 0.0 - key[h, q]
    if best < 0 or _better(s, size[q], q, best_s, size[best], best):
        best = q
    return best


@njit(cache=True, nogil=True)
def fennel_chunk(nodes, ptr, buf, assign, node_group, is_train, kk, size, tsize, counts, touched,
                 heap, hpos, key, alpha, alpha_t, gamma, cap, tcap, objective, restream):
    """Place every node of the chunk, in order.  Returns how many training nodes found no partition
    with training room left (placed as ordinary nodes)."""
    fallbacks = 0
    grouped = len(node_group) > 0
    for i in range(len(nodes)):
        v = nodes[i]
        g = node_group[v] if grouped else 0
        t = is_train[v]
        if restream and assign[v] >= 0:
            old = assign[v]
            assign[v] = -1
            size[old] -= 1
            tsize[old] -= t
            refresh_heaps(old, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
        if t and (objective == LDG or key[1, heap[1, g * kk]] == INF):
            fallbacks += 1 if objective == FENNEL else 0
            t = False
        nt = 0
        for e in range(ptr[i], ptr[i + 1]):
            u = buf[e]
            if u == v:
                continue
            p = assign[u]
            if p < 0 or p // kk != g:
                continue
            if counts[p] == 0:
                touched[nt] = p
                nt += 1
            counts[p] += 1
        best = choose_partition(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t,
                                gamma, cap, tcap, objective)
        assign[v] = best
        size[best] += 1
        tsize[best] += is_train[v]
        refresh_heaps(best, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
    return fallbacks
