"""``outre train`` arguments and handler (``cli.py`` only registers the verb)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _cli_checks as checks
from ..errors import ConfigError
from ._config import DECODERS, MODELS, TASKS, TrainConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..features._backend_names import BACKENDS

    p.add_argument("dataset", type=Path)
    p.add_argument("--task", choices=TASKS, default="node",
                   help="node classification, or link prediction on the dataset's edge splits (outre split-edges)")
    p.add_argument("--model", choices=MODELS, default="sage", help="the GNN (with --task link: the encoder)")
    p.add_argument("--decoder", choices=DECODERS, default="dot", help="--task link: how a pair of embeddings is scored")
    p.add_argument("--neg-amount", type=checks.finite(positive=True), default=1.0,
                   help="--task link: uniform negatives per training pair (binary cross-entropy)")
    p.add_argument("--candidates", type=checks.count(), default=100,
                   help="--task link: each val/test pair is ranked against this many (MRR, hits@10, AUC)")
    p.add_argument("--layers", type=checks.count(), default=None, help="default: one per fanout (2)")
    p.add_argument("--hidden", type=checks.count(), default=128)
    p.add_argument("--heads", type=checks.count(), default=4, help="GAT attention heads per hidden layer")
    p.add_argument("--dropout", type=checks.finite(nonnegative=True), default=0.5)
    p.add_argument("--fanouts", default=None, help="comma-separated, one per layer (-1: all); default 10 per layer")
    p.add_argument("--batch-size", type=checks.count(), default=512)
    p.add_argument("--epochs", type=checks.count(), default=10)
    p.add_argument("--lr", type=checks.finite(positive=True), default=0.01)
    p.add_argument("--weight-decay", type=checks.finite(nonnegative=True), default=0.0)
    p.add_argument("--seed", type=checks.seed, default=0)
    p.add_argument("--partitions", default=None, help="partition-based batches from partitions/NAME/")
    p.add_argument("--staleness", type=checks.count(), default=1, help="historical embedding cache (1: off)")
    p.add_argument("--memory-budget", type=checks.byte_size(allocated=True), default=None,
                   help="RAM for the loader only (its feature buffer, batches in flight, queues and caches; not the "
                        "model, the optimizer or PyTorch's own memory), also the chunk budget of layer-wise inference, "
                        "e.g. 2GiB (default: auto, what the dataset can use, at most 1/4 of the memory available)")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--deterministic", action="store_true", help="plan order (ordered=True): the same run twice")
    p.add_argument("--eval-every", type=checks.count(), default=1, help="layer-wise inference every N epochs")
    p.add_argument("--out", type=Path, default=None, help="checkpoints and metrics (default: DATASET-train-MODEL beside it)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt")
    p.add_argument("--checkpoint-every", type=checks.count(), default=None, metavar="N",
                   help="also replace last.pt every N training batches, so --resume continues mid-epoch with the "
                        "epoch's remaining batches (one process only; --staleness's cache is not saved)")
    p.add_argument("--force", action="store_true",
                   help="with --resume: continue even if last.pt was trained on another dataset (version) or options")
    p.add_argument("--profile", default=None,
                   help="split --memory-budget by profile/NAME/ (`outre profile`), or 'auto' to profile now")
    p.add_argument("--device", type=checks.device, default="auto",
                   help="auto (CUDA when present, the default), cpu, cuda or cuda:N: the model, the batches and the "
                        "history's pulled rows there (with --nproc each rank takes its own GPU on CUDA)")
    p.add_argument("--nproc", type=checks.count(), default=1,
                   help="data-parallel ranks on this host, started through torchrun (gloo on CPU, NCCL on CUDA)")


def run_command(args: argparse.Namespace, say: Callable[[str], None], progress: bool,
                parse_fanouts: Callable[[str], tuple[int, ...]]) -> dict[str, Any]:
    from ._report import rounded
    from ._run import run_train

    layers = args.layers
    fanouts = parse_fanouts(args.fanouts) if args.fanouts is not None else (10,) * (layers or 2)
    # the model's hidden x hidden weights, with their gradient and Adam's two moments
    checks.check_fits_memory(f"--hidden {args.hidden:,}", 4 * 4 * len(fanouts) * args.hidden * args.hidden)
    config = TrainConfig(model=args.model, layers=layers or len(fanouts), hidden=args.hidden, heads=args.heads,
                         dropout=args.dropout, fanouts=fanouts, batch_size=args.batch_size, epochs=args.epochs,
                         lr=args.lr, weight_decay=args.weight_decay, seed=args.seed, partitions=args.partitions,
                         staleness=args.staleness, memory_budget=args.memory_budget, backend=args.backend,
                         deterministic=args.deterministic, eval_every=args.eval_every, profile=args.profile,
                         device=args.device, checkpoint_every=args.checkpoint_every, task=args.task,
                         decoder=args.decoder, neg_amount=args.neg_amount, candidates=args.candidates)
    if args.checkpoint_every is not None and (args.nproc > 1 or "RANK" in os.environ):
        raise ConfigError("--checkpoint-every is for one process: each rank's loader is at its own place in the "
                          "epoch and rank 0 alone writes last.pt; drop it (--nproc runs checkpoint at epoch ends)")
    out = args.out or args.dataset.parent / f"{args.dataset.name}-train-{args.model}{'-link' if args.task == 'link' else ''}"
    if progress and "RANK" not in os.environ:  # one process, or the launcher (once, not per rank)
        checks.say_if_compiling()
    if args.task == "link" and args.nproc > 1:
        from ..errors import NotSupportedError

        raise NotSupportedError("--task link with --nproc is not supported yet: link prediction trains in one process; "
                                "leave --nproc out")
    if args.nproc > 1 and "RANK" not in os.environ:  # the launcher: torchrun starts nproc copies of this command
        from ..distributed import launch

        say(f"starting {args.nproc} data-parallel ranks through torchrun (rank 0 reports); --batch-size "
            f"{args.batch_size} is per rank: {args.nproc * args.batch_size} seeds per step")
        launch("outre_async.cli", _without_nproc(args.argv), nproc=args.nproc, module=True)
        return {"nproc": args.nproc, "out": str(out)}
    if args.force and not args.resume:
        raise ConfigError("--force only applies to --resume (continue a checkpoint of another dataset or options)")
    return rounded(run_train(args.dataset, config, out, resume=args.resume, force=args.force, progress=progress,
                             say=say, distributed="RANK" in os.environ))


def _without_nproc(argv: list[str]) -> list[str]:
    """``argv`` less ``--nproc N`` / ``--nproc=N`` (each rank runs the same command in one process)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out
