"""The history table's pure parts: the per-batch pull/push decision, candidate ranking and budget,
and the bounded-overtaking delivery the staleness bound rests on."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import run
from hypothesis import given, settings
from hypothesis import strategies as st
from outre_async.cache import HistoryConfig, HistoryTable, history_bytes
from outre_async.cache._history import choose_candidates, decide, frontier_counts, lifetimes

import outre_async as oa
from outre_async.aio._channel import Channel
from outre_async.loader._delivery import _Windowed
from outre_async.sampling._sampler import SampledSubgraph
from outre_async.sampling._sampler_kernels import HistoryPrune


def _chain_subgraph() -> SampledSubgraph:
    """Seed 0 <- hop-1 nodes 1, 2 <- hop-2 node 3 (into 1) and 4 (into 2) <- hop-3 node 5 (into 4).
    Local ids equal global ids; edge (src, dst)."""
    edges = np.array([[1, 2, 3, 4, 5], [0, 0, 1, 2, 4]])
    return SampledSubgraph(np.arange(6), edges, (1, 2, 2, 1), (2, 2, 1), 1)


def test_decision_pulls_pruned_hop1_rows_and_pushes_only_exact_ones() -> None:
    sub = _chain_subgraph()
    slot_of = np.array([0, 1, 2, -1, 3, -1], np.int32)
    valid = np.array([0, 1, 0, 0], np.uint8)            # node 1's history is fresh: pulled
    d = decide(sub, HistoryPrune(slot_of, valid), num_layers=2)
    assert d.pull_local.tolist() == [1] and d.pull_slots.tolist() == [1]
    assert d.push_local.tolist() == [0, 2] and d.push_slots.tolist() == [0, 2]  # hop <= 1, not pruned
    # three layers: the seed's h^(2) reads node 1's h^(1), incomplete once 1 is pruned: not pushed
    d3 = decide(sub, HistoryPrune(slot_of, valid), num_layers=3)
    assert d3.pull_local.tolist() == [1] and d3.push_local.tolist() == [2]


def test_pulled_rows_carry_the_in_degree_their_expansion_would_have_sampled() -> None:
    sub = _chain_subgraph()
    indptr = np.array([0, 2, 9, 10, 10, 11, 11])  # node 1 has 7 in-neighbours, node 2 one
    prune = HistoryPrune(np.arange(6, dtype=np.int32), np.array([0, 1, 1, 0, 0, 0], np.uint8))
    assert decide(sub, prune, 2, indptr, fanout=3).pull_degree.tolist() == [3, 1]
    assert decide(sub, prune, 2, indptr, fanout=-1).pull_degree.tolist() == [7, 1]


def test_a_pull_promised_inside_the_window_makes_the_batch_wait_for_the_nearest_promiser() -> None:
    sub = _chain_subgraph()
    slot_of = np.arange(6, dtype=np.int32)
    assert decide(sub, HistoryPrune(slot_of, np.array([0, 1, 1, 0, 0, 0], np.uint8)), 2).wait_gap == 0
    assert decide(sub, HistoryPrune(slot_of, np.array([0, 4, 1, 0, 0, 0], np.uint8)), 2).wait_gap == 3
    assert decide(sub, HistoryPrune(slot_of, np.array([0, 4, 2, 0, 0, 0], np.uint8)), 2).wait_gap == 1
    # a code on a node that is not pulled (node 3: hop 2) asks for no wait
    assert decide(sub, HistoryPrune(slot_of, np.array([0, 1, 0, 2, 0, 0], np.uint8)), 2).wait_gap == 0


def test_seeds_are_never_pulled() -> None:
    sub = _chain_subgraph()
    d = decide(sub, HistoryPrune(np.arange(6, dtype=np.int32), np.ones(6, np.uint8)), num_layers=2)
    assert d.pull_local.tolist() == [1, 2] and d.push_local.tolist() == [0]


def test_candidates_rank_by_frontier_count_then_id_within_the_budget() -> None:
    counts = np.array([0, 5, 2, 5, 1, 0], np.int64)
    cfg = HistoryConfig(staleness=5, dim=2)
    assert choose_candidates(cfg, counts, 1).tolist() == [1, 2, 3, 4]  # count 0 never cached
    per_slot = 4 * 2 + 8 + 8 + 4 + 1 + 1  # row, stamp, node id, promise, retired flag, one snapshot
    tight = HistoryConfig(staleness=5, dim=2, budget=4 * 6 + 3 * per_slot)
    assert choose_candidates(tight, counts, 1).tolist() == [1, 2, 3]
    assert history_bytes(6, 3, 2, 1) == tight.budget
    given_ids = HistoryConfig(staleness=5, dim=2, candidates=[4, 0, 4])
    assert choose_candidates(given_ids, counts, 1).tolist() == [0, 4]
    with pytest.raises(oa.ConfigError, match="smaller than one slot"):
        choose_candidates(HistoryConfig(staleness=5, dim=2, budget=4 * 6 + per_slot - 1), counts, 1)


def test_frontier_counts_count_hop1_appearances() -> None:
    indptr = np.array([0, 2, 3, 3, 3])
    indices = np.array([1, 2, 3])
    sampler = oa.NeighborSampler((indptr, indices), [-1], seed=0)
    plan = [np.array([0]), np.array([0, 1]), np.array([1])]
    counts, counted = frontier_counts(sampler.sample, plan, 4, limit=None)
    assert counts.tolist() == [0, 1, 2, 2] and counted == 3  # a seed is not in its own frontier
    counts, counted = frontier_counts(sampler.sample, plan, 4, limit=2)
    assert counts.tolist() == [0, 1, 1, 1] and counted == 2  # spread over the plan: the first and the last


def test_without_a_budget_nodes_met_once_are_left_out_when_the_count_spans_more_than_the_staleness() -> None:
    counts = np.array([0, 5, 2, 5, 1, 0], np.int64)
    cfg = HistoryConfig(staleness=5, dim=2)
    assert choose_candidates(cfg, counts, 1, counted_batches=6).tolist() == [1, 2, 3]
    assert choose_candidates(cfg, counts, 1, counted_batches=5).tolist() == [1, 2, 3, 4]  # may recur in time
    budget = HistoryConfig(staleness=5, dim=2, budget=4 * 6 + 4 * (4 * 2 + 8 + 8 + 4 + 1 + 1))
    assert choose_candidates(budget, counts, 1, counted_batches=6).tolist() == [1, 2, 3, 4]  # room: ranked last


def test_auto_admission_resolves_by_steps_per_epoch() -> None:
    from outre_async.cache._history_config import resolve_admission

    auto = HistoryConfig(staleness=27, dim=2)
    assert [resolve_admission(auto, steps) for steps in (26, 27, 28, 0)] == ["grad", "grad", "all", "grad"]
    assert resolve_admission(HistoryConfig(staleness=27, dim=2, admission="all"), 5) == "all"
    assert resolve_admission(HistoryConfig(staleness=27, dim=2, admission="grad"), 500) == "grad"


def test_table_rejects_foreign_candidates_and_keeps_newer_rows() -> None:
    with pytest.raises(oa.ConfigError, match="node ids in"):
        HistoryTable(np.array([0, 9]), 5, 3)
    table = HistoryTable(np.array([1, 3]), 5, 3)
    table.write(np.array([1]), torch.ones(1, 3), step=4)
    rows, stamps = table.read(np.array([0, 1]))
    assert stamps.tolist() == [-1, 4] and rows[1].tolist() == [1.0, 1.0, 1.0]
    view = table.valid(horizon=6, staleness=2)
    assert view.valid.tolist() == [0, 1]
    table.write(np.array([1]), torch.zeros(1, 3), step=5)
    assert table.valid(horizon=6, staleness=2).valid.tolist() == [0, 1] and view.valid.tolist() == [0, 1]


def test_a_retired_row_is_not_offered_again_until_its_next_write_but_stays_readable() -> None:
    table = HistoryTable(np.array([1, 3]), 5, 3)
    table.write(np.array([0, 1]), torch.ones(2, 3), step=4)
    before = table.valid(horizon=5, staleness=3)
    table.retire(np.array([1]))
    assert table.valid(horizon=5, staleness=3).valid.tolist() == [1, 0]
    assert before.valid.tolist() == [1, 1]  # a sampler's copy made earlier keeps its decision ...
    rows, stamps = table.read(np.array([1]))  # ... and the batch it made still reads the row, stamped as pushed
    assert stamps.tolist() == [4] and rows.tolist() == [[1.0, 1.0, 1.0]]
    table.write(np.array([1]), torch.zeros(1, 3), step=6)
    assert table.valid(horizon=7, staleness=3).valid.tolist() == [1, 1]


# -- placement: the rows on the training device ------------------------------------------------------
def test_placement_resolves_auto_by_the_device_and_its_budget() -> None:
    from outre_async.cache._history_config import DEVICE_SHARE, resolve_placement

    gib = 1 << 30
    auto = HistoryConfig(staleness=5, dim=4)
    assert resolve_placement(auto, "cpu", 10, None) == "host"  # a CPU device: nothing to move
    assert resolve_placement(auto, "cuda", int(DEVICE_SHARE * 80 * gib), 80 * gib) == "device"  # fits the share
    assert resolve_placement(auto, "cuda", int(DEVICE_SHARE * 80 * gib) + 1, 80 * gib) == "host"  # one byte over
    assert resolve_placement(auto, "cuda", 1, None) == "host"  # unknown device memory: no default budget
    budget = HistoryConfig(staleness=5, dim=4, device_budget="1MiB")
    assert budget.device_budget == 1 << 20
    assert [resolve_placement(budget, "cuda", n, 80 * gib) for n in (1 << 20, (1 << 20) + 1)] == ["device", "host"]
    assert resolve_placement(HistoryConfig(staleness=5, dim=4, device_budget=0), "cuda", 1, 80 * gib) == "host"
    for placement in ("host", "device"):  # asked for: kept, on any device
        cfg = HistoryConfig(staleness=5, dim=4, placement=placement)
        assert resolve_placement(cfg, "cpu", 10, None) == resolve_placement(cfg, "cuda", 10, gib) == placement
    with pytest.raises(oa.ConfigError, match="more than the device's") as err:
        resolve_placement(HistoryConfig(staleness=5, dim=4, placement="device"), "cuda", gib + 1, gib)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kw", [{"placement": "gpu"}, {"placement": None}, {"device_budget": -1},
                                {"device_budget": True}, {"device_budget": 1.5}])
def test_bad_placement_knobs_are_one_line_config_errors(kw: dict) -> None:
    with pytest.raises(oa.ConfigError, match="placement|device_budget") as err:
        HistoryConfig(staleness=5, dim=4, **kw)
    assert "\n" not in str(err.value)


def test_a_table_on_another_device_gathers_and_scatters_there_and_counts_its_rows_as_that_device_s() -> None:
    """``meta`` stands for a GPU (no data, every shape and device rule of torch): the rows move, the
    stamps and validity stay host numpy, and only the rows leave the host's bytes."""
    host, dev = HistoryTable(np.arange(4), 6, 3), HistoryTable(np.arange(4), 6, 3, device="meta")
    for table in (host, dev):
        table.write(np.array([1, 2]), torch.ones(2, 3), step=5)
    rows, stamps = dev.read(np.array([2, 0]))
    assert rows.device.type == "meta" and rows.shape == (2, 3) and stamps.tolist() == [5, -1]
    np.testing.assert_array_equal(dev.valid(6, 3).valid, host.valid(6, 3).valid)
    assert isinstance(dev.stamp, np.ndarray) and isinstance(dev.valid(6, 3).valid, np.ndarray)
    assert host.device_bytes == 0 and host.host_bytes(2) == host.nbytes(2) == history_bytes(6, 4, 3, 2)
    assert dev.device_bytes == 4 * 3 * 4 and dev.host_bytes(2) == dev.nbytes(2) - 48 == 4 * 6 + 4 * (8 + 8 + 4 + 1 + 2)
    with pytest.raises(oa.ConfigError, match="page-locked"):
        HistoryTable(np.arange(4), 6, 3, pin=True, device="meta")


