"""How ``memory_budget`` is spent: every part an :class:`OutreLoader` allocates, sized to fit.

A pure function of the config and the dataset's sizes (tested with numbers, like the cache split).
With ``N`` nodes, ``f`` = one feature row's held bytes (``Sizes.format``, the dataset's ``RowFormat``:
its stored bytes, rows being held as stored) and ``x`` a batch row's bytes on the host (the held bytes,
or on a CPU device the larger of held and delivered: the batch is decoded in place, ``batch_row_bytes``),
``R`` = the most rows one batch can need, ``r`` = the rows one batch is expected to need (a probe of
real batches, ``_batch_rows``; at most ``R``) and ``E`` = the most edges one batch can sample, the
loader holds at most (``dim`` in the history lines: the history's own, its rows float32)::

    slot table        min(8 N, 12 c(rows + Q R + F))        (node -> slot map, look-ahead counts: the direct
                                                             array, or a hash table of c(x) buckets, the power
                                                             of two >= 2 x; Q = extract_queue + extractors +
                                                             samplers pinned batches, F = foresight's ids;
                                                             16 c(.) past 2^31 nodes: int64 keys)
    next-use chains   4 N + 16 R x (extract_queue + extractors)  (buffer_policy="next-use" only)
    feature buffer    rows x (f + 40)                       (rows + bookkeeping: node, refs, LRU)
    staging           2 x extractors x S                    (two chunks in flight per extractor; S = one
                                                             arena, a power of two, ``chunk_stage_bytes``)
    extractor work    extractors x (32 R + 1 MiB)           (unique ids, inverse, gather blocks)
    sampler relabel   samplers x min(4 N, 8 c(R))           (relabel scratch: the array, or a hash table of c(R)
                                                             buckets where smaller; 8 N and 12 c(R) past 2^31 nodes)
    sampler scratch   samplers x 3 sub                      (the kernel's growth)
    subgraphs         (extract_queue + extractors + ready_queue + 1) x sub,   sub = 8 R + 24 E (n_id, edges, e_id)
                      (extract_queue by default: samplers + 2, deepened up to ``EXTRACT_QUEUE`` within
                      ``LOOKAHEAD_SHARE`` of the budget and what it leaves above the floor, ``extract_depth``)
    batches           a byte pool for batch matrices in flight, real rows x (x + 33) each
                      (matrix, labels, input_id, piece ids + slots, actions; ``_batch_memory``;
                      default (ready_queue + extractors + 1) x b, b = r x (x + 33))
    reorder buffer    ordered mode: 1.1 x samplers x b for batches sent out of turn (``_out_of_turn``)
    history table     4 N + C x (4 dim + 21 + samplers)     (with ``history=``: C cached h^(L-1) rows;
                                                             rows on a GPU: 4 N + C x (21 + samplers))
    read bounce       depth x 64 KiB, capped                (io_uring reading rows into the buffer's slots: merged
                                                             reads land in bounce pages, ``features._bounce``;
                                                             at most ``BOUNCE_SHARE`` of the budget)
    foresight         4 (D r + R) + samplers x sub          (D batches foreseen beyond the extract queue;
                                                             ``foresight_depth``; 0 with history or next-use)
    history transfer  2^ceil(log2(40 R (+ 4 R dim)))       (``history=``: the records' reused host buffer,
                                                             ``cache._record_transfer``)
    neighbor cache    neighbor_cache                        (``partitions=``: its lists and node -> slot index)
    partition arrays  P                                     (``partitions=``: the set's O(N) arrays, int32
                                                             where they fit, ``PartitionBatching``)
    macro adjacency   min(B x M, T(ceil(B/2)) + T(floor(B/2)))   (``partitions=``: B blocks of at most M
                                                             bytes, ``macro_adjacency_bytes``)
    profile arrays    8 x (static + neighbour nodes)        (``profile=``: the plan's node lists)

In ordered mode, and with ``history=`` in completion order (``LoaderConfig.holds_back``), a batch's
lease also counts its subgraph (``b`` adds ``8 r + 24 E``): the reorder buffer or the overtaking window
may hold it past its queue slot, and a batch sampled before an earlier one is sent only within the
``reorder buffer`` part, so what is held stays inside the plan (docs/design/memory.md says why there is
no reorder part with history).  The feature buffer is a cache (a batch streams through it in pieces):
given a budget, the parts except the buffer and the pool are fixed; the buffer first gets its *piece
floor*, ``min(N, extractors x min(4096, r))`` rows (small pieces cost more CPU per row read:
``benchmarks/bench_loader_cpu.py``), then the pool its default or what is left, and the buffer the rest
(at most ``N`` rows).  A budget that leaves less than the buffer's minimum plus 2.2 expected batches is
a :class:`ConfigError` naming that minimum; batches too large for the pool name their own bytes.

``memory`` backend: the feature matrix in RAM takes the staging line's place; an injected ``source=``
is its owner's and is not counted.  Given a budget, ``S`` is what a chunk needs in flight where
io_uring reads rows straight into the buffer's slots (``chunk_stage_bytes``), else the largest power
of two at most 1/8 of the budget over ``2 x extractors`` (at most ``max_stage_bytes``, at least one
read; halved while the minimum buffer and two batches would not fit).  Not counted: the interpreter,
torch and numba (the benchmark's *baseline*), thread stacks, and the mapped ``indices``' page cache.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

from ..errors import ConfigError, SmallBufferWarning
from .._units import format_bytes
from ..cache._history_config import record_buffer_bytes
from ..features._bounce import BouncePool
from ..features._disk_probe import in_flight_for
from ..features._buffer_kernels import next_use_bytes, slot_bytes
from ..features._disk_source import IOConfig, extract_work_bytes
from ..features._staging import StagingPool, aligned_span, arena_bytes, least_arena_bytes
from ..sampling._sampler import NeighborSampler, SampledSubgraph
from ..store._row_format import RowFormat
from ._batch_memory import BatchMemory
from ._config import EXTRACT_QUEUE, LoaderConfig
from ._foresight import held_id_bytes
# the plan's input and output types live in ``_plan_sizes``, its O(N) parts in ``_node_parts``;
# every caller imports them from here
from ._node_parts import foresight_rows, node_bytes, slot_map_bytes, slot_map_entries
from ._plan_sizes import MemoryPlan, Sizes
from ._read_depth import uring_depth

__all__ = [
    "BOUNCE_SHARE", "FORESIGHT_MAX", "FORESIGHT_REACH", "LEASE_BYTES", "LOOKAHEAD_SHARE", "MIN_BATCHES",
    "MIN_ROWS_PER_EXTRACTOR", "OUT_OF_TURN_MARGIN", "PIECE_ROWS_PER_EXTRACTOR", "SLOT_BYTES", "MemoryPlan", "Sizes",
    "batch_row_bytes", "bounce_bytes", "check_fits_machine", "chunk_stage_bytes", "decodes_on_host", "default_pool",
    "expected_batch_bytes", "extract_depth", "foresight_bytes", "foresight_depth", "foresight_rows",
    "macro_adjacency_bytes", "macro_blocks", "node_bytes", "plan_memory", "plan_memory_floor", "slot_map_bytes",
    "slot_map_entries", "warn_small_buffer",
]

# every part's bytes come from its owner (``planned_bytes`` and kin, next to the code that allocates it)
SLOT_BYTES = slot_bytes()  # per buffer slot besides its row (``Sizes.slot_bytes`` adds the same owner's count)
LEASE_BYTES = BatchMemory.row_bookkeeping_bytes()    # per row of a batch in flight besides its features
MIN_ROWS_PER_EXTRACTOR = 128  # the buffer's floor: a piece of reads in flight for every extractor
PIECE_ROWS_PER_EXTRACTOR = 4096  # the buffer's piece floor where the budget allows (module docstring)
MIN_BATCHES = 2.2   # the pool's floor: the batch the consumer holds and the next one, + 10 % for
                    # batches larger than the probe's largest
OUT_OF_TURN_MARGIN = 1.1  # ordered mode: a batch out of turn per sampler, + 10 % (as above)
LOOKAHEAD_SHARE = 0.04  # the default extract queue deepens within this share of the budget (``extract_depth``)
BOUNCE_SHARE = 0.02  # the io_uring source's bounce pages take at most this share of the budget (bounce_bytes)
FORESIGHT_REACH = 3.5  # default foresight: the batches in sight need this many times the buffer's rows (foresight_depth)
FORESIGHT_MAX = 256  # default foresight: at most this many batches beyond the queue


def batch_row_bytes(row: RowFormat, *, on_host: bool = True) -> int:
    """Bytes one row of a batch in flight costs on the host: its features and its share of the rest.
    Batch matrices hold the rows' held words; where the batch is decoded on the host (``on_host``: a
    CPU device, ``decodes_on_host``) the matrix's map has room for the delivered words too, so the
    decode needs no second matrix (``features._decode``); on a GPU the decode is on the device."""
    room = max(row.held_row_bytes, row.delivered_row_bytes) if on_host and row.decodes else row.held_row_bytes
    return room + LEASE_BYTES


def decodes_on_host(device: str) -> bool:
    """Whether a loader on ``device`` decodes its batches on the host (every device but CUDA, whose
    batches are copied in their held words and decoded there)."""
    return not device.startswith("cuda")


def plan_memory(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None) -> MemoryPlan:
    """Size every part; ``source`` is ``"disk"``, ``"memory"`` or ``"injected"`` (see the module); ``extra``
    names parts other owners size (the history table), taken out of the budget before the buffer.
    Foresight (``foresight_depth``) is planned on the buffer the rest leaves, then its part taken out;
    a default foresight that does not fit is left off.  Where the buffer's map is a hash table, the rows
    foreseen enlarge it (``slot_map_entries``), so the buffer left with foresight may be smaller than
    the one its depth was planned on: a default depth is then planned once more on that buffer."""
    plan = _plan_parts(cfg, sizes, source=source, extra=extra)
    depth = foresight_depth(replace(cfg, extract_queue=plan.extract_queue), sizes, plan.buffer_rows)
    if not depth:
        return plan
    try:
        plan = _with_foresight(cfg, sizes, source, extra, depth)
    except ConfigError:
        if cfg.foresight is not None:  # asked for: its error names what the budget lacks
            raise
        return plan
    again = foresight_depth(replace(cfg, extract_queue=plan.extract_queue), sizes, plan.buffer_rows)
    if cfg.foresight is None and 0 < again < depth:
        try:
            return _with_foresight(cfg, sizes, source, extra, again)
        except ConfigError:
            pass
    return plan


def _with_foresight(cfg: LoaderConfig, sizes: Sizes, source: str, extra: dict[str, int] | None,
                    depth: int) -> MemoryPlan:
    part = {"foresight": foresight_bytes(cfg, sizes, depth)}
    plan = _plan_parts(cfg, sizes, source=source, extra={**(extra or {}), **part}, depth=depth)
    return replace(plan, foresight=depth)


def foresight_depth(cfg: LoaderConfig, sizes: Sizes, buffer_rows: int) -> int:
    """Batches the loader foresees beyond the extract queue (``_foresight``): ``foresight`` if given,
    else as many as make the batches in sight (queued and foreseen) need ``FORESIGHT_REACH`` times the
    buffer's rows, at most ``FORESIGHT_MAX``; 0 where foresight is not allowed (``foresight_allowed``).
    Why rows: past the best depth more foresight reads more (windows then evict foreseen rows the
    buffer would have kept), and on papers-like and products-like the best depth was where the batches
    in sight needed about ``FORESIGHT_REACH`` times the buffer's rows, while igb-like read about as many
    rows at any depth (``benchmarks/replay_window_reads.py --foresight``)."""
    if cfg.foresight is not None:
        return cfg.foresight
    if not cfg.foresight_allowed:
        return 0
    in_sight = math.ceil(FORESIGHT_REACH * buffer_rows / max(1, sizes.expected_rows))
    return max(0, min(FORESIGHT_MAX, in_sight - cfg.extract_capacity))


def foresight_bytes(cfg: LoaderConfig, sizes: Sizes, depth: int) -> int:
    """What foresight of ``depth`` batches holds: their ids (int32 where node ids fit, at the expected rows
    a batch, plus one largest batch: ``EpochForesight`` stops foreseeing past that) and the subgraph each
    sampler makes for it while it also holds its own (``8 R + 24 E``)."""
    if not depth:
        return 0
    return held_id_bytes(sizes.num_nodes) * (foresight_rows(depth, sizes) + sizes.max_rows) + cfg.num_samplers * (
        SampledSubgraph.planned_bytes(sizes.max_rows, sizes.max_edges))


def _plan_parts(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None,
                depth: int = 0) -> MemoryPlan:
    """:func:`plan_memory` without foresight (``depth``: the foresight the ``extra`` parts hold, which the
    buffer's map counts too).  The map's part grows with the buffer's rows (``slot_map_bytes``): the
    fixed parts count it at the buffer's floor, and rows that make it larger pay for it (fewer rows)."""
    cfg = replace(cfg, extract_queue=extract_depth(cfg, sizes, source=source, extra=extra, depth=depth))
    budget = cfg.budget_bytes
    io = IOConfig(**cfg.source_options) if source == "disk" else None
    slot, least_pool = sizes.slot_bytes, _least_pool(cfg, sizes)
    floor_rows = _least_buffer_rows(cfg, sizes) if cfg.buffer_rows is None else min(cfg.buffer_rows, sizes.num_nodes)
    stage = _stage_bytes(cfg, sizes, io, budget)
    if budget is not None:  # smaller arenas rather than less room than the buffer's floor and two batches
        least, needed = _stage_bytes(cfg, sizes, io, 0), _least_buffer_rows(cfg, sizes) * slot + least_pool
        while stage > least and sum(_fixed_parts(cfg, sizes, source, stage, extra, floor_rows, depth).values()) \
                + needed > budget:
            stage //= 2
    fixed = _fixed_parts(cfg, sizes, source, stage, extra, floor_rows, depth)
    pool = default_pool(cfg, sizes)
    if budget is None:
        rows = min(cfg.buffer_rows or (cfg.num_extractors + 1) * sizes.expected_rows, sizes.num_nodes)
        fixed["slot table"] = slot_map_bytes(cfg, sizes, rows, depth)
    else:
        free = budget - sum(fixed.values())
        if cfg.buffer_rows is not None:
            rows = min(cfg.buffer_rows, sizes.num_nodes)
        else:
            least = _piece_buffer_rows(cfg, sizes, free - least_pool, slot)
            rows = min(sizes.num_nodes, max(least, (free - min(pool, free - least * slot)) // slot))
            spend = rows * slot  # the map of more rows than the floor's may be larger: fewer rows pay for it
            while rows > floor_rows and (over := rows * slot + slot_map_bytes(cfg, sizes, rows, depth)
                                         - fixed["slot table"] - spend) > 0:
                rows = max(floor_rows, rows - -(-over // slot))
        free += fixed["slot table"]
        fixed["slot table"] = slot_map_bytes(cfg, sizes, rows, depth)
        free -= fixed["slot table"]
        pool = max(0, free - rows * slot)
    plan = MemoryPlan(buffer_rows=rows, stage_bytes=stage, extract_queue=cfg.extract_capacity,
                      parts={"feature buffer": rows * slot, "batches": pool, **fixed},
                      map_entries=slot_map_entries(cfg, sizes, rows, depth),
                      per_node=node_bytes(cfg, sizes, {"slot table": fixed["slot table"],
                                                       "sampler relabel": fixed["sampler relabel"]}))
    if budget is not None and (plan.total > budget or pool < least_pool):
        least_budget = plan_memory_floor(cfg, sizes, source=source, extra=extra, depth=depth)
        raise ConfigError(
            f"memory_budget={budget} ({format_bytes(budget)}) is below the {least_budget} bytes "
            f"({format_bytes(least_budget)}) this loader needs: {_describe(plan, sizes)}; raise "
            "memory_budget, or lower batch_size, fanouts, extractors, samplers or queue depths")
    return plan


def warn_small_buffer(rows: int, sizes: Sizes) -> None:
    """A :class:`SmallBufferWarning` when a given ``buffer_rows`` is below the rows one batch is expected
    to read (capped at the node count): the loader stays correct (batches stream through in pieces)
    but each piece waits for the one before it, far slower than the default.  A warning, not a floor: the streaming tests run such buffers
    on purpose (``tests/loader/test_streaming.py``)."""
    floor = min(sizes.expected_rows, sizes.num_nodes)
    if rows < floor:
        warnings.warn(SmallBufferWarning(
            f"buffer_rows={rows} is below the {floor} rows one batch is expected to read: every batch streams through "
            "the feature buffer in pieces, correct but far slower (each piece waits for the one before it); "
            f"give at least {floor}, or leave buffer_rows out for the default"), stacklevel=3)


def check_fits_machine(plan: MemoryPlan, sizes: Sizes, available: int) -> None:
    """Refuse a plan larger than the host memory ``available`` now (``_units.available_memory``:
    ``MemAvailable`` under the process's memory cgroup limits): such a loader would only be killed
    later, or swap, part way through an epoch (``num_extractors=10**6`` once planned terabytes and
    delivered nothing while its memory climbed: ``tests/loader/test_machine_bounds.py``)."""
    if plan.total > available:
        raise ConfigError(
            f"this loader plans {plan.total} bytes ({format_bytes(plan.total)}) of host memory, more than the "
            f"{available} ({format_bytes(available)}) available to this process now: {_describe(plan, sizes)}; pass "
            "a smaller memory_budget, or lower batch_size, fanouts, num_extractors, num_samplers or queue depths")


def plan_memory_floor(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None,
                      depth: int | None = None) -> int:
    """The smallest budget that fits: the buffer's floor (or ``buffer_rows``), two expected batches'
    matrices, the smallest staging arenas and the extract queue's floor (``depth``: the foresight
    ``extra`` holds; None: the one asked for)."""
    cfg = replace(cfg, extract_queue=cfg.extract_capacity)
    io = IOConfig(**cfg.source_options) if source == "disk" else None
    stage = _stage_bytes(cfg, sizes, io, 0)
    rows = _least_buffer_rows(cfg, sizes) if cfg.buffer_rows is None else min(cfg.buffer_rows, sizes.num_nodes)
    # foresight asked for (a default one is left off where it does not fit), unless ``extra`` holds it already
    asked = 0 if "foresight" in (extra or {}) else foresight_bytes(cfg, sizes, cfg.foresight or 0)
    depth = (cfg.foresight or 0) if depth is None else depth
    return (rows * sizes.slot_bytes + _least_pool(cfg, sizes)
            + sum(_fixed_parts(cfg, sizes, source, stage, extra, rows, depth).values()) + asked)


def extract_depth(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None,
                  depth: int = 0) -> int:
    """The extract queue's depth: ``extract_queue`` if given, else its floor ``num_samplers + 2``
    deepened up to ``EXTRACT_QUEUE`` by as many worst-case subgraphs (and the rows they pin in the
    buffer's map, ``slot_map_bytes``) as fit in ``LOOKAHEAD_SHARE`` of the budget and in what the
    budget leaves above the floor (no budget: ``EXTRACT_QUEUE``); why deeper:
    ``LoaderConfig.extract_capacity``.  ``depth``: the foresight ``extra`` holds."""
    least = cfg.extract_capacity
    if cfg.extract_queue is not None or least >= EXTRACT_QUEUE:
        return least
    budget = cfg.budget_bytes
    if budget is None:
        return EXTRACT_QUEUE
    room = min(int(LOOKAHEAD_SHARE * budget),
               budget - plan_memory_floor(cfg, sizes, source=source, extra=extra, depth=depth))
    per_batch = SampledSubgraph.planned_bytes(sizes.max_rows, sizes.max_edges)
    if cfg.buffer_policy == "next-use":
        per_batch += next_use_bytes(0, sizes.max_rows)
    rows = _least_buffer_rows(cfg, sizes) if cfg.buffer_rows is None else min(cfg.buffer_rows, sizes.num_nodes)

    def map_at(q: int) -> int:  # the buffer's map with q batches queued (a step function of q)
        return slot_map_bytes(replace(cfg, extract_queue=q), sizes, rows, depth)

    extra_q = max(0, min(EXTRACT_QUEUE - least, room // per_batch))
    while extra_q and extra_q * per_batch + map_at(least + extra_q) - map_at(least) > room:
        extra_q -= 1
    return least + extra_q


def _least_pool(cfg: LoaderConfig, sizes: Sizes) -> int:
    return math.ceil(MIN_BATCHES * expected_batch_bytes(cfg, sizes))


def expected_batch_bytes(cfg: LoaderConfig, sizes: Sizes) -> int:
    """``b``: what one batch of the expected rows costs in flight (with its subgraph where delivery
    may hold it back, ``LoaderConfig.holds_back``)."""
    sub = SampledSubgraph.planned_bytes(sizes.expected_rows, sizes.max_edges) if cfg.holds_back else 0
    return sizes.expected_rows * batch_row_bytes(sizes.format, on_host=decodes_on_host(cfg.device)) + sub


def _least_buffer_rows(cfg: LoaderConfig, sizes: Sizes) -> int:
    return min(sizes.num_nodes, MIN_ROWS_PER_EXTRACTOR * cfg.num_extractors)


def _piece_buffer_rows(cfg: LoaderConfig, sizes: Sizes, room: int, slot: int) -> int:
    """The buffer's floor, raised towards its piece floor as far as ``room`` (what the budget leaves
    above the pool's floor) allows."""
    least = _least_buffer_rows(cfg, sizes)
    piece = min(sizes.num_nodes, cfg.num_extractors * min(PIECE_ROWS_PER_EXTRACTOR, sizes.expected_rows))
    return max(least, min(piece, room // slot))


def default_pool(cfg: LoaderConfig, sizes: Sizes) -> int:
    """Room for every batch that can be in flight at once, at the expected size: extracting,
    queued ready, held by the consumer."""
    return (cfg.ready_capacity + cfg.num_extractors + 1) * expected_batch_bytes(cfg, sizes)


def _stage_bytes(cfg: LoaderConfig, sizes: Sizes, io: IOConfig | None, budget: int | None) -> int:
    if io is None:
        return 0
    if "max_stage_bytes" in cfg.source_options:
        return arena_bytes(io.max_stage_bytes)
    least = least_arena_bytes(io.max_read_bytes, sizes.row_bytes)
    if budget is None:
        return max(least, arena_bytes(io.max_stage_bytes))
    if not budget:  # the least arena (``plan_memory_floor``)
        return least
    if sizes.rows_into_slots:  # staging is not the buffer's read path: what a chunk needs in flight
        return max(least, min(arena_bytes(io.max_stage_bytes), chunk_stage_bytes(cfg, sizes, io)))
    return max(least, min(arena_bytes(io.max_stage_bytes), _floor_pow2(budget // (16 * cfg.num_extractors))))


def chunk_stage_bytes(cfg: LoaderConfig, sizes: Sizes, io: IOConfig) -> int:
    """One staging arena where the source reads the buffer's rows straight into its slots
    (``Sizes.rows_into_slots``): room for the reads the device needs in flight, whichever kind a
    chunk holds: single rows (io_uring's depth, ``_read_depth.uring_depth``, times one row's aligned
    span) or, with a probe, merged reads of ``max_read_bytes`` (the depth that saturates the device at that size).  Why not
    a share of the budget (1/16 of it per extractor, still the rule where staging is the read path):
    io_uring reads aligned rows into the feature buffer's slots, so staging serves only other
    reads (the static and GPU tiers' loads), and a share of the budget was staging left unused.  Where
    staging is the read path (pread), small arenas made batches slower than large ones, hence the old rule
    there (papers-like batches, arenas compared by hand through ``source_options={"max_stage_bytes": ...}``;
    no benchmark sweeps them yet)."""
    span = aligned_span(sizes.stride)  # one row's aligned read, at the largest alignment
    depth, probe = uring_depth(cfg, sizes.stride), cfg.disk_probe
    merged = in_flight_for(probe, io.max_read_bytes) * io.max_read_bytes if probe is not None else 0
    return arena_bytes(max(depth * span, merged))


def bounce_bytes(cfg: LoaderConfig, sizes: Sizes) -> int:
    """The io_uring source's bounce pages (``features._bounce``) where it reads rows into the buffer's slots:
    ``PAGES_PER_READ`` per read in flight (the loader's depth, as ``chunk_stage_bytes`` finds it), at most
    ``BOUNCE_SHARE`` of the budget (whole pages; 0 where not one fits: reads then go vectored)."""
    io = IOConfig(**cfg.source_options)
    if io.bounce_bytes is not None:
        return io.bounce_bytes
    budget = cfg.budget_bytes
    return BouncePool.planned_bytes(uring_depth(cfg, sizes.stride), None if budget is None else int(BOUNCE_SHARE * budget))


def _floor_pow2(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1) if n > 0 else 0


def _fixed_parts(cfg: LoaderConfig, sizes: Sizes, source: str, stage: int,
                 extra: dict[str, int] | None = None, rows: int = 0, depth: int = 0) -> dict[str, int]:
    n, r, e = sizes.num_nodes, sizes.max_rows, cfg.num_extractors
    sub = SampledSubgraph.planned_bytes(r, sizes.max_edges)
    parts = {
        "slot table": slot_map_bytes(cfg, sizes, rows, depth),
        ("features in RAM" if source == "memory" else "staging"): _source_bytes(cfg, sizes, source, stage),
        "extractor work": e * extract_work_bytes(r),
        "sampler relabel": cfg.num_samplers * NeighborSampler.relabel_bytes(n, r),
        "sampler scratch": cfg.num_samplers * 3 * sub,
        "subgraphs": (cfg.extract_capacity + e + cfg.ready_capacity + 1) * sub,
    }
    if source == "disk" and sizes.rows_into_slots and stage:  # merged reads into slots go through it
        parts["read bounce"] = bounce_bytes(cfg, sizes)
    if cfg.buffer_policy == "next-use":  # its use chains: a head per node, a record per queued row
        parts["next-use chains"] = next_use_bytes(n, r * (cfg.extract_capacity + e))
    if cfg.ordered:  # batches sent out of turn (``_out_of_turn``); the others' matrices are the pool's
        parts["reorder buffer"] = math.ceil(OUT_OF_TURN_MARGIN * cfg.num_samplers * expected_batch_bytes(cfg, sizes))
    if cfg.history is not None:  # the records' one copy a step goes through it
        rows_over = cfg.device.startswith("cuda") and cfg.history.placement != "device"
        parts["history transfer"] = record_buffer_bytes(r, cfg.history.dim, rows_on_host=rows_over)
    if cfg.partitions is not None:
        parts["neighbor cache"] = int(cfg.neighbor_cache)
    if sizes.partition_bytes:  # partition mode's arrays in RAM and the macro blocks its samplers hold
        parts["partition arrays"] = sizes.partition_bytes
    if sizes.macro_block_bytes:
        parts["macro adjacency"] = macro_adjacency_bytes(cfg, sizes)
    return parts | (extra or {})


def macro_blocks(cfg: LoaderConfig, sizes: Sizes) -> int:
    """Macro blocks held at once: one in use or loading per sampler, and the store's idle ones it keeps
    for the interleaved macro batches (``MacroStore``: capacity samplers + interleave)."""
    return 2 * cfg.num_samplers + sizes.interleave


def macro_adjacency_bytes(cfg: LoaderConfig, sizes: Sizes) -> int:
    """What the ``B = macro_blocks`` blocks held at once take: at most ``B x M``, and at most
    ``T(ceil(B/2)) + T(floor(B/2))``, as the store holds blocks of two epochs only and one epoch's
    blocks hold disjoint partitions (``MacroStore``, ``PartitionBatching.macro_top_bytes``): ``k``
    blocks of one epoch and ``B - k`` of the other take at most ``T(k) + T(B - k)``, largest at
    ``k = B/2`` as ``T`` is concave (a sum of the largest partitions).  On papers-like's partitions the
    second bound is about half the first (``tests/partition/test_partition_memory.py`` checks the bytes
    held stay within it)."""
    blocks = macro_blocks(cfg, sizes)
    worst = blocks * sizes.macro_block_bytes
    top = sizes.macro_top_bytes
    if not top:
        return worst
    half = top[min(-(-blocks // 2), len(top) - 1)] + top[min(blocks // 2, len(top) - 1)]
    return min(worst, half)


def _source_bytes(cfg: LoaderConfig, sizes: Sizes, source: str, stage: int) -> int:
    if source == "disk":
        return StagingPool.planned_bytes(cfg.num_extractors, stage, IOConfig(**cfg.source_options).max_staging_bytes)
    if source == "memory":
        n, padded = sizes.num_nodes, sizes.stride != sizes.row_bytes
        return n * sizes.row_bytes + (n * sizes.stride if padded else 0)
    return 0


def _describe(plan: MemoryPlan, sizes: Sizes) -> str:
    parts = ", ".join(f"{name} {format_bytes(b)}" for name, b in plan.parts.items() if b)
    one = sizes.expected_rows * batch_row_bytes(sizes.format)  # as a CPU loader holds it
    return (f"{parts} (a buffer of {plan.buffer_rows} rows; one batch is expected to need {sizes.expected_rows} "
            f"rows, a {format_bytes(one)} matrix)")
