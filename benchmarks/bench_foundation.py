"""Generator, converter and sampler throughput in one run, one JSON file (issue: foundation).

    python benchmarks/bench_foundation.py --json foundation.json                  # ~1M nodes, minutes
    python benchmarks/bench_foundation.py --num-nodes 10_000_000 --avg-degree 10 \\
        --dir /work/bench_tmp --json foundation-10m.json                          # the 10M / 100M run

Runs ``bench_generate.py``, ``bench_convert.py`` and ``bench_sampler.py`` one after the other, each
in its own child process (so each peak RSS is its own), at the same node count and mean degree,
and merges their JSON under ``generate``, ``convert`` and ``sampler``.  The sampler runs over the
dataset the generator wrote, so it samples the power-law community graph, not a uniform one.
Nothing here is asserted in CI; the machine may be shared, so compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="outre-bench-foundation-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        result = {
            "benchmark": "foundation",
            "num_nodes": args.num_nodes,
            "avg_degree": args.avg_degree,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
            "generate": _child(root, "bench_generate.py", [
                "--preset", args.preset, "--num-nodes", str(args.num_nodes),
                "--avg-degree", str(args.avg_degree), "--feature-dim", str(args.feature_dim),
                "--out", str(root), "--keep"]),
            "convert": _child(root, "bench_convert.py", [
                "--num-nodes", str(args.num_nodes),
                "--num-edges", str(int(args.num_nodes * args.avg_degree)),
                "--memory-budget", args.memory_budget, "--kind", args.convert_kind, "--dir", str(root)]),
        }
        if args.sampler:
            result["sampler"] = _child(root, "bench_sampler.py", [
                "--dataset", str(root / "dataset"), "--fanouts", args.fanouts, "--batch-size", "1024"])
    finally:
        shutil.rmtree(root / "dataset", ignore_errors=True)
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return result


def _child(root: Path, script: str, argv: list[str]) -> Any:
    """Run one benchmark script; its ``--json`` file is the result (stdout is its own report)."""
    out = root / f"{Path(script).stem}.json"
    subprocess.run([sys.executable, str(HERE / script), *argv, "--json", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=10.0)
    p.add_argument("--feature-dim", type=int, default=128)
    p.add_argument("--preset", default="papers-like", help="generator preset the sizes override")
    p.add_argument("--memory-budget", default="1GiB", help="converter's memory_budget")
    p.add_argument("--convert-kind", choices=["binary", "text", "both"], default="binary")
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--no-sampler", dest="sampler", action="store_false", help="skip the sampler")
    p.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    p.add_argument("--json", help="write the merged result here")
    return p


if __name__ == "__main__":
    main()
