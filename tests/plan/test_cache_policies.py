"""The cache-policy kernels (``plan._policy_kernels``) against plain-Python references: LRU against an
OrderedDict, static top-C against counting, Belady MIN (heap + next-use array) against a scan that
looks ahead for every cached row at every eviction, and against an exhaustive search over every
keep/evict choice on tiny sequences (MIN must equal the true optimum, not just the scan)."""

from __future__ import annotations

import functools
from collections import Counter, OrderedDict

import numpy as np
import pytest

from outre_async.plan._policy_kernels import NEVER, dense_ids, next_uses, reads_lru, reads_min, reads_static


def ref_lru(seq: list[int], cap: int) -> int:
    cache: OrderedDict[int, None] = OrderedDict()
    reads = 0
    for r in seq:
        if r in cache:
            cache.move_to_end(r)
            continue
        reads += 1
        if cap == 0:
            continue
        if len(cache) == cap:
            cache.popitem(last=False)
        cache[r] = None
    return reads


def ref_static(seq: list[int], cap: int) -> int:
    counts = sorted(Counter(seq).values(), reverse=True)
    return min(cap, len(counts)) + sum(counts[cap:])


def _next_use(seq: list[int], i: int, r: int) -> float:
    return next((j for j in range(i + 1, len(seq)) if seq[j] == r), float("inf"))


def ref_min(seq: list[int], cap: int) -> int:
    """Belady with bypass by brute force: at each miss, scan ahead for every candidate."""
    cache: set[int] = set()
    reads = 0
    for i, r in enumerate(seq):
        if r in cache:
            continue
        reads += 1
        if cap == 0:
            continue
        cache.add(r)
        if len(cache) > cap:
            cache.remove(max(cache, key=lambda c: (_next_use(seq, i, c), c == r)))
    return reads


def optimum(seq: list[int], cap: int) -> int:
    """The fewest reads over every choice of what to keep after each miss (exhaustive, tiny inputs)."""
    @functools.cache
    def best(i: int, cache: frozenset[int]) -> int:
        if i == len(seq):
            return 0
        r = seq[i]
        if r in cache:
            return best(i + 1, cache)
        options = [cache]  # drop the row just read
        if len(cache) < cap:
            options.append(cache | {r})
        else:
            options += [(cache - {v}) | {r} for v in cache]
        return 1 + min(best(i + 1, c) for c in options)

    return best(0, frozenset())


def _seq(seed: int, n: int, rows: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    skew = rng.zipf(1.3, size=n) % rows  # skewed, as hot rows are
    return np.where(rng.random(n) < 0.5, skew, rng.integers(0, rows, size=n)).astype(np.int64)


def test_next_uses() -> None:
    nxt = next_uses(np.array([0, 1, 0, 2, 1, 0]), 3)
    assert nxt.tolist() == [2, 4, 5, NEVER, NEVER, NEVER]


@pytest.mark.parametrize("seed", range(12))
def test_kernels_match_references(seed: int) -> None:
    raw = _seq(seed, 400, 60) * 7 + 3  # sparse ids: dense_ids renumbers them
    seq, rows = dense_ids(raw)
    as_list = seq.tolist()
    for cap in (0, 1, 2, 5, 17, 40, 59, 60, 100):
        assert reads_lru(seq, rows, cap) == ref_lru(as_list, cap), cap
        assert reads_static(seq, rows, cap) == ref_static(as_list, cap), cap
        assert reads_min(seq, rows, cap) == ref_min(as_list, cap), cap
        assert reads_min(seq, rows, cap) <= min(reads_lru(seq, rows, cap), reads_static(seq, rows, cap))


@pytest.mark.parametrize("seed", range(30))
def test_min_is_optimal_on_tiny_sequences(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    seq, rows = dense_ids(rng.integers(0, 6, size=int(rng.integers(1, 16))))
    for cap in range(0, 5):
        assert reads_min(seq, rows, cap) == optimum(seq.tolist(), cap), (seq.tolist(), cap)


def test_compulsory_reads_with_room_for_all() -> None:
    seq, rows = dense_ids(_seq(7, 1000, 80))
    for reads in (reads_lru(seq, rows, rows), reads_min(seq, rows, rows), reads_static(seq, rows, rows)):
        assert reads == rows  # each row read once
