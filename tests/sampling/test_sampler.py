"""The numba neighbour sampler: exact equality with the plain-Python reference, sampling
distribution, structural invariants of the output, errors, thread safety, and NUMBA_DISABLE_JIT."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sampler import reference_sample, uses_floyd

import outre_async as oa
from outre_async._rng import stream_state
from outre_async.sampling import _sampler_kernels as K
from outre_async.sampling._sampler import SampledSubgraph


def random_csc(n: int, max_deg: int, seed: int, dtype=np.int32, simple: bool = True):
    """A random CSC with degrees 0..max_deg; ``simple``: no neighbour listed twice for a node."""
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, max_deg + 1, size=n)
    if simple:
        deg = np.minimum(deg, n)
        lists = [rng.choice(n, size=d, replace=False) for d in deg]
    else:
        lists = [rng.integers(0, n, size=d) for d in deg]
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = np.concatenate(lists).astype(dtype) if len(lists) else np.empty(0, dtype)
    return indptr, indices


def assert_same_as_reference(indptr, indices, seeds, fanouts, seed, stream) -> SampledSubgraph:
    out = oa.NeighborSampler((indptr, indices), fanouts, seed=seed).sample(seeds, stream)
    ref = reference_sample(indptr, indices, seeds, fanouts, seed=seed, stream=stream)
    assert out.n_id.tolist() == ref["n_id"]
    assert out.edge_index.tolist() == ref["edge_index"]
    assert out.e_id is not None and out.e_id.tolist() == ref["e_id"]
    assert list(out.num_sampled_nodes) == ref["num_sampled_nodes"]
    assert list(out.num_sampled_edges) == ref["num_sampled_edges"]
    assert out.batch_size == len(seeds)
    # the edge id names the CSC entry the edge came from: its target's list, holding its source
    if out.num_edges:
        src, dst = out.n_id[out.edge_index[0]], out.n_id[out.edge_index[1]]
        assert (indices[out.e_id] == src).all()
        assert ((indptr[dst] <= out.e_id) & (out.e_id < indptr[dst + 1])).all()
    return out


# -- exact equality with the reference -----------------------------------------------------------
@pytest.mark.parametrize("fanouts", [[3], [5, 4], [2, -1], [25, 10, 5], [-1, 3], [1, 1, 1, 1]])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_kernel_equals_reference(fanouts, dtype) -> None:
    indptr, indices = random_csc(400, 60, seed=1, dtype=dtype)
    seeds = np.random.default_rng(2).choice(400, size=17, replace=False)
    for stream in range(3):
        assert_same_as_reference(indptr, indices, seeds, fanouts, seed=7, stream=stream)


def test_both_choice_algorithms_are_exercised() -> None:
    """The graph of the equality tests must reach Floyd's and the selection branch."""
    deg = np.diff(random_csc(400, 60, seed=1)[0])
    for k in (5, 10, 25):
        branch = [uses_floyd(int(d), k) for d in deg if d > k]
        assert any(branch) and not all(branch)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), max_deg=st.integers(0, 30), graph_seed=st.integers(0, 2**32 - 1),
       fanouts=st.lists(st.sampled_from([-1, 1, 2, 3, 5, 8, 13]), min_size=1, max_size=3),
       num_seeds=st.integers(0, 10), seed=st.integers(0, 2**63 - 1), stream=st.integers(0, 10**6))
def test_kernel_equals_reference_on_random_graphs(n, max_deg, graph_seed, fanouts, num_seeds, seed,
                                                  stream) -> None:
    indptr, indices = random_csc(n, max_deg, graph_seed, simple=False)
    seeds = np.random.default_rng(graph_seed).permutation(n)[: min(num_seeds, n)]
    out = assert_same_as_reference(indptr, indices, seeds, fanouts, seed, stream)
    check_invariants(out, indptr, indices, fanouts)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), max_deg=st.integers(0, 20), graph_seed=st.integers(0, 2**32 - 1),
       fanouts=st.lists(st.sampled_from([-1, 1, 2, 3, 5]), min_size=1, max_size=3),
       num_seeds=st.integers(0, 10), seed=st.integers(0, 2**63 - 1), keep=st.floats(0, 1))
