"""``HistoryConfig``: the knobs of the historical embedding cache (OUTRE §4.3, design §7).

``staleness`` is counted in optimizer steps on the loader's one clock (one step per delivered
batch); ``1`` turns the cache off (bit-identical to ``history=None``).  The candidate set is given
(``candidates``), or the nodes met most often in the hop-1 frontier while pre-sampling (hop 1 only,
cheap) the first epoch's plan, at most ``profile_batches`` batches spread evenly over it (default:
all of them), as many as ``budget`` bytes hold (see :func:`history_bytes`); with no budget, every
node met at least twice (once is enough when the batches counted are no more than ``staleness``): a
row met once an epoch is rarely met again within ``staleness`` steps, and would only take memory.

Why the whole epoch: the nodes met in the first batches only are the nodes of the graph's first
regions (partition batches dwell on one region at a time), while the nodes met twice over the whole
epoch are the ones that recur: fewer slots, and more of the hop-1 frontier pulled
(``benchmarks/bench_history_accuracy.py`` reports pulls per epoch).

``admission="grad"`` is FreshGNN's rule: of a batch's pushed rows only those whose gradient norm is
at most the batch's median are written, and the older row of a refused one is no longer offered.
``"all"`` writes every pushed row and lets later batches prune rows an earlier batch will push (the
samplers' lead costs no pulls); ``"grad"`` cannot promise a row it may refuse.  The default,
``"auto"``, is ``"grad"`` when ``staleness`` is at least one epoch's steps, else ``"all"``
(:func:`resolve_admission`): a row that lives past an epoch is reused by a model that has moved
further, where ``"grad"``'s refusals cost the least accuracy; within an epoch ``"all"`` keeps
accuracy as well and prunes several times as many rows (``benchmarks/bench_history_accuracy.py``
``--admission``; the figures are in docs/benchmarks.md).

``warmup``: the first ``warmup`` optimizer steps pull nothing (their pushes are written).  Early in
training the model changes fastest, and a row pushed then would be reused for up to ``staleness``
steps by a model that has moved on (``benchmarks/bench_history_accuracy.py --warmup``).
The default, ``staleness`` steps, costs the cache's savings for that many steps only: a small part of
an epoch on the large graphs the cache is for (OUTRE: staleness 100 against ~1,000 steps per epoch).

``window`` (completion order only): how many places a batch may overtake another.  The sampler of
batch ``seq`` cannot know when it will be trained, only that at most ``seq + window`` batches
precede it and at least ``seq - window`` do (``_delivery._Windowed``); so a pushed row must stay
valid ``window`` steps longer than in plan order, and a promised row (pushed by batch ``j``, pulled
by ``seq``) may be ``seq - j + 2 window`` steps old when used: the promiser early by ``window``, the
puller late by ``window``.  Both sides are real (batch ``j`` overtakes ``window`` batches, ``seq`` is
overtaken by ``window`` others; one schedule can do both), so the bound has to count the window
twice for promises; what can change is the window.  A window of samplers + extractors at any
staleness would spend ``2 window`` steps of a promise's reach, at a small staleness all of it, and
completion order would then save almost nothing over no history
(``benchmarks/bench_history_accuracy.py --orders completion --window``; docs/benchmarks.md, "rows
saved per epoch").  The default, :func:`default_window`, keeps ``2 window`` within a fifth of the
shortest lifetime: ``min(samplers + extractors, shortest lifetime // 10)``, so 0 at
staleness 10 (the delivery then follows plan order: order freedom would cost most of the savings),
1 at staleness 20, samplers + extractors from staleness ~80 on, where it costs at most a fifth of
a promise's reach.  ``window=`` overrides it.

``jitter``: each pushed row lives a pseudo-random number of steps in ``[(1 - jitter) staleness,
staleness]`` (:func:`~outre_async.cache._history.lifetimes`), so rows pushed together do not all
expire together; the bound on the realised staleness is unchanged, rows are refreshed a little more
often (mean lifetime ``(1 - jitter / 2) staleness``).

``placement``: where the table's rows of h^(L-1) live (:func:`resolve_placement`).  ``"device"``: on
the loader's ``device``, so a pull is a gather and a push a scatter there, with no host round trip
(the rows are produced and consumed on that device); ``"host"``: in host memory (page-locked when the
device is CUDA), each pull gathered on the host and copied over with its batch, each push copied
back; ``"auto"`` (default): ``"device"`` when the device is a GPU and the rows, ``C x 4 dim`` bytes,
fit in ``device_budget`` (default: a quarter of the GPU's memory, :data:`DEVICE_SHARE`), else
``"host"``.  Only the rows move: the node -> slot map, the push stamps, the retired flags and the
validity copies stay on the host, where the pull decision is made (the sampler decides on the
host at sampling time, the loop thread keeps the one clock), so the staleness bound and the
pipeline-lag rules are the same code whichever the placement.  ``budget`` still sizes the table as a
whole (:func:`history_bytes`, wherever its parts live); the memory plan counts the host parts in
``memory_budget`` and the rows as device memory (both as host memory on a CPU device).  A profile's
knapsack prices a slot the same way (:func:`slot_prices`): rows on a GPU cost ``memory_budget`` only
the slot's bookkeeping, and the device budget bounds them in slots; the plan then names the placement
the loader uses.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from outre_async.errors import ConfigError
from outre_async._units import parse_bytes
from outre_async.store._row_format import RowFormat

ADMISSIONS = ("auto", "all", "grad")
PLACEMENTS = ("auto", "host", "device")
# placement "auto": the share of a GPU's memory the rows may take by default.  A chosen bound, not a
# measured one: it leaves three quarters to the model, its optimizer state and activations, the batches
# in flight and the GPU feature tier, and still holds 20 GB of rows on an 80 GB GPU (40M slots of 128
# floats; igb-like's table has 115k).  ``device_budget=`` replaces it.
DEVICE_SHARE = 0.25


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class HistoryConfig:
    """Knobs of ``OutreLoader(..., history=HistoryConfig(...))`` (compared by identity: it may hold an array)."""

    staleness: int                   # optimizer steps a pulled row may be old; 1 = off
    dim: int                         # width of h^(L-1), the last layer's input
    budget: int | str | None = None  # bytes for the table (history_bytes); None: every profiled candidate
    candidates: ArrayLike | None = None  # node ids to cache; None: the hop-1 frontier's most frequent
    admission: str = "auto"          # "all", "grad" (FreshGNN: gradient norm <= the batch's median) or "auto"
    window: int | None = None        # completion order: how far a batch may overtake; None: default_window()
    profile_batches: int | None = None  # batches pre-sampled (hop 1 only) to rank candidates; None: one epoch
    warmup: int | None = None        # optimizer steps with no pulls (pushes still written); None: staleness
    jitter: float = 0.5              # a row's lifetime is drawn in [(1 - jitter) staleness, staleness]
    placement: str = "auto"          # the rows on the loader's device ("device"), in host memory ("host") or "auto"
    device_budget: int | str | None = None  # "auto": device bytes the rows may take; None: DEVICE_SHARE of the GPU

    def __post_init__(self) -> None:
        for name in ("staleness", "dim", "profile_batches"):
            value = getattr(self, name)
            if name == "profile_batches" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ConfigError(f"history {name}={value!r} must be an int >= 1")
        if isinstance(self.budget, str):
            object.__setattr__(self, "budget", parse_bytes(self.budget))
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(self.budget, int)
                                        or self.budget < 1):
            raise ConfigError(f"history budget={self.budget!r} must be a byte count >= 1 (or None)")
        if self.warmup is None:
            object.__setattr__(self, "warmup", self.staleness if self.staleness > 1 else 0)
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, numbers.Integral) or self.warmup < 0:
            raise ConfigError(f"history warmup={self.warmup!r} must be an int >= 0 (steps without pulls) or None")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, numbers.Real) or not 0 <= self.jitter < 1:
            raise ConfigError(f"history jitter={self.jitter!r} must be a number in [0, 1) (share of staleness)")
        if self.window is not None and (isinstance(self.window, bool) or not isinstance(self.window, int)
                                        or self.window < 0):
            raise ConfigError(f"history window={self.window!r} must be an int >= 0 (or None)")
        if self.admission not in ADMISSIONS:
            raise ConfigError(f"history admission={self.admission!r} must be one of {ADMISSIONS}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"history placement={self.placement!r} must be one of {PLACEMENTS}")
        if isinstance(self.device_budget, str):
            object.__setattr__(self, "device_budget", parse_bytes(self.device_budget))
        if self.device_budget is not None and (isinstance(self.device_budget, bool) or not isinstance(
                self.device_budget, int) or self.device_budget < 0):
            raise ConfigError(f"history device_budget={self.device_budget!r} must be a byte count >= 0 (or None: "
                              f"{DEVICE_SHARE:.0%} of the GPU's memory)")
        if self.candidates is not None:
            ids = np.asarray(self.candidates)
            if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
                raise ConfigError(f"history candidates must be a 1-D array of node ids, got {ids.dtype} {ids.shape}")
            object.__setattr__(self, "candidates", np.unique(ids.astype(np.int64)))

    @property
    def enabled(self) -> bool:
        return self.staleness > 1


def history_for(staleness: int, dim: int) -> HistoryConfig | None:
    """The history a run's ``staleness`` asks for (``outre train``, ``quickstart``, ``outre profile``):
    none at 1 (every row recomputed, nothing to cache), else ``dim``-wide rows at most ``staleness``
    steps old with every other knob at its default."""
    return HistoryConfig(staleness=staleness, dim=dim) if staleness > 1 else None


def resolve_admission(cfg: HistoryConfig, steps_per_epoch: int) -> str:
    """The admission rule a loader runs: ``cfg.admission``, with ``"auto"`` made ``"grad"`` when a row
    may be reused for an epoch or more (``staleness >= steps_per_epoch``; see the module docstring)
    and ``"all"`` otherwise."""
    if cfg.admission != "auto":
        return cfg.admission
    return "grad" if cfg.staleness >= max(steps_per_epoch, 1) else "all"


def min_lifetime(staleness: int, jitter: float) -> int:
    """The shortest lifetime a pushed row can draw (``cache._history.lifetimes``)."""
    return staleness - int(jitter * (staleness - 1))


def default_window(cfg: HistoryConfig, num_samplers: int, num_extractors: int) -> int:
    """The overtaking window of completion order (module docstring): ``cfg.window``, else samplers +
    extractors capped so that twice the window is at most a fifth of the shortest lifetime."""
    if cfg.window is not None:
        return cfg.window
    return min(num_samplers + num_extractors, min_lifetime(cfg.staleness, cfg.jitter) // 10)


def history_bytes(num_nodes: int, slots: int, dim: int, num_samplers: int) -> int:
    """Memory of the cache: ``4 N`` (node -> slot) ``+ C (4 dim + 8)`` (rows, stamps) ``+ 8 C`` (the
    slots' node ids, ``HistoryTable.nodes``) ``+ 4 C`` (the epoch's promises) ``+ C`` (retired flags,
    admission "grad") ``+ C num_samplers`` (one validity snapshot per sampling batch in flight)."""
    return 4 * num_nodes + slots * history_slot_bytes(dim, num_samplers)


def history_slot_bytes(dim: int, num_samplers: int, *, rows_on_host: bool = True) -> int:
    """Bytes of one slot (:func:`history_bytes`); ``rows_on_host=False``: its host bytes when its row
    lives in a GPU's memory (placement ``"device"``), the bookkeeping alone."""
    return (table_row_bytes(dim) if rows_on_host else 0) + SLOT_BOOKKEEPING + num_samplers


