"""``outre train``: train a GNN with :class:`OutreLoader`, evaluate with layer-wise inference, checkpoint.

One epoch = one pass of the training loader (``_train.train_epoch``, the plain PyG loop); every
``eval_every`` epochs (and after the last) :func:`outre_async.inference` computes every node's output
with full neighbourhoods and the validation and test accuracies are read off it (sampled evaluation
is noisy).  After each epoch ``last.pt`` (model, optimizer, torch RNG, epoch, metrics so far) and
``metrics.json`` are replaced atomically; ``best.pt`` holds the weights of the best validation
accuracy, whose test accuracy is the one reported.  ``resume`` continues from ``last.pt``: same
shape of model, same dataset, epoch numbering (hence shuffles and sampling streams) carried on, so a
``deterministic`` run resumed gives the weights of the run that was never interrupted.  ``last.pt``
records the dataset's identity (``dataset_identity``, the one partitions and profiles record: counts,
the manifest's hash, a probe of ``indices``) and the config; resuming on another dataset (or version
of it) or with other ``TrainConfig.RESUMED`` options is a :class:`CheckpointMismatchError` that
``force`` (``--resume --force``) overrides; the model shape never can be overridden.

``checkpoint_every`` (``--checkpoint-every N``) also replaces ``last.pt`` after every N-th batch of an
epoch, with the loader's ``state_dict()`` (the epoch's batches already delivered) and the epoch's sums
so far; ``resume`` then continues that epoch with its remaining batches (``OutreLoader.load_state_dict``),
so a ``deterministic`` run resumed mid-epoch also gives the uninterrupted run's weights.  One process
only (each rank's loader is at its own place); the history table (``--staleness``) is not saved.
"""

from __future__ import annotations

import contextlib

import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ..errors import CheckpointError, CheckpointMismatchError, ConfigError
from .._train import EpochTotals, train_epoch
from ..cache._history_config import history_for
from ..distributed import DistributedContext
from ..layerwise import inference
from ..loader._loader import OutreLoader
from ..loader._options import CacheOptions, IOOptions
from ..machine._allocator import pin_unless_user_chose
from ..machine._device import resolve_device
from ..nn import GAT, GCN, GraphSAGE
from ..partition._output import dataset_identity
from ..partition._reader import partitions_folder
from ..store._dataset import Dataset, open_dataset
from ._config import TrainConfig
from ._files import load_checkpoint, save_checkpoint, write_metrics
from ._link import LinkModel, evaluate_link_model, make_decoder, train_link_epoch
from ._out import check_outside_datasets, hold_output
from ._plot import plot_time_to_accuracy
from ._report import accuracy_text, cache_lines, epoch_cache_stats, setup_lines

Say = Callable[[str], None]
LAST, BEST, METRICS, PLOT = "last.pt", "best.pt", "metrics.json", "time_to_accuracy.png"


def build_model(config: TrainConfig, ds: Dataset) -> torch.nn.Module:
    """The node task's classifier, or (``task="link"``) a :class:`LinkModel`: the encoder, ``hidden``
    wide out, and its decoder."""
    if config.task == "link":
        encoder = _gnn(config, ds, config.hidden)
        return LinkModel(encoder, make_decoder(config.decoder, config.hidden))
    return _gnn(config, ds, ds.num_classes)


def _gnn(config: TrainConfig, ds: Dataset, out: int) -> torch.nn.Module:
    args = (ds.feature_dim, config.hidden, config.layers, out)  # PyG's order
    if config.model == "gat":
        return GAT(*args, dropout=config.dropout, heads=config.heads)
    cls = GraphSAGE if config.model == "sage" else GCN
    return cls(*args, dropout=config.dropout)


def run_train(dataset: str | Path, config: TrainConfig, out: Path, *, resume: bool = False, force: bool = False,
              progress: bool = False, say: Say = lambda _: None, distributed: bool = False) -> dict[str, Any]:
    """Train as the module says; with ``distributed`` (a torchrun rank, ``outre train --nproc N``) inside
    :func:`~outre_async.distributed.init_distributed`: the loader takes this rank's share of each epoch,
    the model trains inside DDP, and rank 0 alone evaluates, writes the files and reports."""
    if not distributed:
        return _train(dataset, config, out, resume=resume, force=force, progress=progress, say=say, ctx=None)
    from ..distributed import init_distributed

    # a generous collective timeout: the other ranks wait in their first all-reduce while rank 0 evaluates
    with init_distributed(timeout=3600.0) as ctx:
        quiet: Say = say if ctx.rank == 0 else (lambda _: None)
        return _train(dataset, config, out, resume=resume, force=force, progress=progress and ctx.rank == 0, say=quiet,
                      ctx=ctx)


