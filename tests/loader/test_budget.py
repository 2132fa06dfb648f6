"""The memory plan: every part the loader allocates, sized to fit ``memory_budget`` (pure numbers)."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest

import outre_async as oa
from outre_async.features._disk_probe import DiskProbe, ProbeCell
from outre_async.loader._budget import (
    SLOT_BYTES,
    Sizes,
    batch_row_bytes,
    expected_batch_bytes,
    plan_memory,
    plan_memory_floor,
    slot_map_bytes,
)
from outre_async.sampling._plan import max_edges_per_batch
from outre_async.store import RowFormat
from outre_async.loader import LoaderConfig

SIZES = Sizes(num_nodes=200_000, format=RowFormat.float32(128), stride=512, max_rows=62_464, max_edges=61_440)


def _cfg(**kw: object) -> LoaderConfig:
    return LoaderConfig(fanouts=(10, 5), batch_size=1024, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [256 << 20, 400 << 20, 1 << 30])
def test_every_part_fits_the_budget_and_the_buffer_takes_the_rest(budget: int) -> None:
    plan = plan_memory(_cfg(memory_budget=budget), SIZES, source="disk")
    assert budget - (4 * 128 + SLOT_BYTES) < plan.total <= budget  # the buffer and the pool take the rest
    assert plan.buffer_rows >= 2 * 128  # the buffer's floor: a piece in flight per extractor
    assert plan.parts["batches"] >= 2 * SIZES.max_rows * batch_row_bytes(RowFormat.float32(128))  # the consumer's batch and the next
    assert plan.parts["staging"] == 2 * 2 * plan.stage_bytes <= budget // 8
    assert plan.parts["slot table"] == 8 * 200_000  # node -> slot, look-ahead counts


def test_the_buffer_gets_its_piece_floor_before_the_pool_grows_past_its_own() -> None:
    """Small budgets: pieces of 4096 rows per extractor where the pool keeps two batches and 10 %;
    at the least budget the buffer keeps its 128-row floor (the floor is not raised)."""
    real = Sizes(num_nodes=300_000, format=RowFormat.float32(256), stride=1024, max_rows=60_000, max_edges=60_000,
                 batch_rows=26_000)
    cfg = LoaderConfig(fanouts=(10, 10), batch_size=512, memory_budget="128MiB")
    plan = plan_memory(cfg, real, source="disk")
    assert plan.buffer_rows == 2 * 4096 and plan.total <= 128 << 20
    assert plan.parts["batches"] >= 2.2 * 26_000 * batch_row_bytes(RowFormat.float32(256))
    floor = plan_memory_floor(cfg, real, source="disk")
    tight = plan_memory(LoaderConfig(fanouts=(10, 10), batch_size=512, memory_budget=floor), real, source="disk")
    assert tight.buffer_rows == 2 * 128
    between = plan_memory(LoaderConfig(fanouts=(10, 10), batch_size=512, memory_budget=floor + (1 << 20)),
                          real, source="disk")
    assert 2 * 128 < between.buffer_rows < 2 * 4096 and between.total <= floor + (1 << 20)


def test_the_buffer_is_sized_by_real_batches_not_the_worst_case() -> None:
    """With batches that really need a third of the bound, the matrices' pool shrinks and the cache grows."""
    big = Sizes(num_nodes=2_000_000, format=RowFormat.float32(128), stride=512, max_rows=62_464, max_edges=61_440)
    real = Sizes(num_nodes=2_000_000, format=RowFormat.float32(128), stride=512, max_rows=62_464, max_edges=61_440,
                 batch_rows=20_000)
    worst, probed = (plan_memory(_cfg(memory_budget=1 << 30), s, source="disk") for s in (big, real))
    pool = (2 + 2 + 1) * 20_000 * batch_row_bytes(RowFormat.float32(128))  # ready queue + extractors + the consumer's batch
    assert pool <= probed.parts["batches"] < pool + 4 * 128 + SLOT_BYTES  # (the rows' remainder goes to the pool)
    assert probed.buffer_rows > worst.buffer_rows + 100_000
    assert plan_memory(_cfg(), real, source="disk").buffer_rows == 3 * 20_000  # default: extractors + 1 batches


