"""``compute-only``: the physical limit's compute and sampling terms, measured in a child like the rest.

The same batches as ``sync``/``outre`` (same plan, same sampler streams), in two passes:

1. *sampling-only*: the numba sampler alone over the epoch's plan, one thread (timed);
2. *compute-only*: the same model trains on those batches with their features already in RAM.
   Features are loaded (untimed) in windows of batches whose unique rows fit ``ram_budget``, so the
   timed part is the training step alone, with no loader thread competing for the CPU.

The third term, *io-bound* (unique rows of the epoch ÷ the disk's random-read rate), is computed by
the harness from ``rows_unique`` reported here and the probe it ran at the start.

``compute-only-part`` is the same measurement over the batches ``outre-part`` trains: its partition
plan and subgraphs for epoch 0 (the loader's own :class:`PartitionBatching`, from the same loader
keywords), so a partition system's training step compares with compute-only on the *same* batches.
It is not a term of the limit (the limit keeps the random batches of ``compute-only``).
"""

from __future__ import annotations

import resource
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from ..store._row_codec import decode_rows
from ._epoch import Step, proxy_step, train_step
from ._systems import OutrePart, RunSpec, run_seeds


def compute_only(model: nn.Module, optimizer: torch.optim.Optimizer, ds: Any, spec: RunSpec) -> dict[str, Any]:
    from ..sampling._plan import plan_epoch
    from ..sampling._sampler import NeighborSampler

    seeds, shuffle = run_seeds(ds, spec)  # the batches every system loads (``--max-batches``: the same N)
    plan = plan_epoch(seeds, spec.batch_size, shuffle=shuffle, seed=spec.seed, epoch=0)
    stream_base = 0  # epoch 0 of a fresh loader: streams 0 .. len(plan) - 1, as SyncLoader/OutreLoader
    sampler = NeighborSampler(ds, list(spec.fanouts), seed=spec.seed)
    start = time.perf_counter()
    subs = [sampler.sample(seeds, stream_base + seq) for seq, seeds in enumerate(plan)]
    sampling = time.perf_counter() - start
    return train_in_ram(model, optimizer, ds, subs, sampling, spec.ram_budget, **_step_of(spec))


def compute_only_part(model: nn.Module, optimizer: torch.optim.Optimizer, ds: Any,
                      spec: RunSpec) -> dict[str, Any]:
    """``compute-only`` over ``outre-part``'s batches (``spec.options``: that system's options)."""
    subs, sampling = partition_subgraphs(ds, spec)
    metrics = train_in_ram(model, optimizer, ds, subs, sampling, spec.ram_budget, **_step_of(spec))
    metrics["extra"]["partitions"] = OutrePart().loader_kwargs(spec)["partitions"]
    return metrics


def _step_of(spec: RunSpec) -> dict[str, Any]:
    """The run's step (``--step-ms``: the proxy wait) and its training device (``--device``)."""
    return {"step": proxy_step(spec.step_ms / 1e3) if spec.step_ms > 0 else None, "device": torch.device(spec.device)}


def partition_subgraphs(ds: Any, spec: RunSpec) -> tuple[list[Any], float]:
    """Epoch 0's batches of ``OutreLoader(ds, **OutrePart().loader_kwargs(spec))``, in plan order (the
    first ``spec.max_batches`` when > 0, as ``outre-part`` trains in ordered mode then), and the
    seconds spent sampling them (one thread; macro batches' adjacency read from disk included)."""
    from ..loader._config import LoaderConfig
    from ..loader._partition_mode import PartitionBatching
    from ..sampling._plan import seed_ids

    kwargs = OutrePart().loader_kwargs(spec)
    seeds = seed_ids(ds, kwargs.pop("split"))
    cfg = LoaderConfig(**kwargs)
    batching = PartitionBatching.of_config(ds, cfg, seeds)
    start = time.perf_counter()
    subs = list(batching.sample_epoch(ds, cfg.fanouts, cfg.seed, epoch=0, max_batches=spec.max_batches))
    return subs, time.perf_counter() - start


def train_in_ram(model: nn.Module, optimizer: torch.optim.Optimizer, ds: Any, subs: list[Any], sampling: float,
                 ram_budget: int, *, step: Step | None = None, device: torch.device | None = None) -> dict[str, Any]:
    """Train on ``subs`` in order, features loaded (untimed) in windows of at most ``ram_budget`` bytes;
    the run's metrics, with ``train_seconds`` the training steps alone (``sampling``: seconds to sample)."""
    from ..loader._sync_loader import to_data

    row_bytes = ds.row_format.delivered_row_bytes if ds.feature_dim else 1  # rows as a batch holds them
    budget_rows = max(ram_budget // row_bytes, 1)
    seen = np.zeros(ds.num_nodes, dtype=np.bool_)
    train = load = user = sys_ = 0.0
    loss_sum = correct = labelled = rows = seeds = 0.0
    model.train()
    for window in _windows(subs, budget_rows):
        t0 = time.perf_counter()
        unique = np.unique(np.concatenate([s.n_id for s in window]))
        in_ram = decode_rows(ds.features[unique], ds.row_format)  # sorted rows: near-sequential
        load += time.perf_counter() - t0
        for sub in window:
            x = torch.from_numpy(in_ram[np.searchsorted(unique, sub.n_id)])
            batch = to_data(sub, x, torch.from_numpy(ds.labels[sub.n_id]))
            if device is not None and device.type != "cpu":  # on the device before the timer: compute alone
                batch = batch.to(device)
                torch.cuda.synchronize(device)
            t1, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            loss, ok, count = step(batch) if step is not None else train_step(model, optimizer, batch)
            if device is not None and device.type != "cpu":
                torch.cuda.synchronize(device)
            train += time.perf_counter() - t1
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            user, sys_ = user + cpu1.ru_utime - cpu0.ru_utime, sys_ + cpu1.ru_stime - cpu0.ru_stime
            loss_sum, correct, labelled = loss_sum + loss, correct + ok, labelled + count
            seen[sub.n_id] = True
            rows += len(sub.n_id)
            seeds += sub.batch_size
        del in_ram
    return {
        "epoch_seconds": train, "train_seconds": train, "sample_seconds": sampling, "extract_seconds": 0.0,
        "stall_seconds": 0.0, "batches": len(subs), "seeds": int(seeds),
        "rows_requested": int(rows), "rows_unique": int(seen.sum()), "rows_from_cache": None, "rows_from_disk": None,
        "loss": loss_sum / max(labelled, 1), "train_accuracy": correct / max(labelled, 1),
        # the training steps' CPU alone (every thread; no loader runs here): what a loaded run's
        # user / sys CPU is set against
        "user_cpu_seconds": user, "sys_cpu_seconds": sys_,
        "extra": {"feature_load_seconds_untimed": load, "windows_ram_budget_bytes": ram_budget,
                  "sampling_only_seconds": sampling},
    }


def _windows(subs: list[Any], budget_rows: int) -> list[list[Any]]:
    """Consecutive groups of batches whose summed rows (≥ their unique rows) fit ``budget_rows``."""
    out: list[list[Any]] = [[]]
    rows = 0
    for sub in subs:
        if out[-1] and rows + len(sub.n_id) > budget_rows:
            out.append([])
            rows = 0
        out[-1].append(sub)
        rows += len(sub.n_id)
    return [w for w in out if w]
