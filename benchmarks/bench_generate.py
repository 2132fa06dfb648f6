"""Throughput of the synthetic graph generator (``outre generate``), public API only.

Generates one graph and writes seconds, nodes/s, edges/s, feature MB/s and peak RSS as JSON, e.g.

    python benchmarks/bench_generate.py --preset products-like --out /tmp/bench-g --json gen.json
    python benchmarks/bench_generate.py --num-nodes 1000000 --avg-degree 20 --feature-dim 128

The rates are end to end (generation plus the streaming write, fsync included) and so bounded by
the disk as well as the kernels; ``--feature-dim 0`` isolates the topology.  Peak RSS is the
process's high-water mark (``ru_maxrss``), including the interpreter, numpy and numba.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import outre_async as oa


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    overrides = {k: v for k, v in {
        "num_nodes": args.num_nodes, "avg_degree": args.avg_degree, "feature_dim": args.feature_dim,
    }.items() if v is not None}
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="outre-bench-generate-"))
    path = root / "dataset"
    _warm_up(root)
    try:
        result = _run(path, args, overrides)
    finally:
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)
            if not args.out:
                shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return result


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny", choices=sorted(oa.PRESETS))
    p.add_argument("--num-nodes", type=int)
    p.add_argument("--avg-degree", type=float)
    p.add_argument("--feature-dim", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk-nodes", type=int, help="nodes per step (default: the library's)")
    p.add_argument("--out", help="directory to generate into (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated dataset")
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--progress", action="store_true")
    return p


def _warm_up(root: Path) -> None:
    """Compile (or load the cached) numba kernels first, so that JIT time is not measured."""
    oa.generate(root / "warm-up", "tiny", num_nodes=200, avg_degree=4.0, feature_dim=4,
                num_communities=8, overwrite=True)
    shutil.rmtree(root / "warm-up")


def _run(path: Path, args: argparse.Namespace, overrides: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    oa.generate(path, args.preset, seed=args.seed, overwrite=True, progress=args.progress,
                chunk_nodes=args.chunk_nodes, **overrides)
    seconds = time.perf_counter() - start
    ds = oa.open_dataset(path)
    itemsize = ds.feature_dtype.itemsize if ds.feature_dim else 0
    feature_bytes = ds.num_nodes * ds.feature_dim * itemsize
    return {
        "benchmark": "generate",
        "preset": args.preset,
        "config": ds.manifest.meta["generator"],
        "num_nodes": ds.num_nodes,
        "num_edges": ds.num_edges,
        "feature_dim": ds.feature_dim,
        "seconds": seconds,
        "nodes_per_s": ds.num_nodes / seconds,
        "edges_per_s": ds.num_edges / seconds,
        "feature_mb_per_s": feature_bytes / 1e6 / seconds,
        "dataset_bytes": ds.summary()["total_bytes"],
        "peak_rss_mb": _peak_rss_mb(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }


def _peak_rss_mb() -> float:
    """High-water resident set size in MB (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


if __name__ == "__main__":
    main()