def test_facebook_like_rows_fit_128_mib_with_batch_64_and_fanouts_10_10() -> None:
    """The case the worst-case sizing refused (18 KiB rows, R = 7,104 rows = 128 MiB a batch): with the
    real batches' 2,918 rows at most the buffer gets its floor and the pool holds two matrices."""
    fb = Sizes(num_nodes=22_470, format=RowFormat.float32(4714), stride=4 * 4714, max_rows=7104,
               max_edges=64 * 110, batch_rows=2918)
    cfg = LoaderConfig(fanouts=(10, 10), batch_size=64, memory_budget="128MiB")
    plan = plan_memory(cfg, fb, source="disk")
    assert plan.total <= 128 << 20 and plan.buffer_rows >= 256
    assert plan.parts["batches"] >= 2 * 2918 * batch_row_bytes(RowFormat.float32(4714))
    with pytest.raises(oa.ConfigError, match=r"one batch is expected to need 2918 rows, a 52.\d MiB matrix"):
        plan_memory(LoaderConfig(fanouts=(10, 10), batch_size=64, memory_budget="64MiB"), fb, source="disk")
    assert plan.source_options() == {"max_stage_bytes": plan.stage_bytes, "max_staging_bytes": plan.parts["staging"]}


def test_a_budget_below_the_floor_names_memory_budget_and_the_minimum() -> None:
    floor = plan_memory_floor(_cfg(memory_budget=1), SIZES, source="disk")
    plan_memory(_cfg(memory_budget=floor), SIZES, source="disk")  # exactly the floor fits
    with pytest.raises(oa.ConfigError, match=f"memory_budget={floor - 1} .* below the {floor} bytes"):
        plan_memory(_cfg(memory_budget=floor - 1), SIZES, source="disk")


def test_ordered_mode_and_deeper_queues_cost_buffer_rows() -> None:
    big = Sizes(num_nodes=2_000_000, format=RowFormat.float32(128), stride=512, max_rows=62_464, max_edges=61_440)
    base = plan_memory(_cfg(memory_budget=1 << 30), big, source="disk")
    ordered = plan_memory(_cfg(memory_budget=1 << 30, ordered=True), big, source="disk")
    deep = plan_memory(_cfg(memory_budget=1 << 30, ready_queue=8), big, source="disk")
    assert "reorder buffer" in ordered.parts and ordered.buffer_rows < base.buffer_rows
    assert deep.parts["batches"] > base.parts["batches"] and deep.buffer_rows < base.buffer_rows


def test_sources_the_loader_does_not_stage_for() -> None:
    memory = plan_memory(_cfg(), SIZES, source="memory")
    injected = plan_memory(_cfg(), SIZES, source="injected")
    assert memory.parts["features in RAM"] == 200_000 * 512 and memory.source_options() == {}
    assert "staging" in injected.parts and injected.parts["staging"] == 0


def test_user_staging_options_win_and_are_counted() -> None:
    cfg = _cfg(memory_budget=1 << 30, source_options={"max_stage_bytes": 1 << 20, "max_staging_bytes": 64 << 20})
    plan = plan_memory(cfg, SIZES, source="disk")
    assert plan.stage_bytes == 1 << 20 and plan.parts["staging"] == 64 << 20


def test_max_edges_per_batch() -> None:
    assert max_edges_per_batch(4, (3, 2), 10**9) == 4 * 3 + 4 * 3 * 2
    assert max_edges_per_batch(4, (3, -1), 100) == 100
    assert max_edges_per_batch(4, (30, 30), 1000) == 1000


IGB_LIKE = Sizes(num_nodes=1_000_000, format=RowFormat.float32(1024), stride=4096, max_rows=31_232, max_edges=30_720,
                 batch_rows=17_101)  # fanouts (10, 5), batch 512; 17,101 rows: the probe on bench-fennel-256


def test_ordered_mode_counts_out_of_turn_batches_at_their_real_rows() -> None:
    """The bench's ordered outre-part on igb-like at 1.6 GiB: the reorder buffer is a byte budget of
    1.1 x samplers probed batches (with their subgraphs), not (samplers + queues + extractors) worst
    cases (1.2 GiB, which left the feature buffer its 256-row floor)."""
    cfg = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="1.6GiB", ordered=True,
                          partitions="bench-fennel-256", neighbor_cache=64 << 20)
    plan = plan_memory(cfg, IGB_LIKE, source="disk")
    batch = 17_101 * batch_row_bytes(RowFormat.float32(1024)) + 8 * 17_101 + 24 * 30_720
    assert plan.parts["reorder buffer"] == plan.out_of_turn_bytes == math.ceil(1.1 * 2 * batch)
    assert plan.parts["batches"] >= (2 + 2 + 1) * batch  # ready queue + extractors + the consumer's, subgraphs too
    assert plan.total <= cfg.budget_bytes and plan.buffer_rows > 200_000
    worse = replace(IGB_LIKE, max_rows=1_000_000)  # a larger worst case, the same real batches: the same part
    assert plan_memory(cfg, worse, source="disk").parts["reorder buffer"] == plan.parts["reorder buffer"]
    unordered = plan_memory(LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="1.6GiB"), IGB_LIKE,
                            source="disk")
    assert "reorder buffer" not in unordered.parts and unordered.buffer_rows > plan.buffer_rows


