"""The profiling kernels against plain-Python references (also run with NUMBA_DISABLE_JIT=1 by tox)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_graph

from outre_async.plan import _profile_kernels as K
from outre_async.sampling import NeighborSampler


def _owners_reference(sub) -> np.ndarray:
    """Owner of each local node by brute force: the set of hop-1 nodes on its paths to the seeds."""
    b, n1 = sub.batch_size, sub.num_sampled_nodes[1]
    src, dst = sub.edge_index
    parents: dict[int, set[int]] = {}
    for u, t in zip(src.tolist(), dst.tolist(), strict=True):
        parents.setdefault(u, set()).add(t)

    def roots(u: int, seen: frozenset[int]) -> set[int]:
        if u < b:
            return {-1}
        if u < b + n1:
            return {u}
        out: set[int] = set()
        for t in parents.get(u, ()):
            if t not in seen:
                out |= roots(t, seen | {t})
        return out

    owner = np.empty(sub.num_nodes, np.int64)
    for u in range(sub.num_nodes):
        r = roots(u, frozenset({u}))
        owner[u] = next(iter(r)) if len(r) == 1 else K.SHARED
    return owner


@pytest.mark.parametrize("seed", range(6))
def test_subtree_owners_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    indptr, indices = random_graph(rng, 60, 5)
    sub = NeighborSampler((indptr, indices), [3, 2, 2], seed=seed).sample(rng.choice(60, 4, replace=False))
    owner = np.empty(sub.num_nodes, np.int64)
    src, dst = (np.ascontiguousarray(a) for a in sub.edge_index)
    K.subtree_owners(src, dst, sub.num_nodes, sub.batch_size, sub.num_sampled_nodes[1], 3, owner)
    np.testing.assert_array_equal(owner, _owners_reference(sub))


def test_reads_after_reuse_counts_only_accesses_beyond_the_window() -> None:
    node = np.array([1, 1, 1, 1, 2, 2], np.int64)
    step = np.array([0, 1, 4, 5, 3, 9], np.int64)
    out = np.empty(6, np.uint8)
    K.reads_after_reuse(node, step, 2, out)
    assert out.tolist() == [1, 0, 1, 0, 1, 1]


def test_replay_history_pulls_until_the_row_is_too_old() -> None:
    # node 7: computed as a seed at 0, met in hop 1 at 2, 4, 6, 9; horizon 4 -> pulls at 2 and 4, then
    # 6 is 6 steps after the push at 0 (pulls push nothing): computed (push), 9 is 3 after: pulled
    node = np.array([7, 7, 7, 7, 7, 8], np.int64)
    step = np.array([0, 2, 4, 6, 9, 1], np.int64)
    frontier = np.array([0, 1, 1, 1, 1, 1], np.uint8)
    pulled = np.empty(6, np.uint8)
    K.replay_history(node, step, frontier, 4, pulled)
    assert pulled.tolist() == [0, 1, 1, 0, 1, 0]
