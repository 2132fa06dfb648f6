"""numba kernels of the synthetic graph generator (a degree-corrected SBM): arrays in, arrays out.

Randomness is counter-based: node ``v`` seeds its own splitmix64 stream from ``(key, v)``
(:func:`node_seed`), so its weight, in-degree, in-neighbours and feature row depend only on the
seed and ``v``, never on the chunk that generated them or on the order of the chunks.  The streams
are ``_rng``'s splitmix64 stepped by ``_rng.next_word``: the state lives in a local ``uint64``
instead of a one-element array, because numba reference-counts arrays handed to helpers, and when
such a helper sits on a branch (the ziggurat's slow path, the alias coin) the atomic increments
stay inside the hot loop and cost more than the draw itself (``benchmarks/bench_generate.py`` measures
the feature rate).

Sources are drawn from one alias table per community, laid out back to back in *community
order* (community ``c`` owns rows ``ptr[c]:ptr[c+1]``).  A row is ``[threshold, node, alias, 0]``:
pick a row uniformly, keep ``node`` when a 31-bit coin is below ``threshold``, else ``alias``.
Node ids live in the row, so a pick touches one 16-byte row (one cache line) and nothing else:
picks are random reads of O(N) memory, and that cache miss is the main cost of an edge.

``uint64`` arithmetic wraps on purpose; with ``NUMBA_DISABLE_JIT=1`` numpy reports the wrap as an
overflow warning, so callers run the kernels under ``np.errstate(over="ignore")``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, uint64

from .._rng import GOLDEN, mix64, next_word
from ._convert_kernels import insertion_sort

THRESHOLD_ONE = 2**31 - 1  # alias threshold of a row that always keeps its own node
_COIN_MASK = 2**31 - 1
_DRAW_BUDGET = 4  # draws per wanted source before a duplicate-heavy node accepts a shortfall
_MAX_REJECTS = 8  # tries to draw a community other than the node's own for an inter edge
_INSERTION_SORT_MAX = 24
_ZIGGURAT_R = 3.442619855899  # start of the normal's tail in the 128-layer ziggurat


# -- per-node streams (splitmix64 with the state in a register, ``_rng.next_word``) -----------------


@njit(cache=True, nogil=True, inline="always")
def node_seed(key: np.uint64, v: np.int64) -> np.uint64:
    """The initial state of node ``v``'s stream under ``key``."""
    return mix64(key ^ (uint64(v) * uint64(GOLDEN)))


@njit(cache=True, nogil=True, inline="always")
def _unit(z: np.uint64) -> float:
    """A word as a uniform float in ``[0, 1)`` (53 bits, as ``_rng.uniform01``)."""
    return np.float64(z >> uint64(11)) * (1.0 / 9007199254740992.0)


# -- O(N) set-up: weights, degrees, alias tables ---------------------------------------------------


@njit(cache=True, nogil=True)
def degree_weights(key: np.uint64, xmin: float, xmax: float, exponent: float,
                   out: np.ndarray) -> None:
    """``out[v]``: a power law truncated to ``[xmin, xmax]``, density ∝ x^-exponent (inverse CDF).

    The weight is both the node's expected in-degree and its propensity θ to be drawn as a
    source, so in- and out-degrees are heavy-tailed and correlated, as in a DC-SBM.
    """
    tail = 1.0 - (xmax / xmin) ** (1.0 - exponent)
    power = -1.0 / (exponent - 1.0)
    for v in range(len(out)):
        _, z = next_word(node_seed(key, v))
        out[v] = xmin * (1.0 - _unit(z) * tail) ** power


@njit(cache=True, nogil=True)
def target_degrees(key: np.uint64, weights: np.ndarray, start: np.int64, cap: np.int64,
                   out: np.ndarray) -> None:
    """``out[i]``: in-degree of node ``start + i``, its weight rounded stochastically (which keeps
    the mean and the tail of the weights), at most ``cap``."""
    for i in range(len(out)):
        _, z = next_word(node_seed(key, start + i))
        out[i] = min(np.int64(weights[start + i] + _unit(z)), cap)


@njit(cache=True, nogil=True)
def alias_tables(ptr: np.ndarray, members: np.ndarray, weights: np.ndarray,
                 table: np.ndarray) -> None:
    """Fill ``table`` with one alias table per group ``members[ptr[c]:ptr[c+1]]`` (Vose's method):
    within group ``c``, node ``u`` is drawn with probability ``weights[u] / (group total)``."""
    largest = np.int64(1)
    for c in range(len(ptr) - 1):
        largest = max(largest, ptr[c + 1] - ptr[c])
    scaled = np.empty(largest, dtype=np.float64)
    small = np.empty(largest, dtype=np.int64)
    large = np.empty(largest, dtype=np.int64)
    for c in range(len(ptr) - 1):
        lo, size = ptr[c], ptr[c + 1] - ptr[c]
        total = 0.0
        for j in range(size):
            total += weights[members[lo + j]]
        for j in range(size):
            scaled[j] = weights[members[lo + j]] * size / total
        _vose(scaled, size, small, large, members, table, lo)