def _train(dataset: str | Path, config: TrainConfig, out: Path, *, resume: bool, force: bool, progress: bool, say: Say,
           ctx: DistributedContext | None) -> dict[str, Any]:
    ds = open_dataset(dataset)
    _check_dataset(ds, config.task)
    if config.partitions is not None:  # before the model, the output folder and the loader's set-up (tests/trainer/test_early_checks.py)
        partitions_folder(ds, config.partitions)
    device = ctx.device if ctx is not None else resolve_device(config.device, "--device")  # before any file
    check_outside_datasets(out)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with hold_output(out) if ctx is None or ctx.rank == 0 else nullcontext():  # rank 0 alone writes
            return _train_into(ds, config, out, resume=resume, force=force, progress=progress, say=say, ctx=ctx,
                               device=device)
    except BaseException:
        if made and (ctx is None or ctx.rank == 0):  # a run that wrote nothing leaves no empty --out behind
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: a checkpoint already written stays
        raise


def _train_into(ds: Dataset, config: TrainConfig, out: Path, *, resume: bool, force: bool, progress: bool, say: Say,
                ctx: DistributedContext | None, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(config.seed)  # the initial weights (a resumed run loads its own, and the RNG state)
    model = build_model(config, ds).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    run = _Run(config, ds, out, model, optimizer, say, ctx, device)
    if resume:
        run.restore(load_checkpoint(out / LAST), force=force)
    elif (out / LAST).exists() and (ctx is None or ctx.rank == 0):
        raise ConfigError(f"{out} holds a run already ({LAST}); pass --resume to continue it or choose another --out")
    history = history_for(config.staleness, config.hidden)
    # our own process: keep glibc's heap from growing past a budget the user set (machine/_allocator)
    pinned_heap = config.memory_budget is not None and pin_unless_user_chose()
    say(f"{config.model} {config.layers} layers, hidden {config.hidden}, fanouts {list(config.fanouts)}, batch size "
        f"{config.batch_size}, {'plan' if config.deterministic else 'completion'} order, on {device}, "
        f"epochs {run.start + 1}..{config.epochs}" + (f"; link prediction: {config.decoder} decoder, {config.neg_amount:g} "
                                                      f"uniform negatives per pair, ranked against {config.candidates} "
                                                      "candidates" if config.task == "link" else ""))
    ranks = ctx.loader_options() if ctx is not None else {}
    task = (dict(edge_label_index="train", neg_sampling={"mode": "binary", "amount": config.neg_amount})
            if config.task == "link" else dict(split="train", partitions=config.partitions, history=history,
                                                cache=CacheOptions(profile=config.profile)))
    with OutreLoader(ds, fanouts=list(config.fanouts), batch_size=config.batch_size, shuffle=True,
                     seed=config.seed, ordered=config.deterministic, memory_budget=config.memory_budget,
                     io=IOOptions(backend=config.backend), **task,
                     **{"device": str(device), **ranks}) as loader:  # a rank's own device
        run.budget = loader.stats()["memory"]["budget"]
        for line in setup_lines(config, loader.stats(), ctx.world_size if ctx is not None else 1):
            say(line)
        if pinned_heap:
            say("allocator    glibc's mmap threshold held at 128 KiB, so freed blocks leave the heap and the budget "
                "holds (set MALLOC_MMAP_THRESHOLD_ to choose)")
        val, test = ("val", "test") if config.task == "node" else ("v mrr", "t mrr")
        say(f"{'epoch':>5} {'loss':>8} {'train':>6} {val:>6} {test:>6} {'batch/s':>8} {'stall s':>8} {'epoch s':>8} {'eval s':>7}")
        run.place(loader, force)  # the next epoch, or the rest of a mid-epoch checkpoint's
        for epoch in range(run.start + 1, config.epochs + 1):
            run.epoch(epoch, loader, progress)
        stats = loader.stats()
    if not run.writes:
        return {**run.summary(), "plot": None, "loader_stats": stats}
    drawn = plot_time_to_accuracy(out / PLOT, run.metrics, f"{config.model} on {ds.path.name}", run.val_key[4:])
    what = "accuracy" if config.task == "node" else "mrr"
    say(f"best validation {what} {accuracy_text(run.best.get(run.val_key))} at epoch {run.best.get('epoch')}: test "
        f"{what} {accuracy_text(run.best.get(run.test_key))}; wrote {out / METRICS}"
        + (f", {out / PLOT}" if drawn else " (no plot: matplotlib is not installed)"))
    return {**run.summary(), "plot": str(out / PLOT) if drawn else None, "loader_stats": stats}


def _check_dataset(ds: Dataset, task: str) -> None:
    ds.require_homogeneous("[N, D] feature matrix for `outre train`")
    if task == "link":
        missing = [s for s in ("train", "val") if s not in ds.edge_split_names]
        if missing:
            raise ConfigError(f"dataset {ds.path} has no {missing[0]!r} edge split; `outre train --task link` trains on "
                              "edge splits: make them with `outre split-edges DATASET OUT`")
        return
    if ds.labels is None or ds.num_classes < 1:
        raise ConfigError(f"dataset {ds.path} has no labels; `outre train` trains node classification")
    for split in ("train", "val"):
        if split not in ds.split_names:
            raise ConfigError(f"dataset {ds.path} has no {split!r} split; convert it with train/val/test splits")


class _Run:
    """The state of one training run: what a checkpoint saves and restores."""

    def __init__(self, config: TrainConfig, ds: Dataset, out: Path, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, say: Say, ctx: DistributedContext | None = None,
                 device: torch.device | None = None) -> None:
        self.device = device or torch.device("cpu")
        self.budget: int | None = None  # the loader's budget (auto or given): layer-wise inference's too
        self.config, self.ds, self.out, self.model, self.optimizer, self.say = config, ds, out, model, optimizer, say
        # data parallel: the steps go through DDP (gradients averaged); rank 0 evaluates and writes
        self.trained = ctx.wrap(model) if ctx is not None else model
        self.every_step, self.writes = ctx is not None, ctx is None or ctx.rank == 0
        self.start, self.metrics, self.best = 0, [], {}  # type: ignore[var-annotated]
        link = config.task == "link"  # the metric the best epoch is chosen by, and the one reported with it
        self.val_key, self.test_key = ("val_mrr", "test_mrr") if link else ("val_accuracy", "test_accuracy")
        self.shape = {"num_nodes": ds.num_nodes, "feature_dim": ds.feature_dim, "num_classes": ds.num_classes}
        self.identity = dataset_identity(ds)  # what partitions and profiles record: checked on --resume
        # a mid-epoch checkpoint's (--checkpoint-every): the loader's place and the epoch's sums so far
        self.loader_state: dict[str, Any] | None = None
        self.partial: EpochTotals | None = None

    def restore(self, state: dict[str, Any], *, force: bool = False) -> None:
        """Continue from ``state`` (types checked by ``load_checkpoint``).  The model shape and the
        dataset's widths must match (the weights could not load otherwise); the dataset identity and
        the config keys that decide what is trained (``TrainConfig.RESUMED``) must match too, unless
        ``force`` (``--resume --force``)."""
        old, last = state["config"], self.out / LAST
        for key in TrainConfig.SHAPE:
            if TrainConfig.saved(old, key) != getattr(self.config, key):
                raise CheckpointMismatchError(f"{last} has {key}={TrainConfig.saved(old, key)!r}, this run "
                                              f"{getattr(self.config, key)!r}; "
                                              "resume with the same model shape (its weights cannot load into another)")
        widths = {k: self.shape[k] for k in ("feature_dim", "num_classes")}
        if {k: state["dataset"].get(k) for k in widths} != widths:
            raise CheckpointMismatchError(f"{last} was trained on a dataset of other widths ({state['dataset']}), "
                                          f"this one has {widths}; resume on the same dataset")
        if not force:
            self._check_same_run(last, state)
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
        except (RuntimeError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{last}: its weights, optimizer or RNG state do not fit this model "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); remove it and train "
                                  "without --resume") from exc
        self.start, self.metrics, self.best = int(state["epoch"]), list(state["metrics"]), dict(state["best"])
        if self.start >= self.config.epochs:
            raise ConfigError(f"the checkpoint has {self.start} epochs already; raise --epochs to train more")
        if "loader" in state:  # written mid-epoch: the loader resumes the epoch's remaining batches
            partial = _totals(last, state.get("partial"))
            self.loader_state, self.partial = state["loader"], partial
            self.say(f"resumed {self.out / LAST} in epoch {self.start + 1} after {partial.count} of its steps")
        else:
            self.say(f"resumed {self.out / LAST} after epoch {self.start}")

    def place(self, loader: OutreLoader, force: bool) -> None:
        """Put ``loader`` where the checkpoint left off: the next epoch, or the rest of a mid-epoch
        checkpoint's epoch (its facts must match; ``force`` then starts that epoch afresh)."""
        if self.loader_state is None:
            loader.set_epoch(self.start)  # carry the epoch numbering on: shuffles and sampling streams continue
            return
        try:
            loader.load_state_dict(self.loader_state)
        except CheckpointMismatchError as exc:
            if not force:
                raise CheckpointMismatchError(f"{self.out / LAST} (written mid-epoch): {exc}; --resume --force "
                                              "starts that epoch afresh") from exc
            self.say(f"the loader's place in epoch {self.start + 1} does not fit this run ({exc}); that epoch starts afresh")
            loader.set_epoch(self.start)
            self.partial = None

    def _check_same_run(self, last: Path, state: dict[str, Any]) -> None:
        have = state.get("dataset_identity")
        if have != self.identity:
            diff = "it records none (an older checkpoint)" if not isinstance(have, dict) else \
                "differs in " + ", ".join(k for k in self.identity if have.get(k) != self.identity[k])
            raise CheckpointMismatchError(f"{last} was trained on another dataset or another version of {self.ds.path} "
                                          f"({diff}); resume on its dataset, or pass --resume --force to continue anyway")
        changed = [f"{k} {TrainConfig.saved(state['config'], k)!r} -> {getattr(self.config, k)!r}" for k in TrainConfig.RESUMED
                   if _plain(TrainConfig.saved(state["config"], k)) != _plain(getattr(self.config, k))]
        if changed:
            raise CheckpointMismatchError(f"{last} was trained with another config ({'; '.join(changed[:3])}); resume "
                                          "with the same options, or pass --resume --force to continue anyway")

    def epoch(self, epoch: int, loader: OutreLoader, progress: bool) -> None:
        before = loader.stats()
        batches = tqdm(loader, total=len(loader), desc=f"epoch {epoch}", leave=False, disable=not progress)
        every = self.config.checkpoint_every
        saver = None if every is None or not self.writes else _MidEpoch(self, epoch, loader, every)
        totals, self.partial = self.partial, None
        step = train_link_epoch if self.config.task == "link" else train_epoch
        result = step(self.trained, batches, self.optimizer, every_step=self.every_step, epoch=epoch,
                      totals=totals, after_batch=saver)
        after = loader.stats()
        stall = after.get("stall_seconds", 0.0) - before.get("stall_seconds", 0.0)
        row: dict[str, Any] = {"epoch": epoch, "loss": result.loss, "train_accuracy": result.accuracy,
                               "batches": result.batches, "train_seconds": result.seconds,
                               "batches_per_second": result.batches / max(result.seconds, 1e-9),
                               "stall_seconds": stall, self.val_key: None, self.test_key: None, "eval_seconds": 0.0,
                               **epoch_cache_stats(before, after)}
        if not self.writes:  # another rank of a data-parallel run: rank 0 evaluates and writes
            return
        if epoch % self.config.eval_every == 0 or epoch == self.config.epochs:
            row.update(self.evaluate(progress))
        prev = self.metrics[-1]["elapsed_seconds"] if self.metrics else 0.0
        row["elapsed_seconds"] = prev + result.seconds + row["eval_seconds"]
        self.metrics.append(row)
        if row[self.val_key] is not None and row[self.val_key] > self.best.get(self.val_key, -1.0):
            self.best = {k: row[k] for k in ("epoch", self.val_key, self.test_key, "elapsed_seconds")}
            save_checkpoint(self.out / BEST, {"model": self.model.state_dict(), "epoch": epoch,
                                              "config": self.config.as_dict(), "dataset": self.shape,
                                              "dataset_identity": self.identity})
        save_checkpoint(self.out / LAST, self.state(epoch))
        write_metrics(self.out / METRICS, self.summary())
        self.say(_line(row, self.val_key, self.test_key))
        for line in cache_lines(row):
            self.say(line)

    @torch.no_grad()
    def evaluate(self, progress: bool) -> dict[str, Any]:
        start = time.perf_counter()
        if isinstance(self.model, LinkModel):
            got = evaluate_link_model(self.model, self.ds, candidates=self.config.candidates, seed=self.config.seed,
                                      backend=self.config.backend, device=self.device, budget=self.budget,
                                      progress=progress)
            return {**got, "eval_seconds": time.perf_counter() - start}
        pred = inference(self.model, self.ds, backend=self.config.backend, device=self.device,  # type: ignore[arg-type]
                         progress=progress, memory_budget=self.budget).argmax(-1).cpu().numpy()
        labels = self.ds.labels
        assert labels is not None  # _check_dataset
        acc = {}
        for split in ("val", "test"):
            ids = self.ds.split(split) if split in self.ds.split_names else np.empty(0, np.int64)
            ids = ids[labels[ids] >= 0]
            acc[f"{split}_accuracy"] = float((pred[ids] == labels[ids]).mean()) if len(ids) else None
        return {**acc, "eval_seconds": time.perf_counter() - start}

    def state(self, epoch: int) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "epoch": epoch,
                "config": self.config.as_dict(), "dataset": self.shape, "dataset_identity": self.identity,
                "torch_rng": torch.get_rng_state(),
                "metrics": self.metrics, "best": self.best}

    def summary(self) -> dict[str, Any]:
        return {"dataset": str(self.ds.path), "config": self.config.as_dict(), "epochs": self.metrics,
                "best": self.best, self.test_key: self.best.get(self.test_key),
                "time_to_best_seconds": self.best.get("elapsed_seconds")}


