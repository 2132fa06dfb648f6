"""The negatives stage (``sampling._negatives``): uniform, degree-weighted and resident draws from
``(seed, epoch, stream)``; the false-negative count against the graph; foresight and the real batch
see the same negatives; ``stats()["negatives"]`` reports what the batches hold."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import labelled_store, run
from fakes import FaultySource

import outre_async as oa
from outre_async.sampling._edge_items import EdgeItems, Graph
from outre_async.sampling._negative_kernels import count_edges
from outre_async.sampling._negatives import NegativeSpec, draw_nodes, false_negatives
from outre_async.loader._options import group_knobs

# the foresight test's buffer is smaller than a batch on purpose (streaming in pieces)
pytestmark = pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")
FORESIGHT_KNOBS = dict(buffer_rows=60, extract_queue=2, num_samplers=2, num_extractors=2)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("neg") / "ds")


def _edge_set(ds: oa.Dataset) -> set[tuple[int, int]]:
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    return set(zip(np.asarray(ds.indices).tolist(), dst.tolist(), strict=True))


def test_degree_draws_follow_in_degree_and_never_an_isolated_node() -> None:
    indptr = np.array([0, 0, 1, 4, 10], dtype=np.int64)        # in-degrees 0, 1, 3, 6
    spec = NegativeSpec(mode="binary", amount=1.0, sampler="degree")
    got = draw_nodes(spec, 60_000, np.random.default_rng(0), 4, indptr, np.empty(0, np.int64))
    share = np.bincount(got, minlength=4) / len(got)
    np.testing.assert_allclose(share, [0, 0.1, 0.3, 0.6], atol=0.01)
    again = draw_nodes(spec, 60_000, np.random.default_rng(0), 4, indptr, np.empty(0, np.int64))
    np.testing.assert_array_equal(got, again)                  # a function of the generator's seed


def test_resident_draws_stay_among_the_batch_endpoints_but_the_degree_share() -> None:
    indptr = np.arange(0, 101, dtype=np.int64)                 # every node in-degree 1
    resident = np.array([3, 5, 5, 9])
    only = draw_nodes(NegativeSpec(mode="binary", amount=1.0, sampler="resident"), 1000, np.random.default_rng(1),
                      100, indptr, resident)
    assert set(only.tolist()) == {3, 5, 9}
    mixed = draw_nodes(NegativeSpec(mode="binary", amount=1.0, sampler="resident", degree_fraction=0.3), 1000,
                       np.random.default_rng(1), 100, indptr, resident)
    assert set(mixed[300:].tolist()) <= {3, 5, 9} and len(set(mixed[:300].tolist()) - {3, 5, 9}) > 50


def test_false_negatives_count_edges_of_the_graph(dataset: oa.Dataset) -> None:
    edges = _edge_set(dataset)
    rng = np.random.default_rng(2)
    some = np.array(sorted(edges)[:40]).T                      # true edges, then random pairs
    src = np.concatenate([some[0], rng.integers(0, dataset.num_nodes, 500)])
    dst = np.concatenate([some[1], rng.integers(0, dataset.num_nodes, 500)])
    want = sum((u, v) in edges for u, v in zip(src.tolist(), dst.tolist(), strict=True))
    assert want >= 40
    assert false_negatives(dataset.indptr, dataset.indices, src, dst) == want
    plain = getattr(count_edges, "py_func", count_edges)  # the kernel as plain Python (already so without JIT)
    assert plain(dataset.indptr, np.asarray(dataset.indices), src, dst) == want


@pytest.mark.parametrize("sampler", ["uniform", "degree", "resident"])
def test_the_plan_draws_the_same_negatives_per_seed_and_epoch(dataset: oa.Dataset, sampler: str) -> None:
    pairs = np.random.default_rng(4).integers(0, dataset.num_nodes, (2, 50))
    items = EdgeItems(pairs=pairs, labels=None, negatives=NegativeSpec(mode="triplet", amount=2, sampler=sampler),
                      num_nodes=dataset.num_nodes, batch_size=16, shuffle=True, seed=3,
                      graph=Graph(dataset.indptr, dataset.indices))
    def negs(epoch: int) -> list[list[int]]:
        return [item.seeds[item.targets.dst_neg_index].ravel().tolist() for item in items.plan(epoch)]
    assert negs(0) == negs(0) and negs(0) != negs(1)


@pytest.mark.parametrize("sampler", ["degree", "resident"])
def test_foresight_and_the_real_batch_see_the_same_negatives(dataset: oa.Dataset, sampler: str) -> None:
    pairs = np.random.default_rng(5).integers(0, dataset.num_nodes, (2, 120))
    neg = {"mode": "binary", "amount": 2, "sampler": sampler, "degree_fraction": 0.25 if sampler == "resident" else 0.0}

    async def epoch(sight: int) -> tuple[dict[int, tuple[list, list]], dict]:
        loader = oa.OutreLoader(dataset, **group_knobs(dict(edge_label_index=pairs, neg_sampling=neg, fanouts=[4, 3], batch_size=8, seed=7,
                                foresight=sight, source=FaultySource(dataset, seed=1), **FORESIGHT_KNOBS)))
        got = {}
        async with loader:
            async for b in loader:
                got[b.seq] = (b.n_id.tolist(), b.n_id[b.edge_label_index].tolist())
                await asyncio.sleep(0.004)  # a slow step: the queue fills and the samplers foresee
            return got, loader.stats()["foresight"]

    async def body() -> None:
        (plain, _), (seen, sight) = await epoch(0), await epoch(12)
        assert sight["batches"] > 0 and sight["used"] > 0
        assert plain == seen

    run(body(), timeout=120)


def test_stats_report_false_negatives_and_rows_and_resident_reads_fewer_rows(dataset: oa.Dataset) -> None:
    edges = _edge_set(dataset)
    pairs = np.array(sorted(edges)[::3]).T                     # true edges as positives
    rows, rates = {}, {}
    for sampler in ("uniform", "resident"):
        with oa.OutreLoader(dataset, edge_label_index=pairs, neg_sampling={"mode": "binary", "amount": 3, "sampler": sampler},
                            fanouts=[3], batch_size=32, seed=1, io=oa.IOOptions(backend="memory")) as loader:
            batches = list(loader)
            stats = loader.stats()["negatives"]
        negatives = [b.n_id[b.edge_label_index[:, b.edge_label == 0]] for b in batches]
        found = sum((u, v) in edges for n in negatives for u, v in n.T.tolist())
        drawn = sum(n.shape[1] for n in negatives)
        assert stats["sampler"] == sampler and stats["drawn"] == drawn and stats["false_negatives"] == found
        assert stats["false_negative_rate"] == pytest.approx(found / drawn)
        assert stats["distinct_rows_per_batch"] == pytest.approx(np.mean([len(b.n_id) for b in batches]))
        rows[sampler], rates[sampler] = stats["distinct_rows_per_batch"], stats["false_negative_rate"]
    assert rows["resident"] < rows["uniform"]
    assert rates["resident"] > rates["uniform"]  # the batch's own endpoints: closer, so more often true edges


@pytest.mark.parametrize(("neg", "match"), [
    ({"mode": "binary", "sampler": "hard"}, r"sampler must be one of \('uniform', 'degree', 'resident'\), got 'hard'"),
    ({"mode": "binary", "sampler": "resident", "degree_fraction": 1.5}, r"degree_fraction=1.5 must be a number in \[0, 1\]"),
    ({"mode": "binary", "sampler": "degree", "degree_fraction": 0.5}, r"goes with sampler 'uniform' or 'resident'"),
    ({"mode": "binary", "negatives": "resident"}, r"takes 'mode', 'amount', 'sampler' and 'degree_fraction'"),
])
def test_bad_negative_options_are_named(dataset: oa.Dataset, neg: dict, match: str) -> None:
    with pytest.raises(oa.ConfigError, match=match):
        oa.OutreLoader(dataset, edge_label_index=np.array([[0], [1]]), neg_sampling=neg, fanouts=[2], batch_size=4)
