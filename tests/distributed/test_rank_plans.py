"""Data-parallel plans without processes: every rank's share of an epoch, taken with explicit
``rank``/``world_size`` (the same code a process group feeds), covers the training set exactly once
(or drops exactly what the docstring states), with the same number of batches on every rank."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import generated
from outre_async.partition import partition, plan_partition_epoch
from outre_async.partition._batches import group_seeds, shard_partition_plan

import outre_async as oa
from outre_async.sampling._plan import num_batches, plan_epoch, step_cuts
from outre_async.loader._options import group_knobs


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("ranks") / "g", "tiny", seed=4, feature_dim=8)


@pytest.mark.parametrize("n", [0, 1, 5, 64, 127, 128, 129, 1000, 1001])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_rank_plans_cover_once_with_equal_steps(n: int, batch_size: int, world: int, drop_last: bool) -> None:
    seeds = np.arange(10_000, 10_000 + n)
    shares = [plan_epoch(seeds, batch_size, shuffle=True, seed=9, epoch=2, drop_last=drop_last, rank=r,
                         world_size=world) for r in range(world)]
    counts = {len(s) for s in shares}
    assert counts == {num_batches(n, batch_size, drop_last, world)}  # equal steps, as __len__ says
    used = np.concatenate([np.zeros(0, np.int64)] + [b for s in shares for b in s])
    assert len(np.unique(used)) == len(used) and set(used.tolist()) <= set(seeds.tolist())
    assert all(0 < len(b) <= batch_size for s in shares for b in s)
    full, tail = divmod(n, batch_size * world)
    dropped = tail if (drop_last or tail < world) else 0  # the two stated drops, nothing else
    assert len(used) == n - dropped
    if world == 1:  # the one-process plan is unchanged: batches of B, the last smaller
        order = np.random.default_rng([9, 2]).permutation(seeds)
        stop = n - n % batch_size if drop_last else n
        want = [order[i : i + batch_size] for i in range(0, stop, batch_size)]
        assert [b.tolist() for b in shares[0]] == [b.tolist() for b in want]


def test_global_step_is_a_contiguous_slice_of_the_permutation() -> None:
    seeds = np.arange(1000)
    order = np.random.default_rng([5, 0]).permutation(seeds)
    shares = [plan_epoch(seeds, 64, shuffle=True, seed=5, epoch=0, rank=r, world_size=2) for r in range(2)]
    step0 = np.concatenate([shares[0][0], shares[1][0]])
    np.testing.assert_array_equal(step0, order[:128])
    assert [len(shares[r][-1]) for r in range(2)] == [52, 52]  # 1000 = 7 x 128 + 104: the last step near-equal
    assert step_cuts(1000, 64, 2, False)[-2:] == [(896, 948), (948, 1000)]


def test_epochs_differ_and_ranks_agree_from_the_seed_alone() -> None:
    seeds = np.arange(500)
    e0 = plan_epoch(seeds, 50, shuffle=True, seed=1, epoch=0, rank=1, world_size=2)
    e1 = plan_epoch(seeds, 50, shuffle=True, seed=1, epoch=1, rank=1, world_size=2)
    again = plan_epoch(seeds, 50, shuffle=True, seed=1, epoch=0, rank=1, world_size=2)
    assert any(not np.array_equal(a, b) for a, b in zip(e0, e1, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(e0, again, strict=True))


@pytest.mark.parametrize("bad", [dict(rank=2, world_size=2), dict(rank=-1, world_size=2), dict(rank=0, world_size=0)])
def test_plan_rejects_bad_ranks(bad: dict) -> None:
    with pytest.raises(oa.ConfigError, match="rank"):
        plan_epoch(np.arange(10), 2, shuffle=False, seed=0, epoch=0, **bad)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("ppb", [1, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_partition_shares_cover_once_with_equal_steps(ds: oa.Dataset, world: int, ppb: int, drop_last: bool) -> None:
    parts = partition(ds, 16, name="p16", passes=1, overwrite=True)
    train = ds.split("train")
    groups = group_seeds(parts.assignment, train, parts.num_parts)
    plan = plan_partition_epoch(groups, parts_per_batch=ppb, batch_size=40, shuffle=True, seed=2, epoch=1,
                                drop_last=drop_last, interleave=2)
    shares = [shard_partition_plan(plan, rank=r, world_size=world, drop_last=drop_last) for r in range(world)]
    assert len({len(s) for s in shares}) == 1
    used = np.concatenate([b.seeds for s in shares for b in s])
    planned = np.concatenate([mb.seeds for mb in plan])
    assert len(np.unique(used)) == len(used) and set(used.tolist()) <= set(planned.tolist())
    left = len(plan) % world
    if not drop_last:  # the leftover micro-batches are re-cut (they hold >= world seeds here)
        np.testing.assert_array_equal(np.sort(used), np.sort(planned))
    else:
        assert sum(len(s) for s in shares) == len(plan) - left
    # macro batches are dealt round-robin in plan order; only the surplus beyond the equal step count moves
    dealt = {m: i % world for i, m in enumerate(dict.fromkeys(mb.macro.index for mb in plan))}
    owned = [sum(dealt[mb.macro.index] == r for mb in plan) for r in range(world)]
    steps = len(plan) // world
    kept = sum(b.macro is not None and dealt[b.macro.index] == r for r, s in enumerate(shares) for b in s)
    moved = sum(b.macro is not None for s in shares for b in s) - kept
    assert moved == sum(max(0, o - steps) for o in owned) - left


def test_outre_loaders_of_two_ranks_cover_the_split(ds: oa.Dataset) -> None:
    train = ds.split("train")
    for extra in ({}, {"partitions": "p16", "parts_per_batch": 2}):
        if extra:
            partition(ds, 16, name="p16", passes=1, overwrite=True)
        loaders = [oa.OutreLoader(ds, **group_knobs(dict(fanouts=[3, 2], batch_size=64, backend="memory", seed=3, rank=r, world_size=2,
                                  **extra))) for r in range(2)]
        for epoch in range(2):
            expected = [len(lo) for lo in loaders]
            seen = []
            for lo in loaders:
                got = [b.n_id[: b.batch_size].numpy().copy() for b in lo]
                assert len(got) == expected[0]
                seen += got
            assert expected[0] == expected[1]
            np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.sort(train)), (extra, epoch)
        for lo in loaders:
            assert lo.stats()["ranks"]["world_size"] == 2
            lo.close()


def test_memory_budget_is_the_hosts_split_by_local_world_size(ds: oa.Dataset) -> None:
    one = oa.OutreLoader(ds, fanouts=[3, 2], batch_size=64, memory_budget="8MiB", io=oa.IOOptions(backend="memory"))
    half = oa.OutreLoader(ds, fanouts=[3, 2], batch_size=64, memory_budget="8MiB", 
                          io=oa.IOOptions(backend="memory"), ranks=oa.RankOptions(rank=1, world_size=2, local_world_size=2))
    assert one.stats()["memory"]["budget"] == 8 << 20
    assert half.stats()["memory"]["budget"] == 4 << 20 and half.memory.total <= 4 << 20
    assert half.stats()["ranks"] == {"rank": 1, "world_size": 2, "local_world_size": 2}


@pytest.mark.parametrize(("knobs", "match"), [
    (dict(rank=0), "together"),
    (dict(world_size=2), "together"),
    (dict(rank=2, world_size=2), "rank"),
    (dict(rank=0, world_size=2, local_world_size=3), "local_world_size"),
    (dict(rank=0, world_size=1, local_world_size=0), "local_world_size"),
])
def test_loader_rejects_bad_rank_knobs(ds: oa.Dataset, knobs: dict, match: str) -> None:
    with pytest.raises(oa.ConfigError, match=match):
        oa.OutreLoader(ds, **group_knobs(dict(fanouts=[2], batch_size=8, backend="memory", **knobs)))


def test_loader_refuses_fewer_seeds_than_ranks(ds: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="seeds for 4 ranks"):
        oa.OutreLoader(ds, split=np.arange(3), fanouts=[2], batch_size=8, io=oa.IOOptions(backend="memory"), ranks=oa.RankOptions(rank=0, world_size=4))
