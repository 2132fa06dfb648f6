"""``OutreLoader(..., memory_budget=B, cache=CacheOptions(profile=NAME))``: profile the loader's own plan, split B, apply it.

The budget is the loader's whole memory (``_budget``).  First the fixed parts are sized with the
feature buffer at its default, ``(extractors + 1)`` probed batches' worth of rows (or, when that does not
fit, the rows that fit, and no caches); what is left is the *cache budget* the knapsack splits
between static feature rows, history slots and (partition mode) neighbour lists.  Applying a plan
gives the config the loader runs with (the validated one with the plan's buffer rows,
``neighbor_cache`` bytes and history candidates; the :class:`LoaderSetup` keeps the validated one) and
adds the static cache as one more part of the memory plan, so ``stats()["memory"]`` shows every part
and their sum stays within B.

This is the half of profiling the loader itself needs (``profile="auto"`` profiles while the loader
is built, and every step prices the loader's own memory plan, ``_budget``), so it lives in the loader;
``oa.profile`` and ``outre profile``, which only *call* the loader's setup and this module, are the
``profiling`` room above it.

With ``gpu_cache_budget`` (``_tiers``), the GPU tier is a tier of its own budget (device memory): it
holds the rows met most often in the plan's first batches, so the host tiers never read those rows
(:func:`host_counts`: their reads, and the reads a history would spare under them, are zero) and the
knapsack buys other rows; its host table (``4 N``) comes out of the cache budget.  The tier is not
free: its own costs per hit (a gather from the device table) and per miss (the host row copied to
the device) are measured on the training device with the other costs (``meta["costs"]["gpu_hit_us"]``,
``["gpu_miss_us"]``), priced into what a history slot spares and into the predicted epoch
(``plan._budget_plan``); ``meta["gpu_tier"]`` reports its rows, the row reads it spares and its
assembly's predicted seconds per epoch.

With ``history=``, a slot is priced at its host bytes under the placement it will have
(``cache.slot_prices``, :func:`history_prices`): on a GPU whose budget holds them the rows are device
memory, so a slot costs the cache budget only its bookkeeping (``21 + samplers`` bytes against ``4 h``
more on the host) and the device budget bounds the slots; ``"auto"`` solves the knapsack for both
placements and keeps the better, and :func:`apply` sets that placement on the loader's history, so
the host part the loader counts (``HistoryTable.host_bytes``) is the plan's ``split["history"]``.  A
pulled row's own cost under that placement (``pull_host_us`` / ``pull_device_us``, measured through
the record's transfer) is netted from what the slot spares.

``profile=NAME`` reads ``profile/NAME/`` (refused with a named error if it was measured on another
dataset, another version of it, or another loader setup); ``profile="auto"`` reads
``profile/auto-<hash of the setup>/`` if present, else profiles the first ``AUTO_BATCHES`` batches of
the plan now (seconds; ``stats()["profile"]["seconds"]`` says how long) and caches the result there
(kept in memory only when the dataset folder is read-only).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..cache._history_config import SlotPrice, default_window, slot_prices
from ..features._gpu_tier import gpu_cache_bytes, gpu_index_bytes
from ..machine._device import device_memory
from ..plan._budget_plan import choose, knapsack_input, predict
from ..plan._costs import MissCosts, measure_costs
from ..plan._counts import Counts, presample
from ..plan._files import Profile, profile_path, read_profile, write_profile
from ._budget import MemoryPlan, default_pool
from ._config import LoaderConfig
from ._read_depth import io_depth
from ._setup import LoaderSetup
from ._tiers import gpu_rows

if TYPE_CHECKING:
    import torch

AUTO = "auto"
AUTO_BATCHES = 64  # batches the loader pre-samples when it profiles itself (``outre profile``: --batches)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AppliedPlan:
    config: LoaderConfig        # what the loader runs with (buffer rows, neighbour cache, history candidates)
    static_rows: np.ndarray     # node ids of the static feature cache
    neighbor_nodes: np.ndarray  # node ids whose lists the neighbour cache holds (partition mode)
    info: dict[str, Any]        # for stats()["profile"]

    @property
    def held_bytes(self) -> int:
        """The plan's node lists the loader keeps (a memory plan part; the history candidates are the
        history table's own ``nodes``, counted there)."""
        return int(self.static_rows.nbytes + self.neighbor_nodes.nbytes)