def test_a_device_table_on_the_cpu_reads_bit_for_bit_what_the_host_table_reads() -> None:
    rng = np.random.default_rng(0)
    host, dev = HistoryTable(np.arange(50), 80, 7), HistoryTable(np.arange(50), 80, 7, device="cpu")
    for step in range(20):
        slots = rng.choice(50, size=int(rng.integers(0, 20)), replace=False)
        rows = torch.from_numpy(rng.standard_normal((len(slots), 7)))  # float64: both cast alike
        host.write(slots, rows, step)
        dev.write(slots, rows, step)
        pull = rng.choice(50, size=15)
        (a, sa), (b, sb) = host.read(pull), dev.read(pull)
        assert torch.equal(a, b) and a.dtype == torch.float32 and np.array_equal(sa, sb)


# -- lifetimes: rows pushed together do not expire together -----------------------------------------
def test_lifetimes_spread_over_the_jitter_span_and_never_exceed_the_staleness() -> None:
    slots = np.arange(5000)
    stamps = np.full(5000, 7)
    life = lifetimes(slots, stamps, 100, 0.5)
    assert life.min() >= 100 - 49 and life.max() <= 100
    assert len(np.unique(life)) == 50  # every lifetime in the span is drawn
    assert abs(life.mean() - 75.5) < 2  # about uniform
    np.testing.assert_array_equal(life, lifetimes(slots, stamps, 100, 0.5))  # a function of (slot, step)
    assert not np.array_equal(life, lifetimes(slots, stamps + 1, 100, 0.5))  # a new push draws again
    assert (lifetimes(slots, stamps, 100, 0.0) == 100).all() and (lifetimes(slots, stamps, 2, 0.5) == 2).all()