@njit(cache=True, nogil=True)
def _vose(scaled: np.ndarray, size: np.int64, small: np.ndarray, large: np.ndarray,
          members: np.ndarray, table: np.ndarray, lo: np.int64) -> None:
    """Rows ``lo:lo+size`` from ``scaled[:size]`` (probabilities times ``size``; consumed)."""
    ns = nl = 0
    for j in range(size):
        if scaled[j] < 1.0:
            small[ns] = j
            ns += 1
        else:
            large[nl] = j
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        poor, rich = small[ns], large[nl - 1]
        threshold = min(np.int64(scaled[poor] * 2147483648.0), THRESHOLD_ONE)
        _set_row(table, lo + poor, threshold, members[lo + poor], members[lo + rich])
        scaled[rich] = (scaled[rich] + scaled[poor]) - 1.0
        if scaled[rich] < 1.0:
            nl -= 1
            small[ns] = rich
            ns += 1
    for j in small[:ns]:
        _set_row(table, lo + j, THRESHOLD_ONE, members[lo + j], members[lo + j])
    for j in large[:nl]:
        _set_row(table, lo + j, THRESHOLD_ONE, members[lo + j], members[lo + j])


@njit(cache=True, nogil=True, inline="always")
def _set_row(table: np.ndarray, row: np.int64, threshold: np.int64, node: np.int64,
             alias: np.int64) -> None:
    table[row, 0] = threshold
    table[row, 1] = node
    table[row, 2] = alias
    table[row, 3] = 0


# -- topology ------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def in_neighbors(key: np.uint64, start: np.int64, order: np.ndarray, targets: np.ndarray,
                 community: np.ndarray, ptr: np.ndarray, table: np.ndarray,
                 group_table: np.ndarray, mixing_intra: float, degrees: np.ndarray,
                 out: np.ndarray) -> np.int64:
    """In-neighbours of nodes ``start .. start+len(targets)``: sorted, distinct, no self loops.

    Node ``start + i`` asks for ``targets[i]`` sources, each from its own community with
    probability ``mixing_intra``.  A small hash set rejects duplicates and the node itself as they
    are drawn, so each part gets its exact count.  What the own community cannot supply (a hub in
    a small community has fewer distinct candidates than intra draws) is drawn from the other
    communities, which keeps the degree tail; a draw budget bounds the work and accepts a rare
    shortfall.  Writes the realised counts to ``degrees``, the lists back to back in node order
    into ``out`` (``len(out) >= targets.sum()``), and returns the number of edges written.

    Nodes are visited in ``order`` (a permutation of ``range(len(targets))``), by community: then
    one community's alias rows serve many consecutive nodes from the cache instead of being
    fetched from memory for each.  Per-node streams make the result independent of the order.
    """
    slots = np.zeros(len(targets) + 1, dtype=np.int64)  # node i writes at out[slots[i]:]
    for i in range(len(targets)):
        slots[i + 1] = slots[i] + targets[i]
    largest = max(targets.max(), 1) if len(targets) else 1
    seen = np.zeros((_table_size(largest), 2), dtype=np.int64)  # [value, stamp], open addressing
    scratch = np.empty(largest + 1, dtype=out.dtype)
    counts = np.empty(largest + 2, dtype=np.int64)
    for i in order:
        v, want, c = start + i, np.int64(targets[i]), np.int64(community[start + i])
        pos, bits = slots[i], _log2(_table_size(want))
        _insert(seen, bits, i + 1, v)  # the node itself: no self loops
        s, n_intra = _intra_count(node_seed(key, v), want, mixing_intra, len(group_table),
                                  ptr[c + 1] - ptr[c])
        s, a = _fill(s, out, pos, 0, n_intra, c, True, ptr, table, group_table, seen, bits, i + 1)
        s, d = _fill(s, out, pos, a, want, c, False, ptr, table, group_table, seen, bits, i + 1)
        _sort_run(out, pos, a, scratch, counts)
        _sort_run(out, pos + a, d - a, scratch, counts)
        _merge_runs(out, pos, a, d, scratch)
        degrees[i] = d
    return _compact(out, slots, degrees)