def profile_setup(setup: LoaderSetup, cfg: LoaderConfig) -> dict[str, Any]:
    """What a profile is tied to: every knob that changes the batches, their order or the budget.
    ``memory_budget`` is the rank's (``LoaderSetup.budget``): a host's budget over its ranks is the
    same profile as that share for one rank of the run.  Rank and world size, as a rank plans its share
    of the epoch (``LoaderSetup.first_plan``); only when several, so one process's profiles made before
    they were recorded still match."""
    seeds, place = setup.seeds, setup.place
    h = cfg.history
    offered = [[p.placement, p.host_bytes, p.max_slots] for p in history_prices(cfg, setup.device)]
    return {"fanouts": list(cfg.fanouts), "batch_size": cfg.batch_size, "seed": cfg.seed, "shuffle": cfg.shuffle,
            "drop_last": cfg.drop_last, "ordered": cfg.ordered, "num_seeds": len(seeds),
            "seeds_crc32": zlib.crc32(np.ascontiguousarray(seeds, np.int64).tobytes()),
            **({"rank": place.rank, "world_size": place.world_size} if place.world_size > 1 else {}),
            "partitions": cfg.partitions, "parts_per_batch": cfg.parts_per_batch, "interleave": cfg.interleave,
            "memory_budget": setup.budget, "num_samplers": cfg.num_samplers, "num_extractors": cfg.num_extractors,
            "backend": cfg.backend, "staleness": h.staleness if h else None, "history_dim": h.dim if h else None,
            "history_window": h.window if h else None,
            # only when on, so profiles made before the GPU tier existed still match a loader without it
            **({"gpu_cache_budget": int(cfg.gpu_cache_budget)} if cfg.gpu_cache_budget else {}),
            # likewise only when the history's rows may go to a GPU: the plan priced its slots for that device
            **({"history_prices": offered} if any(p[2] is not None for p in offered) else {})}


def auto_name(setup: dict[str, Any], split: object) -> str:
    digest = hashlib.sha256(json.dumps({**setup, "cache_split": split}, sort_keys=True).encode()).hexdigest()
    return f"auto-{digest[:12]}"


def base_memory(setup: LoaderSetup, cfg: LoaderConfig) -> tuple[MemoryPlan, int]:
    """The fixed parts with the default buffer, and the bytes of the rank's budget left for the caches."""
    sizes, budget = setup.sizes, int(setup.budget or 0)
    # the buffer's default: (extractors + 1) batches of the probed real rows (it is a cache that
    # batches stream through, _budget); the static cache then competes for the rest
    rows = min((cfg.num_extractors + 1) * sizes.expected_rows, sizes.num_nodes)
    # history stays on: in completion order the leases of batches it may hold back count their subgraphs
    # (``LoaderConfig.holds_back``), so the pool the caches leave room for is the loader's
    bare = dataclasses.replace(cfg, buffer_rows=rows, neighbor_cache=0, profile=None)
    try:
        mem = setup.memory_plan(bare)
    except ConfigError:  # the default buffer does not fit: the budget sizes it, nothing is left for caches
        return setup.memory_plan(dataclasses.replace(bare, buffer_rows=None)), 0
    # with the buffer's rows given, the batch pool takes whatever is left: keep it at its default and
    # let the caches compete for the rest (the loader's plan gives the pool what they leave)
    pool = min(mem.parts["batches"], default_pool(bare, sizes))
    mem = dataclasses.replace(mem, parts={**mem.parts, "batches": pool})
    return mem, max(0, budget - mem.total)


