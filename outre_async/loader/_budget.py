"""How ``memory_budget`` is spent: every part an :class:`OutreLoader` allocates, sized to fit.

A pure function of the config and the dataset's sizes (tested with numbers, like the cache split).
With ``N`` nodes, feature ``dim``, ``R`` = the most rows one batch can need and ``E`` = the most
edges one batch can sample, the loader holds at most::

    slot table        8 N                                   (the buffer's node -> slot map)
    feature buffer    rows x (4 dim + 40)                   (rows + bookkeeping: node, refs, LRU)
    staging           2 x extractors x S                    (two chunks in flight per extractor;
                                                             S = one staging arena, a power of two)
    extractor work    extractors x (32 R + 1 MiB)           (unique ids, inverse, gather blocks)
    sampler scratch   samplers x (4 N + 3 sub)              (relabel table + the kernel's growth)
    subgraphs         (extract_queue + extractors + ready_queue + 1) x sub,   sub = 8 R + 24 E (n_id, edges, e_id)
    batches           (ready_queue + extractors + 1) x R x (4 dim + 33)      (matrix, labels, input_id, lease)
    ordered mode      + (samplers + extract_queue + extractors + ready_queue) x (sub + batch)
    history table     4 N + C x (4 dim + 8 + samplers)      (with ``history=``: C cached h^(L-1) rows)

``memory`` backend: the feature matrix in RAM (and the raw file while loading a padded layout) takes
the staging line's place; an injected ``source=`` is its owner's and is not counted. Given a budget,
``S`` is the largest power of two at most 1/8 of the budget over ``2 x extractors`` (at most
``max_stage_bytes``, at least one read: ``max_read_bytes`` or one row span; halved while one batch
of buffer rows would not fit), and the buffer gets what is left; a budget that leaves less than one
batch of rows is a :class:`ConfigError` naming the minimum. Not counted: the interpreter, torch and
numba themselves (the *baseline* the benchmark subtracts), thread stacks, page cache of the memory-
mapped ``indices`` (or ``indices`` itself when the dataset holds it in RAM), and partition mode's
macro-batch adjacency (``neighbor_cache`` has its own byte count).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import ConfigError
from .._units import format_bytes
from ..features._disk_source import IOConfig
from ..features._staging import GATHER_BLOCK, arena_bytes
from ._config import LoaderConfig

SLOT_BYTES = 40     # per buffer slot besides its row: node id 8, refs 4, valid 1, LRU links 16, slack
LEASE_BYTES = 33    # per row of a batch besides its features: labels 8, input_id 8 (per seed), lease ids + slots 16, actions 1
_SPAN_SLACK = 8192  # an aligned row span passes its row by at most two 4 KiB sectors


@dataclass(frozen=True, kw_only=True, slots=True)
class Sizes:
    """What the plan needs to know about the dataset and the batches."""

    num_nodes: int
    dim: int
    row_bytes: int      # bytes of one stored row (dim x itemsize)
    stride: int         # bytes between stored rows
    max_rows: int       # R
    max_edges: int      # E


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryPlan:
    """The loader's parts in bytes (``parts``), the buffer rows and the staging arena they imply."""

    buffer_rows: int
    stage_bytes: int            # S (0 when the source is not a disk source the loader opens)
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def source_options(self) -> dict[str, int]:
        """Staging sizes for the disk source the loader opens (empty when it opens none)."""
        if not self.stage_bytes:
            return {}
        return {"max_stage_bytes": self.stage_bytes, "max_staging_bytes": self.parts["staging"]}


