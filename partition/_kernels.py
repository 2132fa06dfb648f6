"""numba kernels of the streaming partitioner: arrays in, arrays out, no I/O, no Python objects.

The streaming orchestration (``_stream``) hands one chunk of nodes at a time: ``nodes`` (the node
ids, in stream order), ``ptr`` (int64, ``len(nodes) + 1`` offsets into ``buf``) and ``buf`` (the
nodes' in-neighbour lists, copied from the CSC ``indices``).  Everything else is state that lives
across chunks and passes:

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

The Bloom-filter variant (``bloom_*``) replaces the ``assign`` look-ups by one Bloom filter of node
ids per partition: ``c_p`` is the number of neighbours the filter of p claims, ``O(deg v * kk)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

FENNEL, LDG = 0, 1
_INF = np.inf
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_SALT = 0x9E3779B97F4A7C15


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
        return _INF
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
def _refresh(p, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective):
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
        _refresh(p, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)


# -- exact streaming -------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _better(s1, z1, p1, s2, z2, p2):
    if s1 != s2:
        return s1 > s2
    if z1 != z2:
        return z1 < z2
    return p1 < p2


@njit(cache=True, nogil=True)
def _choose(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t, gamma, cap, tcap,
            objective):
    """Best partition of v given the counts of the ``nt`` touched partitions; resets the counts."""
    best, best_s = -1, -_INF
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
            _refresh(old, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
        if t and (objective == LDG or key[1, heap[1, g * kk]] == _INF):
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
        best = _choose(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t, gamma, cap,
                       tcap, objective)
        assign[v] = best
        size[best] += 1
        tsize[best] += is_train[v]
        _refresh(best, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
    return fallbacks


# -- statistics ------------------------------------------------------------------------------------


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


# -- Bloom filters ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _mix(x):
    z = uint64(x) + uint64(_SALT)
    z = (z ^ (z >> uint64(30))) * uint64(_M1)
    z = (z ^ (z >> uint64(27))) * uint64(_M2)
    return z ^ (z >> uint64(31))


@njit(cache=True, nogil=True)
def bloom_add(bits, f, nbits, nhash, x):
    """Insert ``x`` into filter ``f`` (row ``f`` of the uint64 word matrix ``bits``)."""
    h1 = _mix(x)
    h2 = _mix(h1) | uint64(1)
    for i in range(nhash):
        b = (h1 + uint64(i) * h2) % uint64(nbits)
        bits[f, b >> uint64(6)] |= uint64(1) << (b & uint64(63))


@njit(cache=True, nogil=True)
def bloom_has(bits, f, nbits, nhash, x):
    h1 = _mix(x)
    h2 = _mix(h1) | uint64(1)
    for i in range(nhash):
        b = (h1 + uint64(i) * h2) % uint64(nbits)
        if bits[f, b >> uint64(6)] & (uint64(1) << (b & uint64(63))) == uint64(0):
            return False
    return True


@njit(cache=True, nogil=True)
def bloom_add_many(bits, f, nbits, nhash, xs):
    for x in xs:
        bloom_add(bits, f, nbits, nhash, x)


@njit(cache=True, nogil=True)
def bloom_count(bits, f, nbits, nhash, xs):
    c = 0
    for x in xs:
        if bloom_has(bits, f, nbits, nhash, x):
            c += 1
    return c


@njit(cache=True, nogil=True)
def bloom_chunk(nodes, ptr, buf, out_assign, node_group, is_train, kk, size, tsize, counts, touched,
                heap, hpos, key, alpha, alpha_t, gamma, cap, tcap, objective, bits, nbits, nhash):
    """:func:`fennel_chunk` with Bloom-filter intersections; ``out_assign[i]`` receives node i's
    partition (chunk-local output, so no O(N) assignment is needed).  ``node_group`` here is
    chunk-local too (empty for one group)."""
    fallbacks = 0
    grouped = len(node_group) > 0
    for i in range(len(nodes)):
        v = nodes[i]
        g = node_group[i] if grouped else 0
        t = is_train[v]
        if t and key[1, heap[1, g * kk]] == _INF:
            fallbacks += 1
            t = False
        nt = 0
        for p in range(g * kk, (g + 1) * kk):
            if size[p] == 0:
                continue
            c = 0
            for e in range(ptr[i], ptr[i + 1]):
                u = buf[e]
                if u != v and bloom_has(bits, p, nbits, nhash, u):
                    c += 1
            if c:
                counts[p] = c
                touched[nt] = p
                nt += 1
        best = _choose(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t, gamma, cap,
                       tcap, objective)
        out_assign[i] = best
        bloom_add(bits, best, nbits, nhash, v)
        size[best] += 1
        tsize[best] += is_train[v]
        _refresh(best, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
    return fallbacks
