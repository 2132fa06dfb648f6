"""The timed training epoch every system runs through, and the evaluation after it.

The loop is the plain PyG loop of ``_train.train_epoch``, instrumented: time blocked in ``next()``
is the consumer's *stall*, time in forward/backward/step is *train*; the rows each batch carries
are counted (requested and unique over the epoch, for the redundancy ratio).  Bookkeeping outside
the two timers is a numpy mark per batch, a few microseconds.
"""

from __future__ import annotations

import mmap
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


@dataclass(kw_only=True, slots=True)
class EpochCounters:
    epoch_seconds: float = 0.0
    train_seconds: float = 0.0
    stall_seconds: float = 0.0
    batches: int = 0
    seeds: int = 0
    rows_requested: int = 0
    rows_unique: int = 0
    loss: float = 0.0
    train_accuracy: float = 0.0
    user_cpu_seconds: float = 0.0  # the process's CPU over the epoch, every thread (getrusage)
    sys_cpu_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def edges_of(batch: Any) -> Any:
    """``edge_index`` of our batches, or the ``adj_t`` SparseTensor of PyG's loader over ``adj_t`` data."""
    edge_index = getattr(batch, "edge_index", None)
    return edge_index if edge_index is not None else batch.adj_t


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Any) -> tuple[float, int, int]:
    """One optimizer step on the labelled seeds: (loss sum, correct, labelled seeds)."""
    history = getattr(batch, "history", None)
    edges = edges_of(batch)
    out = (model(batch.x, edges) if history is None else model(batch.x, edges, history=history))[: batch.batch_size]
    target = torch.as_tensor(batch.y[: batch.batch_size], dtype=torch.long)
    keep = target >= 0
    out, target = out[keep], target[keep]
    if len(target) == 0:
        return 0.0, 0, 0
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(out, target)
    loss.backward()
    optimizer.step()
    return loss.item() * len(target), int((out.argmax(-1) == target).sum()), len(target)


Step = Callable[[Any], tuple[float, int, int]]


def proxy_step(seconds: float) -> Step:
    """``outre bench --step-ms``: a training step replaced by a fixed wait of ``seconds``, so a CPU
    machine measures the loader-bound regime a GPU creates (a GPU's GraphSAGE step is milliseconds,
    a CPU's step makes the epoch compute-bound; docs/benchmarks.md runs ``--step-ms 8``).

    Why ``time.sleep`` and not a busy wait: on a GPU the step is asynchronous to the CPU; the
    Python thread launches kernels and then waits in a synchronize with the GIL released, leaving
    the cores to the loader.  A sleep releases the GIL and the core the same way; a busy wait
    would hold both and model a CPU-bound step instead.  (The launches' own CPU time is not
    modelled: the figure is the loader's best case.)

    A history batch still exchanges: it pushes zero rows of h^(L-1)'s real shape (one row per
    sampled node, the table's width) and pulls its rows, so the staleness machinery (clock, pushes,
    pruning, the overtaking window) runs exactly as in training."""

    def step(batch: Any) -> tuple[float, int, int]:
        history = getattr(batch, "history", None)
        if history is not None:
            history.exchange(torch.zeros(len(batch.n_id), history.dim, device=batch.x.device))
        time.sleep(seconds)
        return 0.0, 0, 0

    return step


def timed_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable[Any], *,
                num_nodes: int, max_batches: int = 0, step: Step | None = None,
                device: torch.device | None = None) -> EpochCounters:
    """Train on ``batches`` (at most ``max_batches`` when > 0); return the counters.  ``step``
    replaces the training step (:func:`proxy_step`); ``device``: batches a system leaves on the
    host are moved there first (inside the timed step: a PyG loader's copy is the trainer's)."""
    step = step or (lambda batch: train_step(model, optimizer, batch))
    move = device is not None and device.type != "cpu"
    c = EpochCounters()
    seen = np.zeros(num_nodes, dtype=np.bool_)
    loss_sum = correct = labelled = 0.0
    model.train()
    it = iter(batches)
    start, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    try:
        while not max_batches or c.batches < max_batches:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            if move and batch.x.device != device:
                batch = batch.to(device, non_blocking=True)
            loss, ok, count = step(batch)
            if move:
                torch.cuda.synchronize(device)  # the step's kernels end inside its timer
            c.train_seconds += time.perf_counter() - t1
            c.stall_seconds += t1 - t0
            n_id = batch.n_id.cpu().numpy()  # no copy on the CPU
            seen[n_id] = True
            c.rows_requested += len(n_id)
            c.batches += 1
            c.seeds += int(batch.batch_size)
            loss_sum, correct, labelled = loss_sum + loss, correct + ok, labelled + count
        c.epoch_seconds = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        c.user_cpu_seconds, c.sys_cpu_seconds = cpu1.ru_utime - cpu0.ru_utime, cpu1.ru_stime - cpu0.ru_stime
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    c.rows_unique = int(seen.sum())
    c.loss = loss_sum / max(labelled, 1)
    c.train_accuracy = correct / max(labelled, 1)
    return c


def random_access_features(ds: Any, advice: int | None = mmap.MADV_RANDOM) -> np.ndarray:
    """A fresh memory map of the feature matrix with ``madvise(advice)`` (None: the kernel's default
    read-around, which on a device with a large ``read_ahead_kb`` reads megabytes per row)."""
    dtype = ds.feature_dtype
    mm = np.memmap(ds.features_path, dtype=dtype, mode="r", shape=(ds.num_nodes, ds.row_layout.stride // dtype.itemsize))
    if advice is not None:
        mm._mmap.madvise(advice)  # type: ignore[attr-defined]
    return mm[:, : ds.feature_dim]


@torch.no_grad()
def validation_accuracy(model: nn.Module, ds: Any, *, fanouts: tuple[int, ...], batch_size: int, seed: int,
                        max_nodes: int) -> dict[str, float]:
    """Loss and accuracy on the first ``max_nodes`` validation nodes: the same sampled batches whatever
    system trained the model (so the figures compare), features through a MADV_RANDOM map."""
    from ..features._decode import RowDecoder
    from ..loader._sync_loader import gather_features, to_data
    from ..sampling._plan import plan_epoch
    from ..sampling._sampler import NeighborSampler

    if "val" not in ds.split_names or max_nodes < 1:
        return {"val_loss": float("nan"), "val_accuracy": float("nan"), "val_nodes": 0}
    nodes = ds.split("val")[:max_nodes]
    sampler = NeighborSampler(ds, list(fanouts), seed=seed)
    features = random_access_features(ds)
    model.eval()
    loss_sum = correct = seen = 0.0
    for seq, seeds in enumerate(plan_epoch(nodes, batch_size, shuffle=False, seed=seed, epoch=0)):
        sub = sampler.sample(seeds, seq)
        batch = to_data(sub, gather_features(features, sub.n_id, RowDecoder(ds.row_format)), torch.from_numpy(ds.labels[sub.n_id]))
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        target = batch.y[: batch.batch_size].long()
        keep = target >= 0
        out, target = out[keep], target[keep]
        loss_sum += float(F.cross_entropy(out, target, reduction="sum")) if len(target) else 0.0
        correct += int((out.argmax(-1) == target).sum())
        seen += len(target)
    return {"val_loss": loss_sum / max(seen, 1), "val_accuracy": correct / max(seen, 1), "val_nodes": int(seen)}
