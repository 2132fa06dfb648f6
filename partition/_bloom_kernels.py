"""numba kernels of the Bloom-filter partitioner: one Bloom filter of node ids per partition.

:func:`bloom_chunk` replaces :func:`~._fennel_kernels.fennel_chunk`'s ``assign`` look-ups by the
filters (no O(N) assignment in memory): ``c_p`` is the number of v's neighbours that the filter of
p claims, ``O(deg v * kk)`` per node; scoring and heaps are the exact kernel's.  Filters are rows of
a uint64 word matrix; the ``nhash`` bit positions of ``x`` are ``h1 + i h2 (mod nbits)``
(double hashing) with ``h1``, ``h2`` two splitmix64 outputs (``outre_async._rng``).
"""

from __future__ import annotations

from numba import njit, uint64

from outre_async._rng import next_word

from ._fennel_kernels import INF, choose_partition, refresh_heaps


@njit(cache=True, nogil=True, inline="always")
def _hash(x):
    """splitmix64's output for state ``x``: a bijection of 64-bit words, so distinct ids never
    share ``h1``."""
    _, h = next_word(uint64(x))
    return h


@njit(cache=True, nogil=True)
def bloom_add(bits, f, nbits, nhash, x):
    """Insert ``x`` into filter ``f`` (row ``f`` of the uint64 word matrix ``bits``)."""
    h1 = _hash(x)
    h2 = _hash(h1) | uint64(1)
    for i in range(nhash):
        b = (h1 + uint64(i) * h2) % uint64(nbits)
        bits[f, b >> uint64(6)] |= uint64(1) << (b & uint64(63))


@njit(cache=True, nogil=True)
def bloom_has(bits, f, nbits, nhash, x):
    h1 = _hash(x)
    h2 = _hash(h1) | uint64(1)
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
    """:func:`~._fennel_kernels.fennel_chunk` with Bloom-filter intersections; ``out_assign[i]`` receives node i's
    partition (chunk-local output, so no O(N) assignment is needed).  ``node_group`` here is
    chunk-local too (empty for one group)."""
    fallbacks = 0
    grouped = len(node_group) > 0
    for i in range(len(nodes)):
        v = nodes[i]
        g = node_group[i] if grouped else 0
        t = is_train[v]
        if t and key[1, heap[1, g * kk]] == INF:
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
        best = choose_partition(v, g, t, nt, kk, touched, counts, size, tsize, heap, key, alpha, alpha_t,
                                gamma, cap, tcap, objective)
        out_assign[i] = best
        bloom_add(bits, best, nbits, nhash, v)
        size[best] += 1
        tsize[best] += is_train[v]
        refresh_heaps(best, kk, heap, hpos, key, size, tsize, alpha, alpha_t, gamma, cap, tcap, objective)
    return fallbacks