def test_pruned_kernel_equals_pruned_reference(n, max_deg, graph_seed, fanouts, num_seeds, seed, keep) -> None:
    """History pruning: the hop-1 nodes marked valid add no children; the rest is PyG's layout."""
    indptr, indices = random_csc(n, max_deg, graph_seed, simple=False)
    rng = np.random.default_rng(graph_seed)
    seeds = rng.permutation(n)[: min(num_seeds, n)]
    slot_of = np.where(rng.random(n) < 0.7, np.arange(n), -1).astype(np.int32)
    valid = (rng.random(n) < keep).astype(np.uint8)
    out = oa.NeighborSampler((indptr, indices), fanouts, seed=seed).sample(seeds, 3, K.HistoryPrune(slot_of, valid))
    pruned = {v for v in range(n) if slot_of[v] >= 0 and valid[slot_of[v]]}
    ref = reference_sample(indptr, indices, seeds, fanouts, seed=seed, stream=3, pruned=pruned)
    assert out.n_id.tolist() == ref["n_id"]
    assert out.edge_index.tolist() == ref["edge_index"]
    assert out.e_id.tolist() == ref["e_id"]
    assert list(out.num_sampled_nodes) == ref["num_sampled_nodes"]
    hop1 = set(out.n_id[len(seeds): len(seeds) + out.num_sampled_nodes[1]].tolist()) if len(fanouts) > 1 else set()
    targets = {int(out.n_id[t]) for t in out.edge_index[1]}
    assert not (hop1 & pruned & targets)  # a pruned frontier node is never a target


def test_nothing_valid_prunes_nothing() -> None:
    indptr, indices = random_csc(200, 20, seed=4)
    seeds = np.arange(10)
    s = oa.NeighborSampler((indptr, indices), [5, 5], seed=1)
    none = K.HistoryPrune(np.arange(200, dtype=np.int32), np.zeros(200, np.uint8))
    assert s.sample(seeds, 2, none).edge_index.tolist() == s.sample(seeds, 2).edge_index.tolist()
    every = K.HistoryPrune(np.arange(200, dtype=np.int32), np.ones(200, np.uint8))
    pruned = s.sample(seeds, 2, every)
    assert pruned.num_sampled_edges[1] == 0 and pruned.num_sampled_edges[0] > 0


def test_dataset_input_and_function_agree(tmp_path: Path) -> None:
    indptr, indices = random_csc(120, 20, seed=3)
    with oa.DatasetWriter(tmp_path / "ds", num_nodes=120) as w:
        w.write_csc(indptr, indices)
    ds = oa.open_dataset(tmp_path / "ds")
    seeds = np.arange(0, 120, 7)
    a = oa.NeighborSampler(ds, [4, 3], seed=5).sample(seeds, stream=11)
    b = oa.sample_neighbors(indptr, indices, seeds, [4, 3], seed=5, stream=11)
    np.testing.assert_array_equal(a.n_id, b.n_id)
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    assert a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges


def test_same_seed_and_stream_repeat_other_streams_differ() -> None:
    indptr, indices = random_csc(300, 40, seed=4)
    sampler = oa.NeighborSampler((indptr, indices), [5, 5], seed=1)
    seeds = np.arange(50)
    a, b, c = sampler.sample(seeds, 3), sampler.sample(seeds, 3), sampler.sample(seeds, 4)
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    assert a.edge_index.tolist() != c.edge_index.tolist()
    d = oa.NeighborSampler((indptr, indices), [5, 5], seed=2).sample(seeds, 3)
    assert a.edge_index.tolist() != d.edge_index.tolist()