def test_an_ordered_budget_below_the_floor_names_the_minimum() -> None:
    cfg = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=1, ordered=True)
    floor = plan_memory_floor(cfg, IGB_LIKE, source="disk")
    unordered = plan_memory_floor(LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=1), IGB_LIKE,
                                  source="disk")
    assert floor > unordered  # the reorder buffer's part and the subgraphs in the pool's two batches
    plan_memory(LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=floor, ordered=True), IGB_LIKE,
                source="disk")  # exactly the floor fits
    with pytest.raises(oa.ConfigError, match=f"memory_budget={floor - 1} .* below the {floor} bytes.*reorder buffer"):
        plan_memory(LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=floor - 1, ordered=True),
                    IGB_LIKE, source="disk")


def test_history_in_completion_order_counts_the_batches_its_window_holds_back() -> None:
    """Issue 27: the history's overtaking window holds back a batch that arrives before the ones it must
    follow, and that batch keeps its matrix and subgraph, so ``b`` counts subgraphs as in plan order;
    every batch is sent in its turn (no out-of-turn budget: held batches are the pool's), so there is no
    reorder buffer part.  The floor rises with ``b``."""
    hist = oa.HistoryConfig(staleness=8, dim=32)
    cfg = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="1.6GiB", history=hist)
    assert cfg.holds_back and not replace(cfg, history=None).holds_back and replace(cfg, ordered=True).holds_back
    plan = plan_memory(cfg, IGB_LIKE, source="disk")
    assert "reorder buffer" not in plan.parts and plan.out_of_turn_bytes == 0
    assert expected_batch_bytes(cfg, IGB_LIKE) == 17_101 * batch_row_bytes(RowFormat.float32(1024)) + 8 * 17_101 + 24 * 30_720
    assert expected_batch_bytes(replace(cfg, history=None), IGB_LIKE) == 17_101 * batch_row_bytes(RowFormat.float32(1024))
    off = oa.HistoryConfig(staleness=1, dim=32)  # staleness 1: no history, nothing held back
    assert not off.enabled and "reorder buffer" not in plan_memory(replace(cfg, history=off), IGB_LIKE,
                                                                     source="disk").parts
    floor = plan_memory_floor(replace(cfg, memory_budget=1), IGB_LIKE, source="disk")
    assert floor > plan_memory_floor(LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=1), IGB_LIKE,
                                     source="disk")


def test_the_default_extract_queue_deepens_within_four_percent_of_the_budget_and_its_room() -> None:
    """Look-ahead depth (``extract_depth``): 64 on igb-like at 1.6 GiB (64 subgraphs of 1 MB fit in
    4 %), the floor samplers + 2 at the floor budget, in between when the budget is tight, as given
    when given, and the ``subgraphs`` part counts the depth the plan returns."""
    cfg = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="1.6GiB")
    sub = 8 * IGB_LIKE.max_rows + 24 * IGB_LIKE.max_edges
    plan = plan_memory(cfg, IGB_LIKE, source="disk")
    assert plan.extract_queue == 64 and plan.parts["subgraphs"] == (64 + 2 + 2 + 1) * sub
    floor = plan_memory_floor(cfg, IGB_LIKE, source="disk")
    at_floor = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=floor)
    assert plan_memory(at_floor, IGB_LIKE, source="disk").extract_queue == 4
    # room: 3 slots and the rows they pin in the buffer's map (a hash table here: 1 M nodes, 8 pinned batches)
    grown = (slot_map_bytes(replace(at_floor, extract_queue=7), IGB_LIKE, 128 * at_floor.num_extractors, 0)
             - slot_map_bytes(replace(at_floor, extract_queue=4), IGB_LIKE, 128 * at_floor.num_extractors, 0))
    assert grown > 0
    tight = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=floor + 3 * sub + grown + 1)
    assert plan_memory(tight, IGB_LIKE, source="disk").extract_queue == 4 + 3
    short = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=floor + 3 * sub + 1)  # the map's growth left out
    assert plan_memory(short, IGB_LIKE, source="disk").extract_queue < 4 + 3
    mid = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget=400 << 20)  # 4 %: 16 subgraphs, less the map's growth
    room, rows = int(0.04 * (400 << 20)), 128 * mid.num_extractors

    def growth(q: int) -> int:  # 16 more batches pin enough rows that the map turns into the 8 MB array
        return (slot_map_bytes(replace(mid, extract_queue=4 + q), IGB_LIKE, rows, 0)
                - slot_map_bytes(replace(mid, extract_queue=4), IGB_LIKE, rows, 0))

    fits = max(q for q in range(61) if q * sub + growth(q) <= room)
    assert room // sub == 16 and plan_memory(mid, IGB_LIKE, source="disk").extract_queue == 4 + fits == 19
    given = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="1.6GiB", extract_queue=3)
    assert plan_memory(given, IGB_LIKE, source="disk").extract_queue == 3
    assert plan_memory(LoaderConfig(fanouts=(10, 5), batch_size=512), IGB_LIKE, source="disk").extract_queue == 64


