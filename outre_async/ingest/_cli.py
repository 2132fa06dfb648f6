"""The ``outre generate`` and ``outre convert`` verbs: their arguments (built by ``outre_async.cli``
without loading an importer or numba) and their runs."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _cli_checks as checks
from ..errors import ConfigError
from .._units import format_bytes
from ..store._manifest import ALLOWED_DTYPES, FEATURE_ENCODINGS
from ..store._row_format import storage_dtype

FEATURE_DTYPE_HELP = ("float32 (4 B a value, exact), float16 or bfloat16 (2 B: float16 keeps 11 significant bits "
                      "within ±65504, bfloat16 8 bits with float32's range), int8 (1 B: each column's min..max in "
                      "256 steps, error <= half a step); the loader delivers float32 either way")

Say = Callable[[str], None]


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, nargs="?", help="output dataset directory")
    p.add_argument("--preset", default="tiny", help="named shape (see `outre generate --list`)")
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    p.add_argument("--num-nodes", type=checks.count())
    p.add_argument("--avg-degree", type=checks.finite(positive=True))
    p.add_argument("--feature-dim", type=checks.count())
    p.add_argument("--num-classes", type=checks.count())
    p.add_argument("--num-communities", type=checks.count())
    p.add_argument("--seed", type=checks.seed, default=0)
    p.add_argument("--feature-dtype", choices=sorted(FEATURE_ENCODINGS), default=None,
                   help=f"how the features are stored (default: the preset's, float32): {FEATURE_DTYPE_HELP}")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT if it is a dataset this tool wrote (anything else there is refused)")


def run_generate(args: argparse.Namespace, say: Say, progress: bool) -> dict[str, Any]:
    from ._gen_config import PRESETS
    from ._generate import generate

    if args.list:
        rows = {name: _config_dict(cfg) for name, cfg in PRESETS.items()}
        for name, cfg in rows.items():
            say(f"{name:15s} " + " ".join(f"{k}={v}" for k, v in cfg.items() if k != "name"))
        return {"presets": rows}
    if args.out is None:
        raise ConfigError("generate needs an output directory: outre generate --preset NAME OUT")
    overrides = {k: v for k, v in {
        "num_nodes": args.num_nodes, "avg_degree": args.avg_degree, "feature_dim": args.feature_dim,
        "num_classes": args.num_classes, "num_communities": args.num_communities,
        "feature_dtype": args.feature_dtype,
    }.items() if v is not None}
    _check_generate_sizes(args, overrides)
    start = time.perf_counter()
    path = generate(args.out, args.preset, seed=args.seed, overwrite=args.overwrite, progress=progress, **overrides)
    return _report_written(say, path, time.perf_counter() - start)


def _check_generate_sizes(args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    """Refuse a graph that cannot fit before writing anything: O(N) arrays in RAM, the files on disk."""
    from ._gen_config import resolve_config

    cfg = resolve_config(args.preset, overrides)
    n, dim = cfg.num_nodes, cfg.feature_dim
    checks.check_fits_memory(f"--num-nodes {n:,} (with --num-classes {cfg.num_classes} x --feature-dim {dim})",
                             n * 8 + cfg.num_classes * dim * 8)
    row = dim * storage_dtype(cfg.feature_dtype).itemsize  # rows as written, unpadded
    if cfg.feature_dtype == "int8":  # float32 rows spilled beside the output until the columns' ranges are known
        row += dim * storage_dtype("float32").itemsize
    disk = n * (row + cfg.avg_degree * 4 + 16)
    checks.check_output_dir("OUT", args.out, need_bytes=disk)


def _config_dict(cfg: Any) -> dict[str, Any]:
    return {name: getattr(cfg, name) for name in cfg.__slots__}


def _report_written(say: Say, path: Path, seconds: float) -> dict[str, Any]:
    from ..store._dataset import open_dataset

    summary = open_dataset(path).summary()
    say(f"wrote {path}: {summary['num_nodes']:,} nodes, {summary['num_edges']:,} edges, "
               f"dim {summary['feature_dim']}, {format_bytes(summary['total_bytes'])} in {seconds:.1f} s")
    return {**summary, "seconds": seconds}


def add_convert_arguments(p: argparse.ArgumentParser) -> None:
    from ._formats import FORMATS  # choices from the registries (imported when the parser is built)

    p.add_argument("src", type=Path, help="input: OGB raw folder, .npz, .pt (PyG Data), edge list")
    p.add_argument("out", type=Path, help="output dataset directory")
    p.add_argument("--format", choices=FORMATS, help="input format (default: detected from SRC)")
    p.add_argument("--undirected", action="store_true", help="add the reverse of every edge")
    p.add_argument("--drop-self-loops", action="store_true", help="leave out edges from a node to itself")
    p.add_argument("--dedupe", action="store_true", help="drop duplicate edges")
    p.add_argument("--num-nodes", type=checks.count(), help="node count for edge lists (default: max id + 1)")
    p.add_argument("--binary-dtype", choices=ALLOWED_DTYPES["indices"], help="id type of a binary edge list")
    p.add_argument("--memory-budget", type=checks.byte_size(allocated=True), default="1GiB",
                   help="RAM for the external edge sort (e.g. 512MiB)")
    p.add_argument("--feature-dtype", choices=sorted(FEATURE_ENCODINGS), default=None,
                   help="how the features are stored (default: a float16 or bfloat16 input stays so, anything else "
                        f"float32): {FEATURE_DTYPE_HELP}")
    p.add_argument("--drop-edge-features", action="store_true",
                   help="convert without edge_attr / edge_weight / link targets (else refused: not stored yet)")
    p.add_argument("--split-scheme", metavar="NAME",
                   help="OGB folder: the split/NAME/ to use (default: the only one present)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT if it is a dataset this tool wrote (anything else there is refused)")


def run_convert(args: argparse.Namespace, say: Say, progress: bool) -> dict[str, Any]:
    from ._convert import convert, detect_format

    if args.split_scheme is not None and (args.format or detect_format(args.src)) != "ogb":
        raise ConfigError(f"--split-scheme picks split/NAME/ of an OGB folder; {args.src} is not one (drop the flag)")
    if args.num_nodes is not None:
        checks.check_fits_memory(f"--num-nodes {args.num_nodes:,}", args.num_nodes * 8)
    checks.check_output_dir("OUT", args.out)
    opts: dict[str, Any] = {
        "undirected": args.undirected, "drop_self_loops": args.drop_self_loops, "dedupe": args.dedupe,
        "memory_budget": args.memory_budget, "feature_dtype": args.feature_dtype,
        "overwrite": args.overwrite, "progress": progress,
    }
    if args.drop_edge_features:
        opts["drop_edge_features"] = True
    if args.num_nodes is not None:
        opts["num_nodes"] = args.num_nodes
    if args.binary_dtype is not None:
        opts["binary_dtype"] = args.binary_dtype
    if args.split_scheme is not None:
        opts["split_scheme"] = args.split_scheme
    start = time.perf_counter()
    path = convert(args.src, args.out, format=args.format, **opts)
    return _report_written(say, path, time.perf_counter() - start)


def add_recast_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", type=Path, help="the dataset to copy")
    p.add_argument("--feature-dtype", required=True, choices=sorted(FEATURE_ENCODINGS),
                   help=f"how the copy stores its features: {FEATURE_DTYPE_HELP}")
    p.add_argument("--out", type=Path, required=True,
                   help="the copy's directory (topology, labels, splits and edge splits copied; partition it again)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT if it is a dataset this tool wrote (anything else there is refused)")


def run_recast(args: argparse.Namespace, say: Say, progress: bool) -> dict[str, Any]:
    from ..store._dataset import open_dataset
    from ._recast import recast, recast_summary

    ds = open_dataset(args.dataset)
    checks.check_output_dir("--out", args.out, need_bytes=_recast_disk_bytes(ds, args.feature_dtype))
    start = time.perf_counter()
    path = recast(ds, args.out, feature_dtype=args.feature_dtype, overwrite=args.overwrite, progress=progress)
    s = {**recast_summary(path), "seconds": time.perf_counter() - start}
    cast = s["feature_cast"]
    error = (f"; reconstruction error: max abs {cast['max_abs_error']:.3g}, relative RMS {cast['relative_rms']:.3g}"
             if cast else "; exact (no value changed)")
    say(f"wrote {path}: features {s['recast']['from']} -> {s['feature_dtype']} ({s['row_bytes']:,} B a row, "
        f"{format_bytes(s['features_bytes'])}) in {s['seconds']:.1f} s{error}")
    return s


def _recast_disk_bytes(ds: Any, feature_dtype: str) -> int:
    """What the copy needs on disk at most: the files but the features, the new rows (padded at
    most to whole sectors), and the float32 spill an int8 cast writes first."""
    rows = ds.num_nodes * ds.feature_dim * storage_dtype(feature_dtype).itemsize
    spill = ds.num_nodes * ds.feature_dim * storage_dtype("float32").itemsize if feature_dtype == "int8" else 0
    others = sum(p.stat().st_size for p in ds.path.iterdir() if p.is_file() and p != ds.features_path)
    return others + 2 * rows + spill