def test_a_row_is_valid_for_exactly_its_lifetime() -> None:
    table = HistoryTable(np.arange(64), 64, 2)
    table.write(np.arange(64), torch.ones(64, 2), step=10)
    life = lifetimes(np.arange(64), table.stamp, 20, 0.5)
    assert len(np.unique(life)) > 1
    for horizon in range(10, 32):
        want = (horizon - 10 <= life).astype(np.uint8)
        np.testing.assert_array_equal(table.valid(horizon, 20, 0.5).valid, want)


# -- bounded overtaking -----------------------------------------------------------------------------
class _Item:
    def __init__(self, seq: int, wait_gap: int = 0) -> None:
        self.seq = seq
        self.lease = self
        self.released = 0
        self.history = _Wait(wait_gap) if wait_gap else None

    def release(self) -> None:
        self.released += 1


class _Wait:
    def __init__(self, wait_gap: int) -> None:
        self.wait_gap = wait_gap


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(list(range(12))), window=st.integers(0, 4))
def test_windowed_delivery_never_lets_a_batch_overtake_more_than_window(order: list[int], window: int) -> None:
    async def body() -> list[int]:
        ch: Channel = Channel(len(order))
        for seq in order:
            await ch.send(_Item(seq))
        ch.close()
        w, out = _Windowed(window), []
        while (item := await w.next(ch)) is not None:
            out.append(item.seq)
        return out

    out = run(body(), timeout=10)
    assert sorted(out) == list(range(12))
    for position, seq in enumerate(out):
        assert position <= seq + window  # at most seq + window batches before it
        assert set(range(seq - window)) <= set(out[:position])


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(list(range(12))), window=st.integers(1, 4), data=st.data())
def test_windowed_delivery_hands_a_batch_out_after_the_batch_it_waits_for(order: list[int], window: int,
                                                                          data: st.DataObject) -> None:
    gaps = [data.draw(st.integers(0, min(seq, window))) for seq in range(12)]

    async def body() -> list[int]:
        ch: Channel = Channel(len(order))
        for seq in order:
            await ch.send(_Item(seq, gaps[seq]))
        ch.close()
        w, out = _Windowed(window), []
        while (item := await w.next(ch)) is not None:
            out.append(item.seq)
        return out

    out = run(body(), timeout=10)
    assert sorted(out) == list(range(12))  # every batch, no deadlock
    for position, seq in enumerate(out):
        assert set(range(seq - window)) <= set(out[:position])
        if gaps[seq]:
            assert set(range(seq - gaps[seq] + 1)) <= set(out[:position]), (seq, gaps[seq], out)
