"""``outre quickstart``: generate a small synthetic graph and train GraphSAGE on it end to end
with :class:`OutreLoader` (the plain ``for batch in loader`` bridge, the way a PyG loop uses it).

It is the smoke test a newcomer runs first, so it also trains the graph-blind MLP on the same batches
for one line of comparison: the planted communities make GraphSAGE clearly better.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError
from ._rng import check_seed
from ._train import EpochResult, evaluate, train_epoch
from .cache._history_config import history_for
from .machine._device import check_device_name, resolve_device
from .nn import MLP, GraphSAGE
from .sampling._sampler import check_fanouts


@dataclass(frozen=True, kw_only=True, slots=True)
class QuickstartConfig:
    preset: str = "quickstart"
    epochs: int = 3
    batch_size: int = 512
    fanouts: tuple[int, ...] = (10, 10)
    hidden: int = 128
    lr: float = 0.01
    seed: int = 0
    backend: str = "auto"
    staleness: int = 1  # > 1: the train loader keeps a historical embedding cache (OUTRE §4.3)
    device: str = "auto"  # auto (CUDA when present), cpu, cuda, cuda:N: the models, loaders and history there

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"{self.epochs=} must be >= 1")
        if self.batch_size < 1:
            raise ConfigError(f"{self.batch_size=} must be >= 1")
        if self.hidden < 1:
            raise ConfigError(f"{self.hidden=} must be >= 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"{self.lr=} must be a finite number > 0")
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.staleness < 1:
            raise ConfigError(f"{self.staleness=} must be >= 1 (1: no history)")
        object.__setattr__(self, "fanouts", check_fanouts(self.fanouts))
        check_device_name(self.device)


def run_quickstart(config: QuickstartConfig, *, directory: Path | None, progress: bool,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """Generate (into ``directory`` or a temp dir that is removed afterwards), train, report."""
    device = resolve_device(config.device, "--device")  # a missing GPU is refused before generating
    tmp = None if directory is not None else Path(tempfile.mkdtemp(prefix="outre-quickstart-"))
    try:
        path = (directory or tmp) / "dataset"  # type: ignore[operator]
        return _train(config, _dataset(config, path, progress, say), say, device, progress)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _dataset(config: QuickstartConfig, path: Path, progress: bool, say: Callable[[str], None]):  # type: ignore[no-untyped-def]
    from .ingest._generate import generate
    from .store._dataset import open_dataset

    if not (path / "manifest.json").exists():
        generate(path, config.preset, seed=config.seed, progress=progress)
    ds = open_dataset(path)
    say(f"dataset {path}: {ds.num_nodes:,} nodes, {ds.num_edges:,} edges, {ds.feature_dim}-dim features, "
        f"{ds.num_classes} classes, train/val/test {len(ds.split('train'))}/{len(ds.split('val'))}/"
        f"{len(ds.split('test'))}")
    return ds


def _train(config: QuickstartConfig, ds, say: Callable[[str], None], device: torch.device,  # type: ignore[no-untyped-def]
           progress: bool) -> dict[str, Any]:
    from .loader._loader import OutreLoader
    from .loader._options import IOOptions

    torch.manual_seed(config.seed)
    history = history_for(config.staleness, config.hidden)
    with contextlib.ExitStack() as stack:
        def loader(split: str, **extra: Any) -> OutreLoader:
            return stack.enter_context(OutreLoader(
                ds, split=split, fanouts=list(config.fanouts), batch_size=config.batch_size,
                shuffle=split == "train", seed=config.seed, io=IOOptions(backend=config.backend), device=str(device),
                **extra))

        loaders = {split: loader(split) for split in ("train", "val", "test")}
        if history is not None:  # GraphSAGE trains with the cache; the MLP on the same batches, without
            loaders["mlp_train"], loaders["train"] = loaders["train"], loader("train", history=history)
        return _compare(config, ds, loaders, say, device, progress)


def _compare(config: QuickstartConfig, ds, loaders, say: Callable[[str], None], device: torch.device,  # type: ignore[no-untyped-def]
             progress: bool) -> dict[str, Any]:
    layers = len(config.fanouts)
    models: dict[str, torch.nn.Module] = {
        "graphsage": GraphSAGE(ds.feature_dim, config.hidden, layers, ds.num_classes).to(device),
        "mlp": MLP(ds.feature_dim, config.hidden, layers, ds.num_classes).to(device),
    }
    say(f"GraphSAGE {layers} layers, hidden {config.hidden}, fanouts {list(config.fanouts)}, "
        f"batch size {config.batch_size}, OutreLoader, on {device}")
    say(f"{'epoch':>5} {'loss':>8} {'train acc':>9} {'val acc':>8} {'time s':>7} {'batches/s':>9}")
    history = _fit(models["graphsage"], loaders, config, say, progress)
    test = evaluate(models["graphsage"], loaders["test"])
    say(f"training the graph-blind MLP on the same batches for the comparison ({config.epochs} epochs)")
    mlp_history = _fit(models["mlp"], {**loaders, "train": loaders.get("mlp_train", loaders["train"])}, config,
                       None, progress, ticks=say)
    mlp_test = evaluate(models["mlp"], loaders["test"])
    say(f"test accuracy: GraphSAGE {test.accuracy:.3f}  vs  MLP on the same batches {mlp_test.accuracy:.3f}")
    stats = loaders["train"].stats()
    say(f"train loader: backend {stats.get('backend')}, buffer hit rate {stats['buffer']['hit_rate']:.2f}, "
        f"sampling {stats['sample_seconds']:.2f} s, extraction {stats['extract_seconds']:.2f} s, "
        f"trainer stalled {stats['stall_seconds']:.2f} s")
    if "history" in stats:
        h = stats["history"]
        say(f"history: staleness {h['staleness']}, {h['slots']:,} slots, {h['pulled']:,} rows pulled, "
            f"{h['pushed']:,} pushed, {stats['sampled_edges']:,} edges sampled")
    return {
        "dataset": ds.summary(),
        "epochs": history,
        "test_accuracy": test.accuracy,
        "mlp_epochs": mlp_history,
        "mlp_test_accuracy": mlp_test.accuracy,
        "loader_stats": stats,
        "device": str(device),
    }


def _fit(model, loaders, config: QuickstartConfig, say, progress: bool,  # type: ignore[no-untyped-def]
         ticks: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Train ``config.epochs`` epochs; ``say`` gets a row per epoch (None: no rows).  Within an epoch,
    a progress bar on stderr when ``progress``, else a line through ``ticks`` (default ``say``) every
    quarter of the epoch, so a run whose output is a pipe or a file shows it is alive."""
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    history = []
    for epoch in range(1, config.epochs + 1):
        batches = _progress(loaders["train"], epoch, progress, ticks or say)
        train: EpochResult = train_epoch(model, batches, optimizer, epoch=epoch)
        val = evaluate(model, loaders["val"])
        history.append({"epoch": epoch, "loss": train.loss, "train_accuracy": train.accuracy,
                        "val_accuracy": val.accuracy, "seconds": train.seconds, "batches": train.batches})
        if say is not None:
            say(f"{epoch:>5} {train.loss:>8.4f} {train.accuracy:>9.3f} {val.accuracy:>8.3f} "
                f"{train.seconds:>7.2f} {train.batches / max(train.seconds, 1e-9):>9.1f}")
    return history


def _progress(loader, epoch: int, bar: bool, say: Callable[[str], None] | None) -> Iterable[Any]:  # type: ignore[no-untyped-def]
    """``loader``'s batches, with a tqdm bar (stderr is a terminal) or a line every quarter epoch."""
    total = len(loader)
    if bar:
        from tqdm import tqdm

        return tqdm(loader, total=total, desc=f"epoch {epoch}", leave=False)
    if say is None:
        return loader
    return _ticks(loader, total, epoch, say)


def _ticks(batches: Iterable[Any], total: int, epoch: int, say: Callable[[str], None]) -> Iterator[Any]:
    every, start = max(1, math.ceil(total / 4)), time.perf_counter()
    for i, batch in enumerate(batches, 1):
        yield batch
        if i % every == 0 and i < total:
            say(f"      epoch {epoch}: {i}/{total} batches, {time.perf_counter() - start:.1f} s")