@njit(cache=True, nogil=True)
def _compact(out: np.ndarray, slots: np.ndarray, degrees: np.ndarray) -> np.int64:
    """Close the gaps that shortfalls left between the lists; return the edge count."""
    pos = np.int64(0)
    for i in range(len(degrees)):
        if pos != slots[i]:
            for k in range(degrees[i]):
                out[pos + k] = out[slots[i] + k]
        pos += degrees[i]
    return pos


@njit(cache=True, nogil=True, inline="always")
def _intra_count(s: np.uint64, want: np.int64, p: float, groups: np.int64,
                 size: np.int64) -> tuple[np.uint64, np.int64]:
    """Binomial(want, p) intra draws (all of them with one community), at most ``size - 1``."""
    if groups == 1:
        return s, min(want, size - 1)
    hits = np.int64(0)
    for _ in range(want):
        s, z = next_word(s)
        hits += _unit(z) < p
    return s, min(hits, size - 1)


@njit(cache=True, nogil=True)
def _fill(s: np.uint64, out: np.ndarray, pos: np.int64, have: np.int64, want: np.int64,
          c: np.int64, intra: bool, ptr: np.ndarray, table: np.ndarray, group_table: np.ndarray,
          seen: np.ndarray, bits: np.int64, stamp: np.int64) -> tuple[np.uint64, np.int64]:
    """Fill ``out[pos+have:pos+want]`` with new distinct sources of one kind; return the count.

    Draws go in batches (every missing source, then the hash-set filter) so that the table reads
    of consecutive draws are independent and their cache misses overlap.
    """
    budget = _DRAW_BUDGET * (want - have) + 16
    k = len(group_table)
    while have < want and budget > 0:
        need = min(want - have, budget)
        budget -= need
        for j in range(pos + have, pos + have + need):
            other = c
            for _ in range(0 if intra else _MAX_REJECTS):  # fails only if c has most weight
                s, z = next_word(s)
                other = _pick(z, group_table, 0, k)
                if other != c:
                    break
            s, z = next_word(s)
            out[j] = _pick(z, table, ptr[other], ptr[other + 1] - ptr[other])
        kept = have
        for j in range(pos + have, pos + have + need):
            if _insert(seen, bits, stamp, np.int64(out[j])):
                out[pos + kept] = out[j]
                kept += 1
        have = kept
    return s, have


@njit(cache=True, nogil=True, inline="always")
def _pick(z: np.uint64, table: np.ndarray, lo: np.int64, size: np.int64) -> np.int64:
    """Weighted draw among rows ``lo:lo+size`` from one word: the high 32 bits choose the row,
    the low 31 are the coin between the row's node and its alias."""
    row = lo + np.int64(((z >> uint64(32)) * uint64(size)) >> uint64(32))
    node, alias = np.int64(table[row, 1]), np.int64(table[row, 2])
    return node if np.int64(z & uint64(_COIN_MASK)) < table[row, 0] else alias


@njit(cache=True, nogil=True, inline="always")
def _table_size(n: np.int64) -> np.int64:
    """Power of two >= 2n + 2 (load factor <= 1/2), at least 16."""
    size = np.int64(16)
    while size < 2 * n + 2:
        size *= 2
    return size


@njit(cache=True, nogil=True, inline="always")
def _log2(n: np.int64) -> np.int64:
    bits = np.int64(0)
    while (np.int64(1) << bits) < n:
        bits += 1
    return bits


@njit(cache=True, nogil=True, inline="always")
def _insert(seen: np.ndarray, bits: np.int64, stamp: np.int64, x: np.int64) -> bool:
    """Add ``x`` to the current node's set (entries stamped ``stamp``); False if already there.

    Stamps make clearing the table between nodes unnecessary."""
    mask = (np.int64(1) << bits) - 1
    h = np.int64((uint64(x) * uint64(GOLDEN)) >> uint64(64 - bits))
    while seen[h, 1] == stamp:
        if seen[h, 0] == x:
            return False
        h = (h + 1) & mask
    seen[h, 0] = x
    seen[h, 1] = stamp
    return True