def test_partition_mode_counts_its_arrays_and_macro_blocks_before_the_buffer() -> None:
    """Partition mode's arrays in RAM (P) and its macro blocks ((2 samplers + interleave) x M) are
    parts of the plan: the buffer and pool give up exactly their bytes, the floor rises by them, and
    a budget below the new floor is the ConfigError naming it (issue 27: +36 MiB RSS at a 32 MiB budget)."""
    cfg = _cfg(memory_budget=256 << 20, partitions="p", num_samplers=3)
    bare = plan_memory(cfg, SIZES, source="disk")
    held = replace(SIZES, partition_bytes=2_800_000, macro_block_bytes=500_000, interleave=4)
    plan = plan_memory(cfg, held, source="disk")
    assert plan.parts["partition arrays"] == 2_800_000
    assert plan.parts["macro adjacency"] == (2 * 3 + 4) * 500_000 == 5_000_000
    assert "partition arrays" not in bare.parts and "macro adjacency" not in bare.parts
    assert plan.total <= 256 << 20
    given_up = bare.parts["feature buffer"] + bare.parts["batches"] - plan.parts["feature buffer"] - plan.parts["batches"]
    assert given_up == 7_800_000  # the two flexible parts shrink by exactly the new parts
    floor, bare_floor = (plan_memory_floor(replace(cfg, memory_budget=1), s, source="disk") for s in (held, SIZES))
    assert floor == bare_floor + 7_800_000
    plan_memory(replace(cfg, memory_budget=floor), held, source="disk")  # the floor fits
    with pytest.raises(oa.ConfigError, match=f"below the {floor} bytes.*partition arrays 2.7 MiB"):
        plan_memory(replace(cfg, memory_budget=floor - 1), held, source="disk")


def test_macro_adjacency_is_two_epochs_of_disjoint_blocks_at_most() -> None:
    """B = 2 samplers + interleave blocks held at once: at most B x M (the largest block), and at most
    T(ceil(B/2)) + T(floor(B/2)) (T(j): the most j blocks of one epoch take, ``macro_top_bytes``), the
    store holding blocks of two epochs only (issue 26: papers-like 220 -> 112 MiB)."""
    cfg = _cfg(memory_budget=256 << 20, partitions="p", num_samplers=3)  # B = 2 x 3 + 4 = 10
    top = (0, 500_000, 800_000, 1_000_000, 1_100_000, 1_150_000, 1_170_000)  # concave: skewed partitions
    held = replace(SIZES, partition_bytes=1000, macro_block_bytes=500_000, macro_top_bytes=top, interleave=4)
    plan = plan_memory(cfg, held, source="disk")
    assert plan.parts["macro adjacency"] == top[5] + top[5] == 2_300_000 < 10 * 500_000
    odd = plan_memory(replace(cfg, num_samplers=2), replace(held, interleave=3), source="disk")  # B = 7
    assert odd.parts["macro adjacency"] == top[4] + top[3] == 2_100_000
    few = replace(held, macro_top_bytes=top[:3])  # an epoch of 2 macro batches: T stops growing there
    assert plan_memory(cfg, few, source="disk").parts["macro adjacency"] == 2 * 800_000
    flat = replace(held, macro_top_bytes=tuple(j * 500_000 for j in range(12)))  # equal blocks: B x M
    assert plan_memory(cfg, flat, source="disk").parts["macro adjacency"] == 10 * 500_000
    assert plan_memory(cfg, replace(held, macro_top_bytes=()), source="disk").parts["macro adjacency"] == 5_000_000