SLOT_BOOKKEEPING = 8 + 8 + 4 + 1  # per slot on the host whatever the placement: stamp, node id, promise, retired


def device_row_budget(cfg: HistoryConfig, device_memory: int | None) -> int:
    """Device bytes the rows may take: ``cfg.device_budget``, else :data:`DEVICE_SHARE` of the
    device's memory (unknown: 0)."""
    return int(cfg.device_budget) if cfg.device_budget is not None else int(DEVICE_SHARE * (device_memory or 0))


@dataclass(frozen=True, kw_only=True, slots=True)
class SlotPrice:
    """How the profile's knapsack prices a history slot under one placement (:func:`slot_prices`):
    its host bytes (``memory_budget``'s share) and the most slots the device holds (None: no bound
    but the host budget)."""

    placement: str             # "host" or "device": what the loader is then told (``HistoryConfig.placement``)
    host_bytes: int            # per slot, on the host
    max_slots: int | None      # the device budget in slots (rows on a GPU), else None


def slot_prices(cfg: HistoryConfig, device_type: str, device_memory: int | None, num_samplers: int) -> list[SlotPrice]:
    """The placements a plan may give the table, each with its price (the profile solves each and
    keeps the best): rows on the host cost ``4 dim`` host bytes a slot; rows on a GPU cost none of
    ``memory_budget`` (only the bookkeeping stays there: module docstring) and are bounded by the
    device budget, ``device_row_budget // 4 dim`` slots.  A CPU device's memory is the host's, so a
    ``"device"`` table there is priced as a host one (its rows are host memory: the loader counts
    them in ``memory_budget``, ``HistoryTable.device_bytes``).  ``"auto"`` on a GPU offers both: the
    device's rows while they fit its budget, or the host's when the host budget buys more."""
    host = SlotPrice(placement="host", host_bytes=history_slot_bytes(cfg.dim, num_samplers), max_slots=None)
    if device_type == "cpu":
        return [host if cfg.placement != "device" else replace(host, placement="device")]
    budget = device_row_budget(cfg, device_memory)
    device = SlotPrice(placement="device", host_bytes=history_slot_bytes(cfg.dim, num_samplers, rows_on_host=False),
                       max_slots=budget // history_row_bytes(1, cfg.dim))
    if cfg.placement == "device":
        return [device]
    if cfg.placement == "host":
        return [host]
    return [device, host] if device.max_slots else [host]


def history_row_bytes(slots: int, dim: int) -> int:
    """Bytes of the table's rows alone (float32 h^(L-1)): the part ``placement`` may put on the device."""
    return table_row_bytes(dim) * slots


def table_row_bytes(dim: int) -> int:
    """Bytes of one table row: ``h^(L-1)`` of ``dim`` values, held as float32 (``HistoryTable.rows``)."""
    return RowFormat.float32(dim).held_row_bytes if dim else 0


RECORD_MIN_BUFFER = 4096  # the record transfer's smallest host buffer (it grows by powers of two)


def record_buffer_bytes(max_rows: int, dim: int, *, rows_on_host: bool) -> int:
    """The most host bytes the records' reused transfer buffer (``cache._record_transfer``) reaches for
    batches of at most ``max_rows`` rows: per batch ``8 (4 p + q)`` bytes of indices, ages, degrees and
    slots (``p`` rows pulled, ``q`` pushed, each at most ``max_rows``) plus ``4 p dim`` for the pulled
    rows when a host table's rows cross to a GPU (``rows_on_host``), grown to a power of two."""
    need = 8 * 5 * max_rows + (max_rows * table_row_bytes(dim) if rows_on_host else 0)
    return max(RECORD_MIN_BUFFER, 1 << max(0, (need - 1).bit_length()))


def resolve_placement(cfg: HistoryConfig, device_type: str, row_bytes: int, device_memory: int | None) -> str:
    """Where the rows live, ``"host"`` or ``"device"`` (module docstring): ``cfg.placement``, with
    ``"auto"`` made ``"device"`` on a GPU (``device_type`` not ``"cpu"``) whose budget holds
    ``row_bytes`` (``cfg.device_budget``, else :data:`DEVICE_SHARE` of ``device_memory``, its total
    bytes; unknown: 0).  ``"device"`` asked for rows larger than the whole device is a
    :class:`ConfigError` (torch's out-of-memory would come later, from inside the first epoch)."""
    if cfg.placement == "device" and device_memory is not None and row_bytes > device_memory:
        raise ConfigError(f"history placement='device': the table's rows take {row_bytes} bytes, more than the "
                          f"device's {device_memory}; lower the history budget, or use placement='host' or 'auto'")
    if cfg.placement != "auto":
        return cfg.placement
    if device_type == "cpu":
        return "host"
    return "device" if row_bytes <= device_row_budget(cfg, device_memory) else "host"


def slots_for_budget(budget: int, num_nodes: int, dim: int, num_samplers: int) -> int:
    """How many slots ``budget`` bytes hold; a :class:`ConfigError` below one slot."""
    per_slot = history_slot_bytes(dim, num_samplers)
    slots = (budget - 4 * num_nodes) // per_slot
    if slots < 1:
        raise ConfigError(f"history budget={budget} bytes is smaller than one slot: 4 x {num_nodes} nodes + "
                          f"{per_slot} bytes per slot (dim {dim}) = {4 * num_nodes + per_slot}; raise it")
    return int(slots)
