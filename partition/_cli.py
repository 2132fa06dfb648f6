"""The ``outre partition`` and ``outre stats redundancy`` verbs, and the partition lines of ``outre info``.

Registered by ``outre_async.cli`` (thin wrappers there); each ``run_*`` returns a JSON-able dict.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from outre_async import _cli_checks as checks
from outre_async.errors import ConfigError
from outre_async._units import format_bytes

Say = Callable[[str], None]


def add_partition_arguments(p: argparse.ArgumentParser) -> None:
    from ._format import MODES, OBJECTIVES

    p.add_argument("dataset", type=Path)
    p.add_argument("--parts", type=checks.count(),
                   help="number of partitions K (default: ~N/128 rounded to a power of two, within [16, 4096])")
    p.add_argument("--levels", type=int, choices=[1, 2], default=1, help="2: k1 parts, each split again")
    p.add_argument("--first-level", type=checks.count(), help="k1 of a two-level run (must divide K; default ~sqrt(K))")
    p.add_argument("--mode", choices=MODES, default="exact")
    p.add_argument("--passes", type=checks.count(), default=1, help="streaming passes (2+: restreaming, exact mode)")
    p.add_argument("--name", help="folder under partitions/ (default: fennel-K[...])")
    p.add_argument("--objective", choices=OBJECTIVES, default="fennel")
    p.add_argument("--gamma", type=checks.finite(positive=True), default=1.5)
    p.add_argument("--nu", type=checks.finite(positive=True), default=1.1, help="load limit: |P_i| <= nu n / K")
    p.add_argument("--alpha", type=checks.finite(nonnegative=True), help="FENNEL alpha (default sqrt(K) m / n^1.5)")
    p.add_argument("--train-weight", type=checks.finite(nonnegative=True), default=1.0, help="weight of the training-node balance term")
    p.add_argument("--chunk", type=checks.byte_size(allocated=True), default="64MiB", help="read buffer for the streamed indices")
    p.add_argument("--write-buffer", type=checks.byte_size(allocated=True), default="64MiB",
                   help="memory for regrouping the outputs into partition order (4 KiB x 3 per part at least)")
    p.add_argument("--bloom-memory", type=checks.byte_size(allocated=True), default="64MiB",
                   help="Bloom filters' total size per level (bloom mode)")
    p.add_argument("--reorder", type=Path, metavar="OUT",
                   help="then write OUT, the dataset renumbered partition by partition (see `outre reorder`; "
                        "its buffers: --write-buffer)")
    p.add_argument("--overwrite", action="store_true")


def run_partition(args: argparse.Namespace, *, progress: bool, say: Say) -> dict[str, Any]:
    from outre_async.store._dataset import open_dataset

    from ._api import partition
    from ._batches import default_num_parts
    from ._buckets import MIN_ROW_BYTES

    if args.first_level is not None and args.levels != 2:
        raise ConfigError(f"--first-level {args.first_level} needs --levels 2")
    if args.name is not None and not args.name.strip():
        raise ConfigError("--name must not be empty")
    ds = open_dataset(args.dataset)
    num_parts = args.parts if args.parts is not None else default_num_parts(ds.num_nodes)
    floor = 3 * MIN_ROW_BYTES * num_parts  # one 4 KiB row per part in each of the 3 regrouped files
    if args.write_buffer < floor:
        raise ConfigError(f"--write-buffer {format_bytes(args.write_buffer)} is below the floor of 4 KiB x 3 per part "
                          f"= {format_bytes(floor)} for {num_parts} parts; give at least that")
    options: dict[str, Any] = {
        "levels": args.levels, "mode": args.mode, "passes": args.passes, "objective": args.objective,
        "gamma": args.gamma, "nu": args.nu, "train_weight": args.train_weight,
        "chunk_edges": max(1, args.chunk // np.dtype(ds.manifest.indices.dtype).itemsize),
        "bloom_bytes": args.bloom_memory,
    }
    if args.first_level is not None:
        options["first_level"] = args.first_level
    if args.alpha is not None:
        options["alpha"] = args.alpha
    if args.reorder is not None:
        _check_reorder(ds, args.reorder, num_parts, args.write_buffer, "--write-buffer")
    parts = partition(ds, args.parts, name=args.name, overwrite=args.overwrite, progress=progress,
                      write_buffer_bytes=args.write_buffer, **options)
    meta = parts.meta
    q = meta["quality"]
    say(f"wrote {parts.path}: {parts.num_parts} parts, edge cut {q['edge_cut_fraction']:.4f}, "
        f"node balance {q['node_balance']:.3f}, train balance {_f(q['train_balance'])}, "
        f"{meta['seconds']:.1f} s ({_rate(meta)}), "
        f"peak RSS {format_bytes(meta['peak_rss_bytes'])}")
    result = {"path": str(parts.path), **meta}
    if args.reorder is not None:
        result["reordered"] = _reorder(ds, parts.name, args.reorder, args.overwrite, args.write_buffer, say)
    return result


def _rate(meta: dict[str, Any]) -> str:
    """The streaming rate without the kernels' compile time (a first run in a fresh environment
    compiles them: seconds that say nothing about streaming), in units that never print 0.00."""
    rate = meta["edges_per_second"]
    text = f"{rate / 1e6:.2f} M edges/s" if rate >= 1e5 else f"{rate / 1e3:.1f} k edges/s"
    compiling = meta.get("compile_seconds", 0.0)
    return f"{text} streaming" + (f", {compiling:.1f} s of it compiling the kernels" if compiling >= 0.05 else "")


def add_reorder_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", type=Path)
    p.add_argument("out", type=Path, help="the renumbered dataset to write (a new folder)")
    p.add_argument("--partitions", required=True, help="partition folder name under DATASET/partitions/")
    p.add_argument("--memory", type=checks.byte_size(allocated=True), default="64MiB",
                   help="buffers for the regrouping passes, besides O(N) id arrays (16 KiB per part at least)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it is an outre dataset")


def run_reorder(args: argparse.Namespace, *, say: Say) -> dict[str, Any]:
    from outre_async.store._dataset import open_dataset

    from ._reader import open_partitions

    ds = open_dataset(args.dataset)
    with open_partitions(ds, args.partitions) as parts:
        num_parts = parts.num_parts
    _check_reorder(ds, args.out, num_parts, args.memory, "--memory")
    return _reorder(ds, args.partitions, args.out, args.overwrite, args.memory, say)


def _check_reorder(ds: Any, out: Path, num_parts: int, memory: int, flag: str) -> None:
    """Up-front checks of a reorder (before a partitioning run that precedes it): buffers, room."""
    from ._reorder import memory_floor

    floor = memory_floor(num_parts, ds.row_layout.stride if ds.feature_dim else 0)
    if memory < floor:
        raise ConfigError(f"{flag} {format_bytes(memory)} is below the reorder's floor of {format_bytes(floor)} "
                          f"for {num_parts} parts (16 KiB per part); give at least that")
    sizes = ds.summary()["bytes"]
    checks.check_output_dir("OUT", out, need_bytes=sum(sizes.values()) + 2 * ds.num_edges * 8 + 40 * ds.num_nodes)


def _reorder(ds: Any, name: str, out: Path, overwrite: bool, memory: int, say: Say) -> dict[str, Any]:
    import time

    from ._output import peak_rss_bytes
    from ._reorder import reorder

    start = time.perf_counter()
    new = reorder(ds, name, out, overwrite=overwrite, memory_bytes=memory)
    seconds = time.perf_counter() - start
    say(f"wrote {new.path}: {new.num_nodes} nodes renumbered by the {name!r} partitions (each partition a "
        f"contiguous id range, partitions/{name}/ carried over), {seconds:.1f} s, peak RSS "
        f"{format_bytes(peak_rss_bytes())}; map ids back with Dataset.original_ids")
    return {"path": str(new.path), "partitions": name, "seconds": seconds, "memory_bytes": memory,
            "peak_rss_bytes": peak_rss_bytes()}


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def info_lines(rows: list[dict[str, Any]]) -> list[str]:
    """``outre info``'s partition lines."""
    if not rows:
        return ["partitions   none (create them with `outre partition DATASET`)"]
    out = []
    for r in rows:
        if r["status"] != "ok":
            out.append(f"partitions   {r['name']}: unusable: {r['status']}")
            continue
        out.append(f"partitions   {r['name']}: {r['parts']} parts, levels {r['levels']}, {r['mode']}, "
                   f"{r['passes']} pass(es), edge cut {r['edge_cut_fraction']:.4f}, "
                   f"balance {r['node_balance']:.3f} / train {_f(r['train_balance'])}")
    return out


