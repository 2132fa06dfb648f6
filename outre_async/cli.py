"""The ``outre`` command line: a thin layer of argument parsing over the library.

Every verb is a small function taking the parsed arguments and returning a JSON-able result; ``main``
prints it (a table, or JSON with ``--json``).  Every error is one line on stderr and exit code 2:
argparse's (values are checked by the ``type=`` functions of ``_cli_checks``), :class:`OutreError`
(an ``--overwrite`` refused included), and, as a backstop, ``OSError`` and ``MemoryError``; Ctrl-C is
130 and SIGTERM 143: SIGTERM is raised in the main thread like Ctrl-C, so every writer removes its
temporary folder on the way out (a second SIGTERM during that cleanup is ignored; ``kill -9`` still
works).  ``main(argv)`` is what the tests call.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from . import _cli_checks as checks
from .errors import ConfigError, OutreError
from ._units import format_bytes

Handler = Callable[[argparse.Namespace], dict[str, Any]]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``outre`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, 2) or --help (0)
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `outre train --nproc N` relaunches itself per rank
    try:
        with _sigterm_as_interrupt():
            result = args.handler(args)
    except OutreError as exc:
        return _fail(args, str(exc))
    except OSError as exc:  # a path the checks could not foresee (a read-only file system, a race)
        return _fail(args, os_error_message(exc))
    except MemoryError:
        return _fail(args, "out of memory; lower the sizes given (nodes, dims, budgets) or free memory")
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        from .store._tempdir import remove_own_temp_dirs

        remove_own_temp_dirs()  # those no ``with`` block saw: the signal came between two statements
        terminated = isinstance(exc, Terminated)
        print(f"outre {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else 130
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return 0


def os_error_message(exc: OSError) -> str:
    """One line for an ``OSError`` no check foresaw; a full or failing disk says what to do, and that the
    previous outputs stand (every writer installs its output only once it is whole: the reliability tests)."""
    where = f": {exc.filename}" if exc.filename is not None else ""
    text = f"{exc.strerror or exc}{where}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
        text += ("; nothing was replaced (what was there before is as it was): free space on that disk, or "
                 "write to another folder, and run it again")
    return text


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that every ``with`` block cleans up."""


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signal handlers live there only
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail(args: argparse.Namespace, message: str) -> int:
    print(f"outre {args.command}: error: " + " ".join(message.split()), file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """One line per usage error (not argparse's usage block), and ``--fanouts -1,5`` is a value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = checks.fanout_list_matcher

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="outre", description="Out-of-core GNN training on one machine.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.set_defaults(command=None)
    for name, add in _VERBS.items():
        handler, help_text = add
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="show progress bars (default: when stderr is a terminal)")
        _ARGS[name](p)
        checks.show_defaults(p)
        p.set_defaults(handler=handler)
    return parser


def _progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else bool(args.progress)


def _say(args: argparse.Namespace, text: str) -> None:
    """Human output goes to stdout unless --json owns stdout; flushed, so that a pipe or a file gets
    each line when it is said, not when the block buffer fills (or the run ends)."""
    print(text, file=sys.stderr if args.json else sys.stdout, flush=True)


# -- generate, convert, recast (implementation in outre_async.ingest._cli) -------------------------


def _ingest_verb(name: str) -> tuple[Callable[[argparse.ArgumentParser], None], Handler]:
    """The parser and handler of an ingest verb: ``add_<name>_arguments`` and ``run_<name>`` of
    ``ingest._cli``, imported when the verb is used (the parser of another verb never loads it)."""
    def add(p: argparse.ArgumentParser) -> None:
        from .ingest import _cli

        getattr(_cli, f"add_{name}_arguments")(p)

    def handle(args: argparse.Namespace) -> dict[str, Any]:
        from .ingest import _cli

        return getattr(_cli, f"run_{name}")(args, lambda text: _say(args, text), _progress(args))

    return add, handle


(_args_generate, _cmd_generate), (_args_convert, _cmd_convert), (_args_recast, _cmd_recast) = (
    _ingest_verb("generate"), _ingest_verb("convert"), _ingest_verb("recast"))


# -- info ------------------------------------------------------------------------------------------


def _args_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", type=Path)
    p.add_argument("--verify", action="store_true", help="also scan every edge and feature value (O(E + N*D))")


def _cmd_info(args: argparse.Namespace) -> dict[str, Any]:
    from .store._dataset import open_dataset
    from .store._info_lines import dataset_lines

    ds = open_dataset(args.dataset)
    if args.verify:
        ds.verify()
    s = ds.summary()
    lines = dataset_lines(s, ds.indices.dtype)
    if args.verify:
        lines.append("verify       ok (every neighbour id in range, every feature value finite)")
    from .partition._cli import info_lines
    from .partition._reader import list_partitions

    s["partitions"] = list_partitions(ds)
    lines += info_lines(s["partitions"])
    _say(args, "\n".join(lines))
    return s


# -- split-edges -----------------------------------------------------------------------------------


def _args_split_edges(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", type=Path)
    p.add_argument("out", type=Path, help="the new dataset: DATASET without the held-out edges, with edge splits")
    p.add_argument("--val", type=float, default=0.05, help="share of the node pairs held out for validation")
    p.add_argument("--test", type=float, default=0.1, help="share of the node pairs held out for testing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--undirected", action=argparse.BooleanOptionalAction, default=None,
                   help="split both directions of a pair together (default: when every edge has its reverse)")
    p.add_argument("--disjoint-train-ratio", type=float, default=0.0,
                   help="share of the training pairs kept out of message passing (supervision only)")
    p.add_argument("--eval-negatives", type=int, default=1, help="fixed negatives per val/test pair (0: none)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it is a dataset")


def _cmd_split_edges(args: argparse.Namespace) -> dict[str, Any]:
    from .ingest._split_edges import split_edges, split_summary

    out = split_edges(args.dataset, args.out, val=args.val, test=args.test, seed=args.seed, undirected=args.undirected,
                      disjoint_train_ratio=args.disjoint_train_ratio, eval_negatives=args.eval_negatives,
                      overwrite=args.overwrite)
    s = split_summary(out)
    _say(args, f"wrote {out}: {s['num_edges']:,} message-passing edges; edge splits "
               + "  ".join(f"{k} {v:,}" for k, v in s["edge_splits"].items()))
    return s


# -- clean -----------------------------------------------------------------------------------------


def _args_clean(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="a folder outre writes into: a dataset's parent, a dataset "
                                          "(its partitions/ and profile/ too), a --tmp-dir")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, change nothing")


def _cmd_clean(args: argparse.Namespace) -> dict[str, Any]:
    from .store._litter import collect_litter

    if not args.dir.is_dir():
        raise ConfigError(f"outre clean needs a folder, {args.dir} is not one")
    parents = (args.dir, args.dir / "partitions", args.dir / "profile")  # a dataset's writers write into these
    found = [x for parent in parents for x in collect_litter(parent, dry_run=args.dry_run)]
    verb = ({"removed": "would remove", "restored": "would restore", "kept": "would keep", "failed": "failed"}
            if args.dry_run else {"removed": "removed", "restored": "restored", "kept": "kept", "failed": "failed"})
    lines = [f"{verb[x.action]:16s} {x.path}  (pid {x.pid}, {format_bytes(x.bytes)})"
             + (f": {x.detail}" if x.detail else "") for x in found]
    count = {action: sum(x.action == action for x in found) for action in verb}
    freed = sum(x.bytes for x in found if x.action == "removed")
    lines.append(f"{args.dir}: {count['removed']} dead writers' temp folder(s) {'would be' if args.dry_run else 'were'} removed "
                 f"({format_bytes(freed)}), {count['restored']} restored, {count['kept']} of live writers "
                 f"kept, {count['failed']} failed")
    _say(args, "\n".join(lines))
    return {"dir": str(args.dir), "dry_run": args.dry_run, "bytes_freed": freed, **count,
            "folders": [x.as_dict() for x in found]}


# -- quickstart ------------------------------------------------------------------------------------


def _args_quickstart(p: argparse.ArgumentParser) -> None:
    from .features._backend_names import BACKENDS

    p.add_argument("--dir", type=Path, help="keep the generated dataset here (default: a temp dir, removed)")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--epochs", type=checks.count(), default=3)
    p.add_argument("--batch-size", type=checks.count(), default=512)
    p.add_argument("--fanouts", default="10,10", help="comma-separated, one per layer (-1: all neighbours)")
    p.add_argument("--hidden", type=checks.count(), default=128)
    p.add_argument("--lr", type=checks.finite(positive=True), default=0.01)
    p.add_argument("--seed", type=checks.seed, default=0)
    p.add_argument("--staleness", type=checks.count(), default=1,
                   help="historical embedding cache: steps a cached h^(L-1) may be old (1: off)")
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="feature I/O backend of the loader")
    p.add_argument("--device", type=checks.device, default="auto",
                   help="auto (CUDA when present, the default), cpu, cuda or cuda:N: models and batches there")


def _cmd_quickstart(args: argparse.Namespace) -> dict[str, Any]:
    from ._quickstart import QuickstartConfig, run_quickstart

    # two models of 3 hidden x hidden layers at most, with Adam's two moments: 4 copies of float32 weights
    checks.check_fits_memory(f"--hidden {args.hidden:,}", 2 * 3 * args.hidden * args.hidden * 4 * 4)
    if args.dir is not None:
        checks.check_output_dir("--dir", args.dir)
    config = QuickstartConfig(
        preset=args.preset, epochs=args.epochs, batch_size=args.batch_size,
        fanouts=parse_fanouts(args.fanouts), hidden=args.hidden, lr=args.lr, seed=args.seed,
        backend=args.backend, staleness=args.staleness, device=args.device,
    )
    if _progress(args):  # the first run on a machine: about a minute before the first epoch's batches
        checks.say_if_compiling()
    return run_quickstart(config, directory=args.dir, progress=_progress(args), say=lambda text: _say(args, text))


def parse_fanouts(text: str) -> tuple[int, ...]:
    from .sampling._sampler import check_fanouts  # the one fanout rule (imported late: numba is slow to load)

    try:
        fanouts = tuple(int(part) for part in text.split(","))
    except ValueError as exc:
        raise ConfigError(f"fanouts must be comma-separated integers like 10,10, got {text!r}") from exc
    return check_fanouts(fanouts)


# -- train (implementation in outre_async.trainer._cli) -------------------------------------------


def _args_train(p: argparse.ArgumentParser) -> None:
    from .trainer._cli import add_arguments

    add_arguments(p)


def _cmd_train(args: argparse.Namespace) -> dict[str, Any]:
    from .trainer._cli import run_command

    return run_command(args, lambda text: _say(args, text), _progress(args), parse_fanouts)


# -- bench (implementation in outre_async.bench._cli) ----------------------------------------------


def _args_bench(p: argparse.ArgumentParser) -> None:
    from .bench._cli import add_arguments

    add_arguments(p)


def _cmd_bench(args: argparse.Namespace) -> dict[str, Any]:
    from .bench._cli import run_command

    return run_command(args, lambda text: _say(args, text))


# -- partition, stats (implementation in outre_async.partition._cli) ------------------------------


def _args_partition(p: argparse.ArgumentParser) -> None:
    from .partition._cli import add_partition_arguments

    add_partition_arguments(p)


def _cmd_partition(args: argparse.Namespace) -> dict[str, Any]:
    from .partition._cli import run_partition

    return run_partition(args, progress=_progress(args), say=lambda text: _say(args, text))


def _args_reorder(p: argparse.ArgumentParser) -> None:
    from .partition._cli import add_reorder_arguments

    add_reorder_arguments(p)


def _cmd_reorder(args: argparse.Namespace) -> dict[str, Any]:
    from .partition._cli import run_reorder

    return run_reorder(args, say=lambda text: _say(args, text))


def _args_stats(p: argparse.ArgumentParser) -> None:
    from .partition._cli import add_stats_arguments

    add_stats_arguments(p)


def _cmd_stats(args: argparse.Namespace) -> dict[str, Any]:
    from .partition._cli import run_stats

    return run_stats(args, say=lambda text: _say(args, text), parse_fanouts=parse_fanouts)


# -- profile (implementation in outre_async.profiling._cli) ---------------------------------------


def _args_profile(p: argparse.ArgumentParser) -> None:
    from .profiling._cli import add_arguments

    add_arguments(p, parse_fanouts)


def _cmd_profile(args: argparse.Namespace) -> dict[str, Any]:
    from .profiling._cli import run

    return run(args, progress=_progress(args), say=lambda text: _say(args, text))


# -- probe (implementation in outre_async.profiling._probe_cli) ----------------------------------------------


def _args_probe(p: argparse.ArgumentParser) -> None:
    from .profiling._probe_cli import add_arguments

    add_arguments(p)


def _cmd_probe(args: argparse.Namespace) -> dict[str, Any]:
    from .profiling._probe_cli import run

    return run(args, say=lambda text: _say(args, text))


_VERBS: dict[str, tuple[Handler, str]] = {
    "generate": (_cmd_generate, "generate a synthetic graph with planted communities into a dataset"),
    "convert": (_cmd_convert, "import a graph (OGB raw folder, .npz, PyG .pt, edge list) into a dataset"),
    "info": (_cmd_info, "show a dataset's counts, degree statistics, sizes and splits"),
    "quickstart": (_cmd_quickstart, "generate a small graph and train GraphSAGE on it"),
    "partition": (_cmd_partition, "partition a dataset with streaming FENNEL into partitions/<name>/"),
    "reorder": (_cmd_reorder, "write a copy of a dataset renumbered so each partition's nodes are contiguous"),
    "recast": (_cmd_recast, "write a copy of a dataset with its features stored as float32, float16, bfloat16 or int8"),
    "split-edges": (_cmd_split_edges, "write a copy of a dataset with train/val/test edge splits for link prediction"),
    "stats": (_cmd_stats, "dataset statistics: `stats redundancy` = OUTRE's redundancy ratio"),
    "train": (_cmd_train, "train a GNN with the loader, evaluate with layer-wise inference, checkpoint"),
    "bench": (_cmd_bench, "run systems side by side under a memory cap against the physical limit"),
    "clean": (_cmd_clean, "remove the temporary folders that killed outre writers left in a folder"),
    "profile": (_cmd_profile, "pre-sample a loader setup, measure miss costs, split its memory budget"),
    "probe": (_cmd_probe, "measure the disk's random reads by queue depth and read size (O_DIRECT, cached)"),
}
_ARGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "generate": _args_generate, "convert": _args_convert, "info": _args_info, "quickstart": _args_quickstart,
    "partition": _args_partition, "reorder": _args_reorder, "recast": _args_recast, "split-edges": _args_split_edges,
    "stats": _args_stats,
    "bench": _args_bench, "clean": _args_clean, "train": _args_train, "profile": _args_profile,
    "probe": _args_probe,
}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