# -- structure of the output ---------------------------------------------------------------------
def check_invariants(out: SampledSubgraph, indptr, indices, fanouts) -> None:
    """Seeds first, unique n_id, hop-ordered edges of the graph, min(deg, k) edges per target."""
    n_id, (src, dst) = out.n_id, out.edge_index
    assert n_id.dtype == np.int64 and out.edge_index.dtype == np.int64
    assert len(np.unique(n_id)) == len(n_id) == sum(out.num_sampled_nodes)
    assert out.edge_index.shape == (2, sum(out.num_sampled_edges))
    bounds = np.cumsum([0, *out.num_sampled_nodes])
    e_lo = 0
    for h, (k, e_count) in enumerate(zip(fanouts, out.num_sampled_edges, strict=True)):
        s, d = src[e_lo : e_lo + e_count], dst[e_lo : e_lo + e_count]
        assert ((d >= bounds[h]) & (d < bounds[h + 1])).all(), "targets: the previous hop's nodes"
        assert (s < bounds[h + 2]).all(), "a source is known by the end of its hop"
        for t in range(bounds[h], bounds[h + 1]):
            v = n_id[t]
            nbrs = indices[indptr[v] : indptr[v + 1]].tolist()
            got = n_id[s[d == t]].tolist()
            assert len(got) == (len(nbrs) if k < 0 else min(k, len(nbrs)))
            assert all(got.count(u) <= nbrs.count(u) for u in got), "sampled edges are graph edges"
        e_lo += e_count
    e_bounds = np.cumsum([0, *out.num_sampled_edges])
    for h in range(len(fanouts)):  # each new node of hop h is the source of a hop-h edge
        hop_src = set(src[e_bounds[h] : e_bounds[h + 1]].tolist())
        assert set(range(bounds[h + 1], bounds[h + 2])) <= hop_src


def test_invariants_and_no_neighbour_twice_on_a_simple_graph() -> None:
    indptr, indices = random_csc(500, 80, seed=5)
    seeds = np.random.default_rng(0).choice(500, 64, replace=False)
    out = oa.NeighborSampler((indptr, indices), [10, 5, 3], seed=0).sample(seeds, 0)
    check_invariants(out, indptr, indices, [10, 5, 3])
    np.testing.assert_array_equal(out.n_id[:64], seeds)
    pairs = set(zip(out.edge_index[0].tolist(), out.edge_index[1].tolist(), strict=True))
    assert len(pairs) == out.num_edges, "no neighbour chosen twice for one target"


def test_fanout_minus_one_takes_every_neighbour_in_csc_order() -> None:
    indptr, indices = random_csc(100, 30, seed=6)
    out = oa.NeighborSampler((indptr, indices), [-1], seed=0).sample([10, 20], 0)
    expect = np.concatenate([indices[indptr[10] : indptr[11]], indices[indptr[20] : indptr[21]]])
    np.testing.assert_array_equal(out.n_id[out.edge_index[0]], expect)
    assert out.num_sampled_edges == (int(indptr[11] - indptr[10] + indptr[21] - indptr[20]),)


def test_zero_in_degree_nodes_and_empty_seed_batch() -> None:
    indptr = np.array([0, 0, 0, 2, 2], dtype=np.int64)  # only node 2 has in-neighbours (0, 1)
    indices = np.array([0, 1], dtype=np.int32)
    sampler = oa.NeighborSampler((indptr, indices), [3, 3], seed=0)
    out = sampler.sample([0, 3], 0)
    assert out.n_id.tolist() == [0, 3] and out.edge_index.shape == (2, 0)
    assert out.num_sampled_nodes == (2, 0, 0) and out.num_sampled_edges == (0, 0)
    out = sampler.sample([2], 0)
    assert sorted(out.n_id[1:].tolist()) == [0, 1] and out.num_sampled_nodes == (1, 2, 0)
    empty = sampler.sample(np.array([], dtype=np.int64), 0)
    assert empty.batch_size == 0 and empty.num_nodes == 0 and empty.num_sampled_nodes == (0, 0, 0)


def test_seed_that_is_a_neighbour_keeps_its_seed_id() -> None:
    indptr = np.array([0, 1, 2], dtype=np.int64)  # 0 <- 1, 1 <- 0
    indices = np.array([1, 0], dtype=np.int32)
    out = oa.sample_neighbors(indptr, indices, [0, 1], [1, 1], seed=0)
    assert out.n_id.tolist() == [0, 1] and out.edge_index.tolist() == [[1, 0], [0, 1]]
    assert out.num_sampled_nodes == (2, 0, 0) and out.num_sampled_edges == (2, 0)


