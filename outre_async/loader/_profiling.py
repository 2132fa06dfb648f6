"""``OutreLoader(..., memory_budget=B, profile=NAME)``: profile the loader's own plan, split B, apply it.

The budget is the loader's whole memory (``_budget``).  First the fixed parts are sized with the
feature buffer at its default, ``(extractors + 1)`` probed batches' worth of rows (or, when that does not
fit, the rows that fit, and no caches); what is left is the *cache budget* the knapsack splits
between static feature rows, history slots and (partition mode) neighbour lists.  Applying a plan
rewrites the config the loader runs with (buffer rows, ``neighbor_cache`` bytes, the history's
candidates) and adds the static cache as one more part of the memory plan, so ``stats()["memory"]``
shows every part and their sum stays within B.

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
from typing import Any

import numpy as np

from .._errors import ConfigError
from ..cache._history_config import default_window, history_slot_bytes
from ..plan._budget_plan import choose, knapsack_input, predict
from ..plan._costs import MissCosts, measure_costs
from ..plan._counts import presample
from ..plan._files import Profile, profile_path, read_profile, write_profile
from ..sampling._plan import plan_epoch
from ._budget import MemoryPlan, Sizes, default_pool, plan_memory
from ._config import LoaderConfig

AUTO = "auto"
AUTO_BATCHES = 64  # batches the loader pre-samples when it profiles itself (``outre profile``: --batches)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AppliedPlan:
    config: LoaderConfig        # what the loader runs with (buffer rows, neighbour cache, history candidates)
    static_rows: np.ndarray     # node ids of the static feature cache
    neighbor_nodes: np.ndarray  # node ids whose lists the neighbour cache holds (partition mode)
    info: dict[str, Any]        # for stats()["profile"]


def profile_setup(cfg: LoaderConfig, seeds: np.ndarray) -> dict[str, Any]:
    """What a profile is tied to: every knob that changes the batches, their order or the budget."""
    h = cfg.history if cfg.history is not None and cfg.history.enabled else None
    return {"fanouts": list(cfg.fanouts), "batch_size": cfg.batch_size, "seed": cfg.seed, "shuffle": cfg.shuffle,
            "drop_last": cfg.drop_last, "ordered": cfg.ordered, "num_seeds": len(seeds),
            "seeds_crc32": zlib.crc32(np.ascontiguousarray(seeds, np.int64).tobytes()),
            "partitions": cfg.partitions, "parts_per_batch": cfg.parts_per_batch, "interleave": cfg.interleave,
            "memory_budget": cfg.budget_bytes, "num_samplers": cfg.num_samplers, "num_extractors": cfg.num_extractors,
            "backend": cfg.backend, "staleness": h.staleness if h else None, "history_dim": h.dim if h else None,
            "history_window": h.window if h else None}


def auto_name(setup: dict[str, Any], split: object) -> str:
    digest = hashlib.sha256(json.dumps({**setup, "cache_split": split}, sort_keys=True).encode()).hexdigest()
    return f"auto-{digest[:12]}"


def base_memory(cfg: LoaderConfig, sizes: Sizes, kind: str) -> tuple[MemoryPlan, int]:
    """The fixed parts with the default buffer, and the bytes of the budget left for the caches."""
    budget = int(cfg.budget_bytes or 0)
    # the buffer's default: (extractors + 1) batches of the probed real rows (it is a cache that
    # batches stream through, _budget); the static cache then competes for the rest
    rows = min((cfg.num_extractors + 1) * sizes.expected_rows, sizes.num_nodes)
    bare = dataclasses.replace(cfg, buffer_rows=rows, neighbor_cache=0, history=None, profile=None)
    try:
        mem = plan_memory(bare, sizes, source=kind)
    except ConfigError:  # the default buffer does not fit: the budget sizes it, nothing is left for caches
        return plan_memory(dataclasses.replace(bare, buffer_rows=None), sizes, source=kind), 0
    # with the buffer's rows given, the batch pool takes whatever is left: keep it at its default and
    # let the caches compete for the rest (the loader's plan gives the pool what they leave)
    pool = min(mem.parts["batches"], default_pool(bare, sizes))
    mem = dataclasses.replace(mem, parts={**mem.parts, "batches": pool})
    return mem, max(0, budget - mem.total)


def run_profile(ds: Any, cfg: LoaderConfig, seeds: np.ndarray, partitioned: Any, sizes: Sizes, kind: str, *,
                name: str | None, max_batches: int, progress: bool = False, costs: MissCosts | None = None) -> Profile:
    """Profile the loader's plan and choose its split (module docstring); written when ``name`` is given.
    ``costs`` replaces the measurement (a plan is then a function of the seed alone: the tests)."""
    from tqdm import tqdm

    started = time.perf_counter()
    mem, cache_budget = base_memory(cfg, sizes, kind)
    h = cfg.history if cfg.history is not None and cfg.history.enabled else None
    window = 0 if cfg.ordered or h is None else default_window(h, cfg.num_samplers, cfg.num_extractors)
    slot = history_slot_bytes(h.dim, cfg.num_samplers) if h else 1
    plan = partitioned.plan(0) if partitioned is not None else plan_epoch(
        seeds, cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed, epoch=0, drop_last=cfg.drop_last)
    with tqdm(total=min(len(plan), max_batches), unit="batch", desc="profile", disable=not progress) as bar:
        counts = presample(ds, plan, fanouts=cfg.fanouts, seed=cfg.seed, stream_base=0, max_batches=max_batches,
                           buffer_rows=mem.buffer_rows, horizon=h.staleness - window if h else -1,
                           max_candidates=cache_budget // slot if h else 0,
                           assignment=partitioned.parts.assignment if partitioned is not None else None,
                           progress=bar.update)
    sampled = time.perf_counter()
    costs = costs or measure_costs(ds, backend="memory" if kind == "memory" else cfg.backend,
                          batch_rows=max(1, counts.accesses // max(counts.batches, 1)),
                          num_extractors=cfg.num_extractors, hidden=h.dim if h else ds.feature_dim, seed=cfg.seed,
                          fanouts=list(cfg.fanouts),
                          source_options={**mem.source_options(), **_io_options(cfg)} if kind == "disk" else None)
    measured = time.perf_counter()
    list_bytes = None
    if partitioned is not None:
        list_bytes = np.diff(ds.indptr) * ds.indices.dtype.itemsize + 16
    inp = knapsack_input(counts, costs, num_nodes=ds.num_nodes, dim=ds.feature_dim, hist_dim=h.dim if h else None,
                         num_samplers=cfg.num_samplers, list_bytes=list_bytes)
    choice, alpha = choose(inp, cache_budget, cfg.cache_split)
    done = time.perf_counter()
    scale = counts.epoch_batches / max(counts.batches, 1)
    meta = {"setup": profile_setup(cfg, seeds), "cache_split": cfg.cache_split, "alpha": alpha,
            "costs": costs.to_json(),
            "memory": {"budget": cfg.budget_bytes, "fixed": mem.total - mem.parts["feature buffer"],
                       "feature_buffer": mem.parts["feature buffer"], "buffer_rows": mem.buffer_rows,
                       "cache_budget": cache_budget, "split": choice.bytes},
            "plan": {"static_rows": len(choice.features), "history_slots": len(choice.history),
                     "neighbor_lists": len(choice.neighbors), "saved_us": choice.saved_us},
            "predicted": predict(counts, costs, choice, sample_seconds=counts.sample_seconds * scale),
            "counts": {"batches": counts.batches, "epoch_batches": counts.epoch_batches, "candidates": len(counts.cand),
                       "accesses": counts.accesses},
            "seconds": {"presample": sampled - started, "costs": measured - sampled, "solve": done - measured,
                        "total": done - started}}
    arrays = {"static_rows": choice.features, "history_nodes": np.sort(choice.history),
              "neighbor_nodes": choice.neighbors, "row_hot": counts.row_hot, "list_hot": counts.list_hot}
    path = write_profile(ds, name, meta, arrays) if name is not None else profile_path(ds, "unsaved")
    return Profile(path=path, meta=meta, arrays=arrays)


def load_plan(ds: Any, cfg: LoaderConfig, seeds: np.ndarray, partitioned: Any, sizes: Sizes, kind: str) -> AppliedPlan:
    """The plan ``cfg.profile`` names (or profiles now, for ``"auto"``), applied to ``cfg``."""
    setup = profile_setup(cfg, seeds)
    name = str(cfg.profile)
    if name == AUTO:
        name = auto_name(setup, cfg.cache_split)
        if (profile_path(ds, name) / "meta.json").is_file():
            prof = read_profile(ds, name, setup=setup)
        else:
            try:
                prof = run_profile(ds, cfg, seeds, partitioned, sizes, kind, name=name, max_batches=AUTO_BATCHES)
            except PermissionError:  # a read-only dataset folder: profile again, keep it in memory
                prof = run_profile(ds, cfg, seeds, partitioned, sizes, kind, name=None, max_batches=AUTO_BATCHES)
    else:
        prof = read_profile(ds, name, setup=setup)
    return apply(cfg, prof)


def apply(cfg: LoaderConfig, prof: Profile) -> AppliedPlan:
    mem, split = prof.meta["memory"], prof.meta["memory"]["split"]
    hist_nodes = prof.arrays["history_nodes"]
    history = None
    if cfg.history is not None and cfg.history.enabled and len(hist_nodes):
        history = dataclasses.replace(cfg.history, candidates=hist_nodes, budget=None)
    applied = dataclasses.replace(cfg, profile=None, buffer_rows=int(mem["buffer_rows"]), history=history,
                                  neighbor_cache=int(split.get("neighbors", 0)) if cfg.partitions else 0)
    info = {"name": prof.path.name, "path": str(prof.path), "cache_split": prof.meta.get("cache_split"),
            "alpha": prof.meta.get("alpha"), "planned_split": dict(split), "predicted": prof.meta.get("predicted"),
            "costs": prof.meta.get("costs"), "seconds": prof.meta.get("seconds")}
    return AppliedPlan(config=applied, static_rows=prof.arrays["static_rows"],
                       neighbor_nodes=prof.arrays["neighbor_nodes"], info=info)


def _io_options(cfg: LoaderConfig) -> dict[str, Any]:
    opts = dict(cfg.source_options)
    if cfg.max_in_flight is not None:
        opts["max_in_flight"] = cfg.max_in_flight
    return opts
