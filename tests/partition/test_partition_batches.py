"""Partition-based batches: plans cover every seed once per epoch, the tiered sampler (global cache,
macro-batch adjacency, disk) gives exactly the plain sampler's samples, OutreLoader in partition mode,
the global neighbour cache and the redundancy ratio."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import generated, run
from outre_async.cache import NeighborCache
from outre_async.partition import (
    MacroStore,
    PartitionSampler,
    group_seeds,
    partition,
    plan_partition_epoch,
    redundancy_ratio,
)
from outre_async.partition._batches import default_interleave, default_num_parts, default_parts_per_batch
from outre_async.sampling import BatchItem, NodeTargets

import outre_async as oa


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("pb") / "g", "tiny", seed=6, feature_dim=8)


@pytest.fixture(scope="module")
def parts(ds: oa.Dataset):
    return partition(ds, 16, name="p16", passes=2)


@pytest.mark.parametrize("ppb", [1, 3, 16])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("interleave", [1, 4])
def test_plan_covers_every_seed_once_per_epoch(ds: oa.Dataset, parts, ppb: int, shuffle: bool, interleave: int) -> None:
    train = ds.split("train")
    groups = group_seeds(parts.assignment, train, parts.num_parts)
    for epoch in range(3):
        plan = plan_partition_epoch(groups, parts_per_batch=ppb, batch_size=50, shuffle=shuffle, seed=1,
                                    epoch=epoch, interleave=interleave)
        seen = np.concatenate([b.seeds for b in plan])
        np.testing.assert_array_equal(np.sort(seen), np.sort(train))
        for b in plan:
            assert 0 < len(b) <= 50 and len(b.macro.parts) <= ppb
            assert np.isin(parts.assignment[b.seeds], b.macro.parts).all()
        windows = [b.macro.index // interleave for b in plan]
        assert windows == sorted(windows)  # a run of `interleave` macro batches is planned before the next
        if interleave == 1 or not shuffle:
            assert [b.macro.index for b in plan] == sorted(b.macro.index for b in plan)


def test_interleaving_mixes_macro_batches_deterministically(ds: oa.Dataset, parts) -> None:
    groups = group_seeds(parts.assignment, ds.split("train"), parts.num_parts)
    kw = {"parts_per_batch": 2, "batch_size": 20, "shuffle": True, "seed": 4, "epoch": 1}
    plain = plan_partition_epoch(groups, **kw)
    mixed = plan_partition_epoch(groups, interleave=8, **kw)
    again = plan_partition_epoch(groups, interleave=8, **kw)
    assert [b.seeds.tolist() for b in mixed] == [b.seeds.tolist() for b in again]
    # the same macro batches, cut the same way; only the order of their micro-batches changes
    assert sorted(b.seeds.tolist() for b in mixed) == sorted(b.seeds.tolist() for b in plain)
    switches = sum(a.macro.index != b.macro.index for a, b in zip(mixed, mixed[1:], strict=False))
    assert switches > 2 * sum(a.macro.index != b.macro.index for a, b in zip(plain, plain[1:], strict=False))
    with pytest.raises(oa.ConfigError, match="interleave=0"):
        plan_partition_epoch(groups, interleave=0, **kw)


@pytest.mark.parametrize("batch_size", [1, 7, 50, 10_000])
def test_micro_batches_of_a_macro_batch_are_near_equal(ds: oa.Dataset, parts, batch_size: int) -> None:
    groups = group_seeds(parts.assignment, ds.split("train"), parts.num_parts)
    plan = plan_partition_epoch(groups, parts_per_batch=3, batch_size=batch_size, shuffle=True, seed=2, epoch=0)
    for macro in {b.macro.index for b in plan}:
        sizes = [len(b) for b in plan if b.macro.index == macro]
        n = sum(sizes)
        assert len(sizes) == -(-n // batch_size) and max(sizes) <= batch_size and max(sizes) - min(sizes) <= 1
    dropped = plan_partition_epoch(groups, parts_per_batch=3, batch_size=batch_size, shuffle=True, seed=2,
                                   epoch=0, drop_last=True)
    assert all(len(b) == batch_size for b in dropped)
    assert sum(map(len, dropped)) > sum(map(len, plan)) - batch_size * len({b.macro.index for b in plan})


def test_default_counts() -> None:
    assert [default_num_parts(n) for n in (1, 2708, 22_470, 2_449_029, 10**9)] == [16, 16, 128, 4096, 4096]
    # 1/64 of the parts, or enough for 4 micro-batches a macro batch (Cora: 140 seeds; Facebook: 13,482)
    got = [default_parts_per_batch(k, n, b) for k, n, b in
           ((1, 10, 1), (16, 140, 32), (128, 13_482, 512), (4096, 10**7, 1024), (256, 10**6, 64), (8, 0, 4))]
    assert got == [1, 15, 20, 64, 4, 8]
    assert [default_interleave(k, p) for k, p in ((1, 1), (16, 1), (128, 2), (4096, 64), (10, 3))] == [1, 8, 8, 8, 2]
    with pytest.raises(oa.ConfigError, match="num_parts=0"):
        default_parts_per_batch(0, 10, 1)


def test_plans_differ_between_epochs(ds: oa.Dataset, parts) -> None:
    groups = group_seeds(parts.assignment, ds.split("train"), parts.num_parts)
    a, b = (plan_partition_epoch(groups, parts_per_batch=2, batch_size=64, shuffle=True, seed=0, epoch=e)
            for e in (0, 1))
    assert [x.macro.parts for x in a] != [x.macro.parts for x in b]


@pytest.mark.parametrize("cache_bytes", [0, 12_000, 1 << 22])
def test_tiered_sampler_equals_plain_sampler(ds: oa.Dataset, parts, cache_bytes: int) -> None:
    cache = NeighborCache.build(ds.indptr, ds.indices, parts.cross, cache_bytes)
    store = MacroStore(parts, capacity=2)
    tiered = PartitionSampler(ds, parts, [5, 3, 2], seed=9, cache=cache, store=store)
    plain = oa.NeighborSampler(ds, [5, 3, 2], seed=9)
    groups = group_seeds(parts.assignment, ds.split("train"), parts.num_parts)
    plan = plan_partition_epoch(groups, parts_per_batch=2, batch_size=40, shuffle=True, seed=0, epoch=0)
    for stream, batch in enumerate(plan[:25]):
        got, want = tiered.sample(batch, stream), plain.sample(batch.seeds, stream)
        np.testing.assert_array_equal(got.n_id, want.n_id)
        np.testing.assert_array_equal(got.edge_index, want.edge_index)
        np.testing.assert_array_equal(got.e_id, want.e_id)  # CSC positions, whichever tier served the list
        assert got.num_sampled_nodes == want.num_sampled_nodes
        assert got.num_sampled_edges == want.num_sampled_edges
    cached, macro, disk = (int(x) for x in tiered.tiers)
    assert macro > 0 and disk > 0
    assert (cached > 0) == (cache.num_cached > 0)
    assert store.loads <= len({b.macro.parts for b in plan[:25]})  # each macro batch read once
    # plain seeds (no macro batch) go cache -> disk, same samples
    seeds = BatchItem(seeds=np.arange(30), targets=NodeTargets(input_id=np.arange(30)))
    np.testing.assert_array_equal(tiered.sample(seeds, 99).n_id, plain.sample(np.arange(30), 99).n_id)


def test_sample_nodes_gives_the_batch_s_n_id_without_loading_its_macro_block(ds: oa.Dataset, parts) -> None:
    """The loader's foresight samples batches far ahead for their n_id: the same rows as the batch's own
    sample, read from the cache and indices (no block loaded early), counted apart from the batches'."""
    cache = NeighborCache.build(ds.indptr, ds.indices, parts.cross, 12_000)
    store = MacroStore(parts, capacity=2)
    tiered = PartitionSampler(ds, parts, [5, 3], seed=9, cache=cache, store=store)
    groups = group_seeds(parts.assignment, ds.split("train"), parts.num_parts)
    plan = plan_partition_epoch(groups, parts_per_batch=2, batch_size=40, shuffle=True, seed=0, epoch=0)
    foreseen = [tiered.sample_nodes(batch, stream) for stream, batch in enumerate(plan[:12])]
    assert store.loads == 0 and int(tiered.tiers.sum()) == 0 and int(tiered.foresight_tiers.sum()) > 0
    for stream, batch in enumerate(plan[:12]):
        np.testing.assert_array_equal(foreseen[stream], tiered.sample(batch, stream).n_id)
    assert store.loads > 0


