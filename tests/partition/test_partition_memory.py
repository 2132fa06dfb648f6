"""What partition mode holds in RAM (issue 26): int32 arrays where they fit (int64 kept where not),
``cross`` released once the neighbour cache is built, the samples unchanged bit for bit and the
kernel compiled once per partition set; and the macro store's blocks never past the memory plan's
bound over several epochs of a real plan (partial epochs, interleaving, no shuffle)."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from conftest import generated
from outre_async.cache import NeighborCache
from outre_async.partition import MacroStore, PartitionSampler, group_seeds, partition, plan_partition_epoch
from outre_async.partition import _reader as reader
from outre_async.partition._reader import open_partitions
from outre_async.sampling import BatchItem

import outre_async as oa
from outre_async.loader._budget import Sizes, macro_adjacency_bytes
from outre_async.loader._partition_mode import PartitionBatching
from outre_async.store import RowFormat
from outre_async.loader import LoaderConfig


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    ds = generated(tmp_path_factory.mktemp("pm") / "g", "tiny", seed=11, feature_dim=8)
    partition(ds, 16, name="p16", passes=2)
    return ds


def _file(ds: oa.Dataset, stem: str) -> np.ndarray:
    return np.fromfile(ds.path / "partitions" / "p16" / f"{stem}.bin", dtype=np.int64)


def test_node_ids_and_offsets_are_int32_in_ram_where_they_fit(ds: oa.Dataset) -> None:
    parts = open_partitions(ds, "p16")
    assert parts.part_nodes.dtype == parts.slot_of_node.dtype == parts.adj_ptr.dtype == np.int32
    np.testing.assert_array_equal(parts.part_nodes, _file(ds, "part_nodes"))  # the files stay int64
    np.testing.assert_array_equal(parts.adj_ptr, _file(ds, "adj_ptr"))
    np.testing.assert_array_equal(parts.slot_of_node[parts.part_nodes], np.arange(ds.num_nodes))
    arrays = (parts.assignment, parts.part_ptr, parts.part_nodes, parts.train_ptr, parts.train_nodes_all,
              parts.adj_ptr, parts.cross, parts.slot_of_node)
    assert parts.held_bytes == sum(a.nbytes for a in arrays)
    parts.release_cross()
    assert parts.held_bytes == sum(a.nbytes for a in arrays) - 4 * ds.num_nodes
    with pytest.raises(oa.errors.PartitionError, match="cross was released"):
        parts.cross  # noqa: B018


@pytest.mark.parametrize("limit", ["nodes", "edges"])
def test_int64_is_kept_past_the_limit_and_samples_are_bit_identical(ds: oa.Dataset, monkeypatch, limit: str) -> None:
    """The int32 limit lowered below N - 1 (both int64) or between N and E (offsets int64): the same
    samples as the plain sampler, bit for bit, with either dtype mix."""
    top = ds.num_nodes - 2 if limit == "nodes" else ds.num_nodes
    assert top < ds.num_edges
    monkeypatch.setattr(reader, "INT32_MAX", top)
    parts = open_partitions(ds, "p16")
    assert parts.adj_ptr.dtype == np.int64
    assert parts.part_nodes.dtype == parts.slot_of_node.dtype == (np.int64 if limit == "nodes" else np.int32)
    monkeypatch.undo()
    narrow = open_partitions(ds, "p16")
    for p in (parts, narrow):
        cache = NeighborCache.build(ds.indptr, ds.indices, p.cross, 4 * ds.num_nodes + 2000)
        tiered = PartitionSampler(ds, p, [5, 3], seed=4, cache=cache, store=MacroStore(p, capacity=2))
        plain = oa.NeighborSampler(ds, [5, 3], seed=4)
        groups = group_seeds(p.assignment, ds.split("train"), p.num_parts)
        plan = plan_partition_epoch(groups, parts_per_batch=3, batch_size=40, shuffle=True, seed=1, epoch=0)
        for stream, batch in enumerate(plan[:12]):
            got, want = tiered.sample(batch, stream), plain.sample(batch.seeds, stream)
            np.testing.assert_array_equal(got.n_id, want.n_id)
            np.testing.assert_array_equal(got.edge_index, want.edge_index)
            np.testing.assert_array_equal(got.e_id, want.e_id)
        assert int(tiered.tiers[1]) > 0  # the macro tier served lists (int32 or int64 offsets)


def test_the_kernel_sees_one_dtype_mix_per_partition_set(ds: oa.Dataset) -> None:
    """A micro-batch (a loaded block) and plain seeds (the empty block) give the kernel the same
    types, so it is compiled once, not once per kind of item."""
    parts = open_partitions(ds, "p16")
    cache = NeighborCache.build(ds.indptr, ds.indices, parts.cross, 1 << 20)
    store = MacroStore(parts, capacity=1)
    sampler = PartitionSampler(ds, parts, [3], seed=0, cache=cache, store=store)
    loaded = store.acquire((0, 1))
    assert numba.typeof(sampler.tiers_of(loaded)) == numba.typeof(sampler.tiers_of(store.none))
    store.release((0, 1))


def test_the_loader_releases_cross_and_counts_what_it_holds(ds: oa.Dataset) -> None:
    loader = oa.OutreLoader(ds, fanouts=[3, 2], batch_size=32, partitions="p16",
                            memory_budget="16MiB", io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(neighbor_cache="16KiB"))
    try:
        batching = loader._setup.partitioned
        assert batching is not None and batching.cache.num_cached > 0  # built from cross before it went
        with pytest.raises(oa.errors.PartitionError):
            batching.parts.cross  # noqa: B018
        for b in loader:
            b.release()
        p = batching.parts
        held = (p.assignment, p.part_ptr, p.part_nodes, p.train_ptr, p.train_nodes_all, p.adj_ptr, p.slot_of_node,
                batching.groups.ptr, batching.groups.order)
        assert loader.stats()["memory"]["partition arrays"] == sum(a.nbytes for a in held)
        second = 0
        for b in loader:  # a second epoch still samples (the cache was built once, from cross)
            b.release()
            second += 1
        assert second == len(batching.plan(1))
    finally:
        loader.close()


def _drive(store: MacroStore, plans: list[list[BatchItem]], workers: int, rng: np.random.Generator) -> int:
    """Acquire and release the plans' blocks as ``workers`` samplers would (each holds one item's
    block until it is done; a random one finishes first; epochs run one after another); returns the
    most bytes the store held."""
    most = 0
    for plan in plans:
        busy: list[tuple[int, ...]] = []
        for item in plan:
            if len(busy) == workers:
                store.release(busy.pop(int(rng.integers(len(busy)))))
            assert item.macro is not None
            busy.append(item.macro.parts)
            store.acquire(busy[-1], item.macro.epoch)
            most = max(most, store.held_bytes)
        for key in busy:  # the epoch's samplers finish before the next epoch starts
            store.release(key)
    return most


@pytest.mark.parametrize(("samplers", "ppb", "interleave", "shuffle"),
                         [(2, 2, 2, True), (3, 1, 1, True), (1, 3, 4, True), (2, 2, 2, False)])
def test_macro_blocks_never_pass_the_plan_bound(ds: oa.Dataset, samplers: int, ppb: int, interleave: int,
                                                shuffle: bool) -> None:
    """A real store over six epochs of a real plan, the second and fifth left early (a loop broken
    out of): the bytes it holds stay within ``macro_adjacency_bytes``, and pass what one block or
    one epoch's half of the blocks could take (so a bound that small would fail here)."""
    seeds = ds.split("train")
    batching = PartitionBatching(ds, "p16", seeds, parts_per_batch=ppb, interleave=interleave, batch_size=16,
                                 shuffle=shuffle, seed=5, drop_last=False, neighbor_cache_bytes=0)
    top = batching.macro_top_bytes()
    sizes = Sizes(num_nodes=ds.num_nodes, format=RowFormat.float32(8), stride=32, max_rows=1, max_edges=1,
                  macro_block_bytes=top[1], macro_top_bytes=top, interleave=interleave)
    cfg = LoaderConfig(fanouts=[2], batch_size=16, num_samplers=samplers)
    bound = macro_adjacency_bytes(cfg, sizes)
    blocks = 2 * samplers + interleave
    store = MacroStore(batching.parts, capacity=samplers + interleave)
    plans = [batching.plan(e) for e in range(6)]
    plans[1], plans[4] = plans[1][:3], plans[4][:1]
    most = _drive(store, plans, samplers, np.random.default_rng(0))
    assert top[1] < most <= bound <= blocks * top[1]
    assert most > top[min(-(-blocks // 2), len(top) - 1)] or not shuffle  # two epochs' blocks at once
