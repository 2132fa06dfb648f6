"""The ``outre generate`` and ``outre convert`` verbs: their arguments (built by ``outre_async.cli``
without loading an importer or numba) and their runs."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _cli_checks as checks
from ..errors import ConfigError
from .._units import format_bytes
from ..store._manifest import ALLOWED_DTYPES
from ..store._row_format import RowFormat

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
    row = RowFormat(dim=dim, stored=np.dtype(cfg.feature_dtype)).stored_row_bytes if dim else 0  # rows as written, unpadded
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
    p.add_argument("--feature-dtype", choices=ALLOWED_DTYPES["features"], default=None,
                   help="dtype of the stored features (default: float16 input stays float16, anything else "
                        "float32); float16 halves the bytes on disk, the loader delivers float32")
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