def test_neighbor_cache_budget_and_contents(ds: oa.Dataset, parts) -> None:
    budget = 4 * ds.num_nodes + 3000
    cache = NeighborCache.build(ds.indptr, ds.indices, parts.cross, budget)
    assert 0 < cache.num_cached and cache.nbytes <= budget
    for v in cache.nodes:
        np.testing.assert_array_equal(cache.neighbors(int(v)), ds.indices[ds.indptr[v] : ds.indptr[v + 1]])
    out = np.setdiff1d(np.arange(ds.num_nodes), cache.nodes)
    assert cache.neighbors(int(out[0])) is None
    assert parts.cross[cache.nodes].min() >= parts.cross[out].max() - 0  # the top-ranked nodes are cached
    assert NeighborCache.build(ds.indptr, ds.indices, parts.cross, 100).num_cached == 0


def _collect(loader: oa.OutreLoader) -> list:
    async def go():
        out = []
        async with loader:
            async for batch in loader:
                out.append((batch.seq, batch.epoch, batch.n_id[: batch.batch_size].numpy().copy(),
                            batch.n_id.numpy().copy(), batch.edge_index.numpy().copy()))
                batch.release()
        return out

    return run(go())


def test_outre_loader_partition_mode(ds: oa.Dataset, parts) -> None:
    loader = oa.OutreLoader(ds, fanouts=[4, 3], batch_size=64, seed=3, partitions=oa.PartitionOptions(name="p16", parts_per_batch=3),
                            io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(neighbor_cache="64KiB"))
    expected = len(loader)
    got = _collect(loader)
    assert len(got) == expected
    seeds = np.concatenate([g[2] for g in got])
    np.testing.assert_array_equal(np.sort(seeds), np.sort(ds.split("train")))  # each train node once
    plain = oa.NeighborSampler(ds, [4, 3], seed=3)
    base = loader._setup.partitioned.stream_base(0)
    for seq, _, s, n_id, edge_index in got:
        want = plain.sample(s, base + seq)
        np.testing.assert_array_equal(n_id, want.n_id)
        np.testing.assert_array_equal(edge_index, want.edge_index)
    stats = loader.stats()["neighbor_lists"]
    assert stats["lists_from_macro_batch"] > 0 and stats["partitions"] == "p16"
    assert stats["global_cache_bytes"] <= 64 * 1024
    assert stats["macro_loads"] >= -(-16 // 3)


def test_loader_rejects_unknown_partitions(ds: oa.Dataset) -> None:
    with pytest.raises(oa.errors.PartitionNotFoundError):
        oa.OutreLoader(ds, fanouts=[2], batch_size=8, partitions="missing", io=oa.IOOptions(backend="memory"))
    with pytest.raises(oa.ConfigError, match="parts_per_batch"):
        oa.OutreLoader(ds, fanouts=[2], batch_size=8, partitions=oa.PartitionOptions(name="p16", parts_per_batch=0), io=oa.IOOptions(backend="memory"))


def test_loader_defaults_and_each_macro_batch_read_once(ds: oa.Dataset, parts) -> None:
    loader = oa.OutreLoader(ds, fanouts=[2], batch_size=64, partitions="p16", io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(num_samplers=1))
    lists = loader.stats()["neighbor_lists"]
    ppb = default_parts_per_batch(16, len(ds.split("train")), 64)
    assert ppb > 1 and (lists["parts_per_batch"], lists["interleave"]) == (ppb, default_interleave(16, ppb))
    assert redundancy_ratio(ds, fanouts=[2], batch_size=64, partitions=parts)["parts_per_batch"] == ppb
    plan = loader._setup.partitioned.plan(0)
    assert len({b.macro.index for b in plan}) > 1 and len(_collect(loader)) == len(plan)
    assert loader.stats()["neighbor_lists"]["macro_loads"] == len({b.macro.index for b in plan})  # interleaved, read once


def test_a_reopened_loader_keeps_no_earlier_opening_s_samplers_or_macro_blocks(ds: oa.Dataset, parts) -> None:
    """Issue 27: each opening makes its samplers and macro store; once it closes they go (their counters
    stay in stats()).  The loader used to keep every opening's store with its idle macro blocks (and
    the samplers' scratch): a reopened loader grew ~1.6 MiB per opening on 50k nodes."""
    loader = oa.OutreLoader(ds, fanouts=[2], batch_size=64, partitions="p16", io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(num_samplers=2))
    batching = loader._setup.partitioned
    opened: list[weakref.ref] = []

    async def one_opening() -> int:
        n = 0
        async with loader:
            async for batch in loader:
                if not n:  # the opening's samplers and store, while it is open
                    opened.extend(weakref.ref(s) for s in (*batching._samplers, *batching._stores))
                n += 1
                batch.release()
        return n

    loads = 0
    for epoch in range(3):  # each opening runs the loader's next epoch
        loads += len({b.macro.index for b in batching.plan(epoch)})  # interleaved: each macro batch read once
        assert run(one_opening()) == len(batching.plan(epoch))
    gc.collect()
    assert len(opened) == 3 * (2 + 1)  # two samplers and a store per opening ...
    assert all(ref() is None for ref in opened)  # ... none of them kept once it closed
    assert loader.stats()["neighbor_lists"]["macro_loads"] == loads  # the counters outlive the openings


def test_planned_items_carry_their_input_ids(ds: oa.Dataset, parts) -> None:
    seeds = np.random.default_rng(4).permutation(ds.split("train"))  # unsorted: positions are not ids
    groups = group_seeds(parts.assignment, seeds, parts.num_parts)
    plan = plan_partition_epoch(groups, parts_per_batch=2, batch_size=40, shuffle=True, seed=0, epoch=0)
    for item in plan:
        np.testing.assert_array_equal(seeds[item.targets.input_id], item.seeds)
    assert len(plan[0]) == len(plan[0].seeds) == len(plan[0].targets.input_id)


def test_redundancy_ratio_drops_with_partition_batches(ds: oa.Dataset, parts) -> None:
    rr = redundancy_ratio(ds, fanouts=[5, 5], batch_size=64, partitions=parts, parts_per_batch=1)
    assert rr["random"]["seeds"] == rr["partition"]["seeds"] == len(ds.split("train"))
    assert rr["random"]["rr"] >= 1.0 and rr["partition"]["rr"] >= 1.0
    assert rr["reduction"] > 0.05