def plan_memory(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None) -> MemoryPlan:
    """Size every part; ``source`` is ``"disk"``, ``"memory"`` or ``"injected"`` (see the module); ``extra``
    names parts other owners size (the history table), taken out of the budget before the buffer."""
    budget = cfg.budget_bytes
    io = IOConfig(**cfg.source_options) if source == "disk" else None
    slot = 4 * sizes.dim + SLOT_BYTES
    stage = _stage_bytes(cfg, sizes, io, budget)
    if budget is not None:  # smaller arenas rather than fewer rows than one batch needs
        least, rows_needed = _stage_bytes(cfg, sizes, io, 0), (cfg.buffer_rows or sizes.max_rows) * slot
        while stage > least and sum(_fixed_parts(cfg, sizes, source, stage, extra).values()) + rows_needed > budget:
            stage //= 2
    fixed = _fixed_parts(cfg, sizes, source, stage, extra)
    if cfg.buffer_rows is not None:
        rows = min(cfg.buffer_rows, sizes.num_nodes)
    elif budget is not None:
        rows = min(max(0, (budget - sum(fixed.values())) // slot), sizes.num_nodes)
    else:
        rows = min((cfg.num_extractors + 1) * sizes.max_rows, sizes.num_nodes)
    plan = MemoryPlan(buffer_rows=rows, stage_bytes=stage, parts={"feature buffer": rows * slot, **fixed})
    if budget is not None and (plan.total > budget or rows < sizes.max_rows):
        least = plan_memory_floor(cfg, sizes, source=source, extra=extra)
        raise ConfigError(
            f"memory_budget={budget} ({format_bytes(budget)}) is below the {least} bytes "
            f"({format_bytes(least)}) this loader needs: {_describe(plan, sizes.max_rows)}; raise "
            "memory_budget, or lower batch_size, fanouts, extractors, samplers or queue depths")
    return plan


def plan_memory_floor(cfg: LoaderConfig, sizes: Sizes, *, source: str, extra: dict[str, int] | None = None) -> int:
    """The smallest budget that fits: one batch of buffer rows and the smallest staging arenas."""
    io = IOConfig(**cfg.source_options) if source == "disk" else None
    stage = _stage_bytes(cfg, sizes, io, 0)
    rows = min(sizes.max_rows, sizes.num_nodes) if cfg.buffer_rows is None else cfg.buffer_rows
    return rows * (4 * sizes.dim + SLOT_BYTES) + sum(_fixed_parts(cfg, sizes, source, stage, extra).values())


def _stage_bytes(cfg: LoaderConfig, sizes: Sizes, io: IOConfig | None, budget: int | None) -> int:
    if io is None:
        return 0
    if "max_stage_bytes" in cfg.source_options:
        return arena_bytes(io.max_stage_bytes)
    least = arena_bytes(max(io.max_read_bytes, sizes.row_bytes + _SPAN_SLACK))
    if budget is None:
        return max(least, arena_bytes(io.max_stage_bytes))
    return max(least, min(arena_bytes(io.max_stage_bytes), _floor_pow2(budget // (16 * cfg.num_extractors))))


def _floor_pow2(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1) if n > 0 else 0


def _fixed_parts(cfg: LoaderConfig, sizes: Sizes, source: str, stage: int,
                 extra: dict[str, int] | None = None) -> dict[str, int]:
    n, r, e = sizes.num_nodes, sizes.max_rows, cfg.num_extractors
    sub = 8 * r + 24 * sizes.max_edges  # n_id, edge_index, e_id
    batch = r * (4 * sizes.dim + LEASE_BYTES)
    scratch = 4 if n <= 2**31 - 1 else 8
    parts = {
        "slot table": 8 * n,
        ("features in RAM" if source == "memory" else "staging"): _source_bytes(cfg, sizes, source, stage),
        "extractor work": e * (32 * r + GATHER_BLOCK),
        "sampler scratch": cfg.num_samplers * (scratch * n + 3 * sub),
        "subgraphs": (cfg.extract_capacity + e + cfg.ready_capacity + 1) * sub,
        "batches": (cfg.ready_capacity + e + 1) * batch,
    }
    if cfg.ordered:
        parts["reorder buffer"] = (cfg.num_samplers + cfg.extract_capacity + e + cfg.ready_capacity) * (sub + batch)
    if cfg.partitions is not None:
        parts["neighbor cache"] = int(cfg.neighbor_cache)
    return parts | (extra or {})


def _source_bytes(cfg: LoaderConfig, sizes: Sizes, source: str, stage: int) -> int:
    if source == "disk":
        io = IOConfig(**cfg.source_options)
        held = 2 * cfg.num_extractors * stage
        return held if io.max_staging_bytes is None else max(held, io.max_staging_bytes)
    if source == "memory":
        n, padded = sizes.num_nodes, sizes.stride != sizes.row_bytes
        return n * sizes.row_bytes + (n * sizes.stride if padded else 0)
    return 0


def _describe(plan: MemoryPlan, max_rows: int) -> str:
    parts = ", ".join(f"{name} {format_bytes(b)}" for name, b in plan.parts.items() if b)
    return f"{parts} (a buffer of {plan.buffer_rows} rows; one batch can need {max_rows})"