def _plain(value: Any) -> Any:
    """A config value as the checkpoint stores it (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value


def _line(row: dict[str, Any], val: str = "val_accuracy", test: str = "test_accuracy") -> str:
    def acc(v: float | None) -> str:
        return f"{v:>6.3f}" if v is not None else f"{'-':>6}"

    return (f"{row['epoch']:>5} {row['loss']:>8.4f} {acc(row['train_accuracy'])} {acc(row[val])} "
            f"{acc(row[test])} {row['batches_per_second']:>8.1f} {row['stall_seconds']:>8.2f} "
            f"{row['train_seconds']:>8.2f} {row['eval_seconds']:>7.2f}")


class _MidEpoch:
    """``--checkpoint-every N``: after every N-th batch of an epoch, replace ``last.pt`` with the run as
    it is then (weights, optimizer, torch RNG after that step), the epochs before it as completed, the
    loader's ``state_dict()`` (the batches already delivered) and the epoch's sums so far."""

    def __init__(self, run: _Run, epoch: int, loader: OutreLoader, every: int) -> None:
        self.run, self.epoch, self.loader, self.every, self.batches = run, epoch, loader, every, 0

    def __call__(self, totals: EpochTotals) -> None:
        self.batches += 1
        if self.batches % self.every == 0:
            state = {**self.run.state(self.epoch - 1), "loader": self.loader.state_dict(), "partial": totals.as_dict()}
            save_checkpoint(self.run.out / LAST, state)


def _totals(path: Path, value: Any) -> EpochTotals:
    """A mid-epoch checkpoint's sums (``EpochTotals.as_dict``), types checked."""
    kinds = {"loss_sum": float, "correct": int, "seen": int, "count": int, "seconds": float}
    if not isinstance(value, dict) or set(value) != set(kinds) or any(
            isinstance(value[k], bool) or not isinstance(value[k], (int, float) if t is float else int) or value[k] < 0
            for k, t in kinds.items()):
        raise CheckpointError(f"{path}: partial is {value!r:.100}, expected the epoch's sums {sorted(kinds)} "
                              ">= 0; remove it and train without --resume")
    return EpochTotals(**{k: t(value[k]) for k, t in kinds.items()})