@njit(cache=True, nogil=True)
def _sort_run(a: np.ndarray, lo: np.int64, n: np.int64, scratch: np.ndarray,
              counts: np.ndarray) -> None:
    """Sort the distinct values ``a[lo:lo+n]`` in place.

    Long runs get one bucket pass over ``[min, max]`` (the values are spread evenly: random
    members of one community, or of random communities), leaving a nearly sorted run that
    insertion sort finishes in linear time; short runs go straight to insertion sort.  Several
    times faster than numba's quicksort at the degrees that carry most edges.
    """
    if n > _INSERTION_SORT_MAX:
        lowest, highest = np.int64(a[lo]), np.int64(a[lo])
        for i in range(lo, lo + n):
            lowest, highest = min(lowest, np.int64(a[i])), max(highest, np.int64(a[i]))
        scale = n / (highest - lowest + 1.0)
        for b in range(n + 1):
            counts[b] = 0
        for i in range(lo, lo + n):
            counts[min(np.int64((a[i] - lowest) * scale), n - 1) + 1] += 1
        for b in range(n):
            counts[b + 1] += counts[b]
        for i in range(lo, lo + n):
            b = min(np.int64((a[i] - lowest) * scale), n - 1)
            scratch[counts[b]] = a[i]
            counts[b] += 1
        for i in range(n):
            a[lo + i] = scratch[i]
    insertion_sort(a, lo, lo + n)


@njit(cache=True, nogil=True)
def _merge_runs(a: np.ndarray, lo: np.int64, mid: np.int64, n: np.int64,
                scratch: np.ndarray) -> None:
    """Merge the sorted runs ``a[lo:lo+mid]`` and ``a[lo+mid:lo+n]`` in place (via ``scratch``)."""
    if mid == 0 or mid == n or a[lo + mid - 1] < a[lo + mid]:
        return
    i, j = lo, lo + mid
    for k in range(n):
        if j == lo + n or (i < lo + mid and a[i] < a[j]):
            scratch[k] = a[i]
            i += 1
        else:
            scratch[k] = a[j]
            j += 1
    for k in range(n):
        a[lo + k] = scratch[k]


# -- features ------------------------------------------------------------------------------------


def ziggurat_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(kn, wn, fn)`` of the 128-layer ziggurat for N(0, 1) (Marsaglia & Tsang 2000)."""
    dn = tn = _ZIGGURAT_R
    vn = 9.91256303526217e-3
    m1 = 2147483648.0
    kn, wn, fn = np.zeros(128, np.int64), np.zeros(128), np.zeros(128)
    q = vn / math.exp(-0.5 * dn * dn)
    kn[0], kn[1] = int(dn / q * m1), 0
    wn[0], wn[127] = q / m1, dn / m1
    fn[0], fn[127] = 1.0, math.exp(-0.5 * dn * dn)
    for i in range(126, 0, -1):
        dn = math.sqrt(-2.0 * math.log(vn / dn + math.exp(-0.5 * dn * dn)))
        kn[i + 1] = int(dn / tn * m1)
        tn = dn
        fn[i] = math.exp(-0.5 * dn * dn)
        wn[i] = dn / m1
    return kn, wn, fn


@njit(cache=True, nogil=True)
def feature_rows(key: np.uint64, start: np.int64, labels: np.ndarray, centroids: np.ndarray,
                 noise: float, kn: np.ndarray, wn: np.ndarray, fn: np.ndarray,
                 out: np.ndarray) -> None:
    """``out[i] = centroids[labels[i]] + noise * N(0, I)`` for node ``start + i``.

    Normal draws use the ziggurat: one word per draw on the fast path (~99 %).  The layer comes
    from the low 7 bits and the signed magnitude from the high 32, so they are independent (the
    original shares bits between them, a known flaw).
    """
    for i in range(out.shape[0]):
        s = node_seed(key, start + i)
        c = labels[i]
        for j in range(out.shape[1]):
            while True:
                s, z = next_word(s)
                hz = np.int64(z >> uint64(32)) - np.int64(2147483648)
                iz = np.int64(z & uint64(127))
                if abs(hz) < kn[iz]:
                    x = hz * wn[iz]
                    break
                s, x, ok = _normal_slow(s, hz, iz, wn[iz], fn[iz], fn[max(iz - 1, 0)])
                if ok:
                    break
            out[i, j] = centroids[c, j] + noise * x


@njit(cache=True, nogil=True)
def _normal_slow(s: np.uint64, hz: np.int64, iz: np.int64, w: float, f: float,
                 f_below: float) -> tuple[np.uint64, float, bool]:
    """The ziggurat's rare paths: the tail beyond r (layer 0) or a wedge test; ``ok`` False means
    reject and draw again.  Scalars only, so the hot loop passes no arrays on this branch."""
    if iz == 0:
        while True:
            s, z = next_word(s)
            t = -math.log(1.0 - _unit(z)) / _ZIGGURAT_R
            s, z = next_word(s)
            if -2.0 * math.log(1.0 - _unit(z)) >= t * t:
                return s, (_ZIGGURAT_R + t if hz > 0 else -_ZIGGURAT_R - t), True
    x = hz * w
    s, z = next_word(s)
    return s, x, f + _unit(z) * (f_below - f) < math.exp(-0.5 * x * x)