# -- distribution --------------------------------------------------------------------------------
def chi2_critical(df: int, z: float = 3.719) -> float:
    """Wilson-Hilferty upper quantile of chi-square(df); z = 3.719 is p = 1e-4."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def fan_graph(num_targets: int, d: int):
    """Targets 0..T-1 share the in-neighbour list T..T+d-1: one batch = T independent draws."""
    ends = np.full(d, num_targets * d)
    indptr = np.concatenate([np.arange(num_targets + 1) * d, ends]).astype(np.int64)
    indices = np.tile(np.arange(num_targets, num_targets + d), num_targets).astype(np.int32)
    return indptr, indices


def draws(num_targets: int, d: int, k: int, stream: int = 0) -> list[tuple[int, ...]]:
    indptr, indices = fan_graph(num_targets, d)
    sampler = oa.NeighborSampler((indptr, indices), [k], seed=123)
    out = sampler.sample(np.arange(num_targets), stream)
    src, dst = out.n_id[out.edge_index[0]], out.edge_index[1]
    rows = (src[np.argsort(dst, kind="stable")] - num_targets).reshape(num_targets, k)
    return [tuple(sorted(row)) for row in rows.tolist()]


@pytest.mark.parametrize(("d", "k", "floyd"), [(6, 2, True), (7, 3, True), (6, 5, False),
                                               (12, 9, False)])
def test_every_k_subset_is_equally_likely(d: int, k: int, floyd: bool) -> None:
    """Uniform *subsets* (not only marginals), for Floyd's algorithm and selection sampling."""
    assert uses_floyd(d, k) == floyd
    trials = 6000
    counts: dict[tuple[int, ...], int] = dict.fromkeys(itertools.combinations(range(d), k), 0)
    for subset in draws(trials, d, k):
        counts[subset] += 1
    expected = trials / len(counts)
    stat = sum((c - expected) ** 2 / expected for c in counts.values())
    assert stat < chi2_critical(len(counts) - 1), counts


@pytest.mark.parametrize(("d", "k", "floyd"), [(200, 5, True), (100, 25, True), (40, 30, False)])
def test_each_neighbour_of_a_hub_is_taken_with_probability_k_over_d(d: int, k: int,
                                                                   floyd: bool) -> None:
    assert uses_floyd(d, k) == floyd
    trials = 4000
    hits = np.zeros(d)
    for subset in draws(trials, d, k, stream=1):
        hits[list(subset)] += 1
    expected = trials * k / d
    stat = float(((hits - expected) ** 2 / expected).sum())
    assert stat < chi2_critical(d - 1)  # conservative: without replacement the variance is smaller
    assert np.abs(hits / trials - k / d).max() < 0.05


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fanouts", [[], [0], [5, -2], [1.5], "15", [True], 5, None, [5, "3"]])
def test_bad_fanouts_are_config_errors_naming_the_value(fanouts) -> None:
    indptr, indices = random_csc(10, 3, seed=0)
    with pytest.raises(oa.ConfigError, match="fanout"):
        oa.NeighborSampler((indptr, indices), fanouts)


@pytest.mark.parametrize("seeds", [[0, 10], [-1], [3, 9, 10**12]])
def test_seed_out_of_range_is_a_config_error(seeds) -> None:
    indptr, indices = random_csc(10, 3, seed=0)
    with pytest.raises(oa.ConfigError, match="out of range"):
        oa.sample_neighbors(indptr, indices, seeds, [2], seed=0)


def test_repeated_seeds_are_rejected_and_the_scratch_stays_clean() -> None:
    indptr, indices = random_csc(50, 8, seed=0)
    sampler = oa.NeighborSampler((indptr, indices), [3, 3], seed=0)
    with pytest.raises(oa.ConfigError, match="node 4 is at positions 1 and 3"):
        sampler.sample([1, 4, 2, 4], 0)
    with pytest.raises(oa.ConfigError, match="out of range"):
        sampler.sample([5, 6, 50], 0)
    assert (sampler._pool[0] == -1).all()
    fresh = oa.NeighborSampler((indptr, indices), [3, 3], seed=0).sample([1, 4, 2], 0)
    np.testing.assert_array_equal(sampler.sample([1, 4, 2], 0).edge_index, fresh.edge_index)
    assert (sampler._pool[0] == -1).all()


def test_non_integer_seeds_are_rejected() -> None:
    indptr, indices = random_csc(10, 3, seed=0)
    with pytest.raises(oa.ConfigError, match="integer"):
        oa.sample_neighbors(indptr, indices, [0.0, 1.0], [2], seed=0)
    with pytest.raises(oa.ConfigError, match="1-D"):
        oa.sample_neighbors(indptr, indices, [[0, 1]], [2], seed=0)