def _probe_4k_knee_16() -> DiskProbe:
    """IOPS by depth: the knee (>= 0.9 x peak) at 16 for 4 KiB reads and at 4 for 128 KiB ones."""
    rates = {4096: {1: 10e3, 4: 30e3, 16: 60e3, 64: 64e3, 256: 65e3},
             131072: {1: 2e3, 4: 9.5e3, 16: 10e3, 64: 10e3, 256: 10e3}}
    cells = tuple(ProbeCell(depth=d, size=s, iops=r, bytes_per_s=r * s, reads=1, seconds=1.0)
                  for s, row in rates.items() for d, r in row.items())
    return DiskProbe(path="f", file_bytes=1 << 30, direct=True, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=1.0, cells=cells)


def test_staging_is_what_a_chunk_needs_in_flight_where_rows_go_into_slots() -> None:
    """Where io_uring reads the buffer's rows into its slots, an arena holds the reads the device
    needs in flight: with ``disk_probe``, single rows (depth 2 x 16 at 4 KiB spans: 128 KiB) or merged
    reads (2 x 4 reads of 128 KiB: 1 MiB), whichever is more; without one, io_uring's 256 reads of
    one row's span (1 MiB), or ``max_in_flight`` of them (at least one ``max_read_bytes``).  Where
    staging is the read path (pread, padded rows...), 1/16 of the budget per extractor as before."""
    slots = replace(SIZES, rows_into_slots=True)
    cfg = _cfg(memory_budget=1 << 30, disk_probe=_probe_4k_knee_16())
    plan = plan_memory(cfg, slots, source="disk")
    assert plan.stage_bytes == 1 << 20 and plan.parts["staging"] == 2 * 2 * (1 << 20)
    assert plan_memory(cfg, SIZES, source="disk").stage_bytes == 32 << 20  # staged rows: the budget's share
    assert plan_memory(_cfg(memory_budget=1 << 30), slots, source="disk").stage_bytes == 1 << 20
    assert plan_memory(_cfg(memory_budget=1 << 30, max_in_flight=8), slots, source="disk").stage_bytes == 128 << 10
    assert plan_memory(_cfg(), slots, source="disk").stage_bytes == 64 << 20  # no budget: max_stage_bytes
    deep = plan_memory(replace(cfg, max_in_flight=1024), slots, source="disk")  # rows: 1024 x 4 KiB = 4 MiB
    assert deep.stage_bytes == 4 << 20
    # a row's span: 10 sectors, 40,960 bytes (batches small enough for the budget to hold such rows)
    wide = replace(slots, format=RowFormat.float32(10_000), stride=40_000, max_rows=1000, max_edges=1000)
    assert plan_memory(replace(cfg, max_in_flight=64), wide, source="disk").stage_bytes == 4 << 20  # 2.5 MiB up
    tight = plan_memory_floor(cfg, slots, source="disk") + (1 << 20)
    small = plan_memory(replace(cfg, memory_budget=tight), slots, source="disk")
    assert small.stage_bytes < 1 << 20 and small.total <= tight  # halved while the floor would not fit


def test_the_loader_knows_when_rows_go_into_slots(tmp_path) -> None:
    """io_uring with float32 rows whose stride the alignment divides: rows into slots; pread, or a
    padded stride, stage them (``_setup._rows_into_slots``)."""
    from outre_async.features import detect_io_uring
    from outre_async.features._disk_source import open_direct
    from outre_async.loader._setup import _rows_into_slots

    ds = oa.open_dataset(oa.generate(tmp_path / "g", "tiny", seed=1, feature_dim=128))  # 512 B rows
    assert not _rows_into_slots(ds, _cfg(backend="pread"))
    fd, _, align = open_direct(ds.features_path, True)  # 512 or 4096 (the file system's)
    os.close(fd)
    assert _rows_into_slots(ds, _cfg(backend="auto")) == (detect_io_uring() and 512 % align == 0)
    odd = oa.open_dataset(oa.generate(tmp_path / "h", "tiny", seed=1, feature_dim=100))  # 400 B rows, 512 B apart
    assert odd.row_layout.stride == 512 and not _rows_into_slots(odd, _cfg(backend="io_uring"))