def add_stats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["redundancy"], help="redundancy: OUTRE's redundancy ratio (eq. 2)")
    p.add_argument("dataset", type=Path)
    p.add_argument("--partitions", help="partition folder name for partition-based batches")
    p.add_argument("--fanouts", default="10,10,10")
    p.add_argument("--batch-size", type=checks.count(), default=1024)
    p.add_argument("--parts-per-batch", type=checks.count(), help="default: the loader's (see OutreLoader)")
    p.add_argument("--split", default="train")
    p.add_argument("--seed", type=checks.seed, default=0)
    p.add_argument("--max-batches", type=checks.count(), help="sample only this many batches of each plan (estimate)")


def run_stats(args: argparse.Namespace, *, say: Say, parse_fanouts: Callable[[str], tuple[int, ...]]) -> dict[str, Any]:
    from outre_async.store._dataset import open_dataset

    from ._reader import open_partitions
    from ._redundancy import redundancy_ratio

    ds = open_dataset(args.dataset)
    parts = open_partitions(ds, args.partitions) if args.partitions else None
    rr = redundancy_ratio(ds, fanouts=parse_fanouts(args.fanouts), batch_size=args.batch_size, partitions=parts,
                          parts_per_batch=args.parts_per_batch, split=args.split, seed=args.seed,
                          max_batches=args.max_batches)
    line = f"redundancy ratio  random {rr['random']['rr']:.2f}"
    if parts is not None:
        line += f"  partition ({parts.name}) {rr['partition']['rr']:.2f}  reduction {100 * rr['reduction']:.1f} %"
    say(line)
    return rr