def test_corrupt_neighbour_id_is_a_dataset_error_and_scratch_stays_clean() -> None:
    indptr = np.array([0, 2, 3, 3], dtype=np.int64)
    indices = np.array([1, 2, 7], dtype=np.int32)  # node 1's in-neighbour 7 does not exist
    sampler = oa.NeighborSampler((indptr, indices), [-1, -1], seed=0)
    with pytest.raises(oa.errors.DatasetCorruptError, match=r"indices\[2\] = 7"):
        sampler.sample([0], 0)
    assert (sampler._pool[0] == -1).all()


@pytest.mark.parametrize(("indptr", "indices"), [
    ([1, 2], [0, 0]), ([0, 3], [0, 0]), ([0, 2, 1], [0, 0]), ([[0, 1]], [0]), ([0, 1], [0.5]),
])
def test_inconsistent_csc_is_an_invalid_graph_error(indptr, indices) -> None:
    with pytest.raises(oa.errors.InvalidGraphError):
        oa.NeighborSampler((np.array(indptr), np.array(indices)), [2])


def test_not_a_graph_is_a_config_error() -> None:
    with pytest.raises(oa.ConfigError, match="Dataset or an"):
        oa.NeighborSampler(np.arange(3), [2])


# -- concurrency -----------------------------------------------------------------------------------
def test_one_sampler_in_several_threads_matches_sequential_results() -> None:
    indptr, indices = random_csc(3000, 30, seed=8)
    sampler = oa.NeighborSampler((indptr, indices), [10, 5], seed=3)
    batches = [np.random.default_rng(i).choice(3000, 100, replace=False) for i in range(24)]
    expect = [sampler.sample(b, i).edge_index for i, b in enumerate(batches)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(sampler.sample, batches, range(24)))
    for e, g in zip(expect, got, strict=True):
        np.testing.assert_array_equal(e, g.edge_index)
    assert 1 <= len(sampler._pool) <= 4 and all((s == -1).all() for s in sampler._pool)


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="releasing the GIL is a property of the compiled "
                    "kernel; as plain Python the interpreter's thread switching would pass it anyway")
def test_the_kernel_releases_the_gil() -> None:
    """While a long kernel runs in a worker thread, the main thread keeps running Python code:
    ticks land in the middle half of the kernel's run (a GIL-holding kernel gets none there)."""
    rng = np.random.default_rng(0)
    n = 500_000
    indptr = np.arange(n + 1, dtype=np.int64) * 20
    indices = rng.integers(0, n, size=20 * n, dtype=np.int32)
    seeds = rng.choice(n, 5000, replace=False)
    fanouts, g2l = np.array([10, 10, 5]), np.full(n, -1, np.int32)
    K.sample_multihop(indptr, indices, seeds[:10], fanouts, stream_state(0, 0), g2l)  # compile

    def kernel() -> tuple[float, float]:
        start = time.perf_counter()
        K.sample_multihop(indptr, indices, seeds, fanouts, stream_state(0, 1), g2l)
        return start, time.perf_counter()

    with ThreadPoolExecutor(1) as pool:
        fut, ticks = pool.submit(kernel), []
        while not fut.done():
            ticks.append(time.perf_counter())
        start, stop = fut.result()
    quarter = (stop - start) / 4
    assert stop - start > 0.02, "the kernel must run long enough for the check to mean anything"
    assert sum(start + quarter < t < stop - quarter for t in ticks) > 0


# -- without the JIT -------------------------------------------------------------------------------
_SCRIPT = """
import json, sys, numpy as np, outre_async as oa
sys.path[:0] = {paths!r}  # this folder and tests/ (reference_sampler), as pytest sets them
from test_sampler import random_csc
indptr, indices = random_csc(200, 40, seed=9)
out = oa.NeighborSampler((indptr, indices), [25, 3, -1], seed=4).sample(np.arange(0, 200, 13), 5)
print(json.dumps([out.n_id.tolist(), out.edge_index.tolist(), out.num_sampled_nodes]))
"""