def run_profile(setup: LoaderSetup, cfg: LoaderConfig, *, name: str | None, max_batches: int, progress: bool = False,
                costs: MissCosts | None = None, step_seconds: float | None = None,
                prices: list[SlotPrice] | None = None) -> Profile:
    """Profile the plan of ``setup`` with ``cfg`` (its config with the history and the split to profile
    for) and choose the split (module docstring); written when ``name`` is given.  ``costs`` replaces
    the measurement (a plan is then a function of the seed alone: the tests); ``step_seconds``: the
    training step is a fixed wait of that long per batch (``outre bench --step-ms``), so a batch row
    costs no compute and a history slot spares none (``MissCosts.step_us``); ``prices`` replaces the
    history's slot prices of :func:`history_prices` (a GPU's priced with numbers on a CPU: the tests)."""
    from tqdm import tqdm

    ds, partitioned, kind = setup.dataset, setup.partitioned, setup.source_kind

    started = time.perf_counter()
    mem, cache_budget = base_memory(setup, cfg)
    if cfg.gpu_cache_budget:  # the GPU tier's node -> slot table is host memory the caches cannot have
        cache_budget = max(0, cache_budget - gpu_index_bytes(ds.num_nodes))
    h = cfg.history
    window = 0 if cfg.ordered or h is None else default_window(h, cfg.num_samplers, cfg.num_extractors)
    prices = history_prices(cfg, setup.device) if prices is None else prices
    # as many candidates as the cheapest placement's slots the budget (and the device) could hold
    most = max((min(cache_budget // p.host_bytes, cache_budget if p.max_slots is None else p.max_slots)
                for p in prices), default=0)
    plan = setup.first_plan  # this rank's epoch 0, as the loader runs it
    with tqdm(total=min(len(plan), max_batches), unit="batch", desc="profile", disable=not progress) as bar:
        counts = presample(ds, plan, fanouts=cfg.fanouts, seed=cfg.seed, stream_base=0, max_batches=max_batches,
                           buffer_rows=mem.buffer_rows, horizon=h.staleness - window if h else -1,
                           max_candidates=most if h else 0,
                           assignment=partitioned.parts.assignment if partitioned is not None else None,
                           progress=bar.update)
    sampled = time.perf_counter()
    host, gpu, held = host_counts(counts, cfg, ds, plan,
                                  stream_base=partitioned.stream_base(0) if partitioned is not None else 0)
    costs = costs or measure_costs(ds, backend="memory" if kind == "memory" else cfg.backend,
                          batch_rows=max(1, counts.accesses // max(counts.batches, 1)),
                          num_extractors=cfg.num_extractors, hidden=h.dim if h else ds.feature_dim, seed=cfg.seed,
                          fanouts=list(cfg.fanouts), device=cfg.device, shapes=counts.shapes,
                          gpu_rows=len(held) if held is not None else 0,
                          history_dim=h.dim if h else 0, pull_placements=[p.placement for p in prices],
                          source_options={**mem.source_options(), **_io_options(cfg, ds.row_layout.stride)} if kind == "disk" else None)
    if step_seconds is not None:
        costs = dataclasses.replace(costs, recompute_us=0.0, step_us=float(step_seconds) * 1e6)
    measured = time.perf_counter()
    list_bytes = None
    if partitioned is not None:
        list_bytes = np.diff(ds.indptr) * ds.indices.dtype.itemsize + 16
    options = []
    placements: list[SlotPrice | None] = [*prices] or [None]
    for offered in placements:  # each placement the config allows, priced as it will be; the better kept
        inp = knapsack_input(host, costs, num_nodes=ds.num_nodes, row=ds.row_format, hist_dim=h.dim if h else None,
                             num_samplers=cfg.num_samplers, list_bytes=list_bytes, gpu_held=held, price=offered)
        options.append((*choose(inp, cache_budget, cfg.cache_split), offered))
    choice, alpha, price = max(options, key=lambda o: o[0].saved_us)  # ties: the first (the device's rows)
    done = time.perf_counter()
    scale = counts.epoch_batches / max(counts.batches, 1)
    meta = {"setup": profile_setup(setup, cfg), "cache_split": cfg.cache_split, "alpha": alpha,
            "costs": {**costs.to_json(), "sample_spread": round(counts.sample_spread, 4)},
            "memory": {"budget": setup.budget, "fixed": mem.total - mem.parts["feature buffer"],
                       "feature_buffer": mem.parts["feature buffer"], "buffer_rows": mem.buffer_rows,
                       "cache_budget": cache_budget, "split": choice.bytes},
            "plan": {"static_rows": len(choice.features), "history_slots": len(choice.history),
                     "neighbor_lists": len(choice.neighbors), "saved_us": choice.saved_us,
                     **({"history_placement": price.placement, "history_slot_host_bytes": price.host_bytes,
                         "history_max_slots": price.max_slots} if price is not None else {})},
            "predicted": predict(host, costs, choice, sample_seconds=counts.sample_seconds * scale, gpu_held=held),
            "gpu_tier": gpu_info(gpu, host, costs, held),
            "counts": {"batches": counts.batches, "epoch_batches": counts.epoch_batches, "candidates": len(counts.cand),
                       "accesses": counts.accesses},
            "seconds": {"presample": sampled - started, "costs": measured - sampled, "solve": done - measured,
                        "total": done - started},
            "io": probe_record(cfg, ds.row_layout.stride)}
    arrays = {"static_rows": choice.features, "history_nodes": np.sort(choice.history),
              "neighbor_nodes": choice.neighbors, "row_hot": counts.row_hot, "list_hot": counts.list_hot}
    path = write_profile(ds, name, meta, arrays) if name is not None else profile_path(ds, "unsaved")
    return Profile(path=path, meta=meta, arrays=arrays)


def history_prices(cfg: LoaderConfig, device: torch.device) -> list[SlotPrice]:
    """How a history slot is priced under each placement the config allows on its device
    (``cache.slot_prices``; empty without a history): rows on a GPU cost the host budget only their
    bookkeeping, up to the device budget's slots."""
    h = cfg.history
    if h is None:
        return []
    return slot_prices(h, device.type, device_memory(device), cfg.num_samplers)


def host_counts(counts: Counts, cfg: LoaderConfig, ds: Any, plan: Any, *,
                stream_base: int = 0) -> tuple[Counts, dict[str, Any] | None, np.ndarray | None]:
    """The counts the host's caches compete for, the GPU tier's figures and its rows (None, None
    without ``gpu_cache_budget``): the rows the tier will hold (ranked as the loader ranks them,
    ``_tiers.gpu_rows``) are read from the device, never from the host tiers, so their host reads
    are zero, as are the reads of them a history would spare, and the knapsack buys other rows."""
    rows = gpu_rows(ds, cfg, plan, stream_base=stream_base)
    if rows is None:
        return counts, None, None
    host = counts.row_hot.copy()
    host[rows] = 0.0
    held = np.zeros(len(host), bool)
    held[rows] = True
    info = {"rows": len(rows), "bytes": gpu_cache_bytes(len(rows), row_bytes=ds.row_format.held_row_bytes),
            "row_reads_spared": float(counts.row_hot[rows].sum())}
    return (dataclasses.replace(counts, row_hot=host, attr_rows=np.where(held[counts.attr_node], 0.0, counts.attr_rows)),
            info, rows)


def gpu_info(info: dict[str, Any] | None, counts: Counts, costs: MissCosts,
             held: np.ndarray | None) -> dict[str, Any] | None:
    """``meta["gpu_tier"]``: :func:`host_counts`' figures and the tier's accesses per epoch, hits and
    misses, at its measured costs (the assembly's seconds per epoch, before the history's savings)."""
    if info is None or held is None:
        return info
    access = counts.row_access if counts.row_access is not None else np.zeros(len(counts.row_hot))
    hits = float(access[held].sum())
    misses = float(access.sum()) - hits
    return {**info, "hits": hits, "misses": misses, "hit_us": costs.gpu_hit_us, "miss_us": costs.gpu_miss_us,
            "assembly_seconds": (hits * costs.gpu_hit_us + misses * costs.gpu_miss_us) / 1e6}


def load_plan(setup: LoaderSetup) -> AppliedPlan:
    """The plan the setup's ``profile=`` names (or profiles now, for ``"auto"``), applied to its config."""
    cfg, ds = setup.config, setup.dataset
    tied = profile_setup(setup, cfg)
    name = str(cfg.profile)
    if name == AUTO:
        name = auto_name(tied, cfg.cache_split)
        if (profile_path(ds, name) / "meta.json").is_file():
            prof = read_profile(ds, name, setup=tied)
        else:
            try:
                prof = run_profile(setup, cfg, name=name, max_batches=AUTO_BATCHES)
            except PermissionError:  # a read-only dataset folder: profile again, keep it in memory
                prof = run_profile(setup, cfg, name=None, max_batches=AUTO_BATCHES)
    else:
        prof = read_profile(ds, name, setup=tied)
    return apply(cfg, prof)


def apply(cfg: LoaderConfig, prof: Profile) -> AppliedPlan:
    mem, split = prof.meta["memory"], prof.meta["memory"]["split"]
    hist_nodes = prof.arrays["history_nodes"]
    history = None
    if cfg.history is not None and len(hist_nodes):
        placement = prof.meta.get("plan", {}).get("history_placement", cfg.history.placement)
        history = dataclasses.replace(cfg.history, candidates=hist_nodes, budget=None, placement=placement)
    io = prof.meta.get("io") or {}
    depth = cfg.max_in_flight if cfg.max_in_flight is not None else io.get("max_in_flight")
    applied = dataclasses.replace(cfg, profile=None, buffer_rows=int(mem["buffer_rows"]), history=history,
                                  neighbor_cache=int(split.get("neighbors", 0)) if cfg.partitions else 0,
                                  max_in_flight=depth)
    info = {"name": prof.path.name, "path": str(prof.path), "cache_split": prof.meta.get("cache_split"),
            "alpha": prof.meta.get("alpha"), "planned_split": dict(split), "predicted": prof.meta.get("predicted"),
            "costs": prof.meta.get("costs"), "seconds": prof.meta.get("seconds"), "io": io or None,
            "gpu_tier": prof.meta.get("gpu_tier"),
            "history_placement": prof.meta.get("plan", {}).get("history_placement"),
            "cache_budget": mem.get("cache_budget"), "dropped": dropped(cfg, applied),
            "history_slot_bytes": prof.meta.get("plan", {}).get("history_slot_host_bytes")}
    return AppliedPlan(config=applied, static_rows=prof.arrays["static_rows"],
                       neighbor_nodes=prof.arrays["neighbor_nodes"], info=info)


def dropped(asked: LoaderConfig, applied: LoaderConfig) -> list[str]:
    """The caches ``asked`` for (a history; a neighbour cache of a partitioned loader) that the plan gave
    no room: ``stats()["profile"]["dropped"]``, so a run says so (``outre train``'s header) instead of
    running without them in silence."""
    out = []
    if asked.history is not None and applied.history is None:
        out.append("history")
    if asked.partitions and asked.neighbor_cache and not applied.neighbor_cache:
        out.append("neighbors")
    return out


def _io_options(cfg: LoaderConfig, read_bytes: int) -> dict[str, Any]:
    opts = dict(cfg.source_options)
    depth = io_depth(cfg, read_bytes)
    if depth is not None:
        opts["max_in_flight"] = depth
    return opts


# -- stats()["profile"]: the plan in use, the split it realised and each cache's hit rate --------------
# The realised split is what the loader holds (bytes of the memory plan's parts: feature buffer, static
# feature cache, history table, neighbour cache), beside the split the profile planned; hit rates are per
# cache: the static cache and the feature buffer per row looked up, the neighbour cache per list sampled;
# the history reports the rows it served (pulled).
def profile_stats(info: dict[str, Any], out: dict[str, Any], static: Any) -> dict[str, Any]:
    memory = out.get("memory", {})
    realised = {part: int(memory.get(part, 0)) for part in
                ("feature buffer", "static feature cache", "history table", "neighbor cache")}
    lists = out.get("neighbor_lists") or {}
    history = out.get("history") or {}
    buffer = out.get("buffer") or {}
    hit_rates = {
        "static_features": static.stats()["hit_rate"] if static is not None else 0.0,
        "feature_buffer": float(buffer.get("hit_rate", 0.0)),
        "neighbor_cache": float(lists.get("global_cache_hit_rate", 0.0)),
        "history_pulled_rows": int(history.get("pulled", 0)),
    }
    return {**info, "realised_split": realised, "hit_rates": hit_rates,
            "static_cache": static.stats() if static is not None else None}


def probe_record(cfg: LoaderConfig, read_bytes: int) -> dict[str, Any] | None:
    """What a profile keeps of ``cfg.disk_probe`` (None without one): the reads in flight Little's law
    gives (``io_depth``; None for pread), the probe's rate by depth at this read size, its mode and age.
    ``apply`` sets ``max_in_flight`` from it (unless given); ``stats()["epoch_io"]`` compares with it."""
    probe = cfg.disk_probe
    if probe is None:
        return None
    size = probe.size_for(read_bytes)
    return {"max_in_flight": io_depth(cfg, read_bytes), "read_bytes": size, "direct": probe.direct,
            "iops_by_depth": {str(c.depth): round(c.iops, 1) for c in probe.cells if c.size == size},
            "device": probe.device, "measured_at": probe.measured_at}