def test_kernels_run_and_agree_with_numba_disabled() -> None:
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    script = _SCRIPT.format(paths=[str(Path(__file__).parent), str(Path(__file__).parents[1])])
    proc = subprocess.run([sys.executable, "-P", "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    n_id, edge_index, nodes = json.loads(proc.stdout)
    indptr, indices = random_csc(200, 40, seed=9)
    sampler = oa.NeighborSampler((indptr, indices), [25, 3, -1], seed=4)
    out = sampler.sample(np.arange(0, 200, 13), 5)
    assert n_id == out.n_id.tolist() and edge_index == out.edge_index.tolist()
    assert nodes == list(out.num_sampled_nodes)


def _table(cap: int):
    from outre_async.sampling._id_map_kernels import new_table
    return new_table(cap, 1, -1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 400), max_deg=st.integers(0, 30), graph_seed=st.integers(0, 1000),
       fanouts=st.lists(st.sampled_from([1, 2, 5, 10, -1]), min_size=1, max_size=3),
       num_seeds=st.integers(0, 40), seed=st.integers(0, 1000), simple=st.booleans())
def test_hash_table_relabel_equals_the_array(n, max_deg, graph_seed, fanouts, num_seeds, seed, simple) -> None:
    """The relabel scratch as a hash table gives the same sample as the N-entry array, bit for bit,
    and is left empty (sized for every node: the kernel does not grow it)."""
    from outre_async.sampling._id_map_kernels import EMPTY, capacity_for
    indptr, indices = random_csc(n, max_deg, graph_seed, simple=simple)
    seeds = np.random.default_rng(seed).choice(n, size=min(num_seeds, n), replace=False).astype(np.int64)
    f = np.asarray(fanouts, np.int64)
    array = np.full(n, -1, np.int32)
    table = _table(capacity_for(n))
    a = K.sample_multihop(indptr, indices, seeds, f, stream_state(seed, 3), array)
    b = K.sample_multihop(indptr, indices, seeds, f, stream_state(seed, 3), table)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert (array == -1).all() and (table[0] == EMPTY).all()


def test_the_sampler_picks_the_smaller_relabel_scratch() -> None:
    """A batch that reaches few of many nodes relabels through a hash table sized by its reach; a
    fanout of -1 (no bound) or a reach near N keeps the array.  Same batches either way."""
    from outre_async.sampling._id_map_kernels import EMPTY
    indptr, indices = random_csc(20_000, 12, seed=4)
    small = oa.NeighborSampler((indptr, indices), [3, 2], seed=0)
    seeds = np.arange(0, 20_000, 400)  # 50 seeds reach at most 50 + 150 + 300 nodes
    sub = small.sample(seeds, 1)
    keys, vals = small._pool[0]
    assert len(keys) == 1024 and (keys == EMPTY).all()
    assert oa.NeighborSampler.relabel_bytes(20_000, 500) == sum(a.nbytes for a in small._pool[0]) == 1024 * 8
    assert oa.NeighborSampler.scratch_bytes(20_000, 500, 0) == 1024 * 8 + 3 * SampledSubgraph.planned_bytes(500, 0)
    expected = K.sample_multihop(indptr, indices, seeds.astype(np.int64), np.array([3, 2]), stream_state(0, 1),
                                 np.full(20_000, -1, np.int32))
    np.testing.assert_array_equal(sub.n_id, expected[2])
    np.testing.assert_array_equal(sub.edge_index, expected[3])
    whole = oa.NeighborSampler((indptr, indices), [-1], seed=0)
    whole.sample(seeds, 1)
    assert isinstance(whole._pool[0], np.ndarray) and (whole._pool[0] == -1).all()
    assert oa.NeighborSampler.relabel_bytes(20_000, None) == 4 * 20_000
    assert oa.NeighborSampler.relabel_bytes(2_000, 1_500) == 4 * 2_000  # a table would be larger


def test_table_scratch_stays_clean_after_errors() -> None:
    from outre_async.sampling._id_map_kernels import EMPTY
    indptr, indices = random_csc(5_000, 8, seed=0)
    sampler = oa.NeighborSampler((indptr, indices), [3, 3], seed=0)
    sampler.sample([1, 4, 2], 0)
    with pytest.raises(oa.ConfigError, match="node 4 is at positions 1 and 3"):
        sampler.sample([1, 4, 2, 4], 0)
    keys, _ = sampler._pool[0]
    assert (keys == EMPTY).all()
    indices = indices.copy()
    indices[indptr[7]:indptr[8]] = 9_999  # node 7's in-neighbours do not exist
    bad = oa.NeighborSampler((indptr, indices), [3, 3], seed=0)
    bad.sample([1, 2], 0)
    if indptr[8] > indptr[7]:
        with pytest.raises(oa.errors.DatasetCorruptError):
            bad.sample([7], 0)
    assert (bad._pool[0][0] == EMPTY).all()
