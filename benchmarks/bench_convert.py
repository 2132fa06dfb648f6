"""Throughput and peak memory of ``oa.convert`` on a synthetic edge list (binary and/or text).

Writes a random (uniform or power-law in-degree) edge list of ``--num-edges`` pairs over
``--num-nodes`` nodes into ``--dir`` chunk by chunk (bounded memory), converts each file with
``oa.convert(..., memory_budget=...)`` in a fresh child process (so that its peak RSS is the
conversion's own; VmHWM), and writes JSON: seconds, edges/s, peak RSS, RSS before converting, and
the size of the result.  Public API only.

    python benchmarks/bench_convert.py --num-nodes 10_000_000 --num-edges 100_000_000 \\
        --memory-budget 1GiB --kind both --dir /data/tmp --json convert.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

CHUNK = 1 << 22  # edges generated per chunk


def _edges(num_nodes: int, num_edges: int, dist: str, seed: int):
    """Yield ``[k, 2]`` int64 chunks; 'powerlaw' skews destinations (in-degree ~ Zipf-like)."""
    rng = np.random.default_rng(seed)
    for start in range(0, num_edges, CHUNK):
        k = min(CHUNK, num_edges - start)
        src = rng.integers(0, num_nodes, k)
        if dist == "powerlaw":
            dst = np.minimum((num_nodes * rng.random(k) ** 3).astype(np.int64), num_nodes - 1)
        else:
            dst = rng.integers(0, num_nodes, k)
        yield np.stack([src, dst], axis=1)


@njit(cache=True)
def _format_pairs(pairs: np.ndarray, out: np.ndarray) -> int:
    """Write ``"src dst\\n"`` lines into ``out`` (uint8); return the bytes used."""
    pos = 0
    digits = np.empty(20, dtype=np.uint8)
    for i in range(pairs.shape[0]):
        for col in range(2):
            v = pairs[i, col]
            n = 0
            while True:
                digits[n] = 48 + v % 10
                v //= 10
                n += 1
                if v == 0:
                    break
            for j in range(n - 1, -1, -1):
                out[pos] = digits[j]
                pos += 1
            out[pos] = 32 if col == 0 else 10
            pos += 1
    return pos


def write_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """Write the requested edge-list files; return {kind: path}."""
    paths: dict[str, Path] = {}
    kinds = ["binary", "text"] if args.kind == "both" else [args.kind]
    dtype = np.int32 if args.num_nodes < 2**31 else np.int64
    files = {k: open(_input_path(args.dir, k, dtype), "wb") for k in kinds}  # noqa: SIM115
    try:
        for pairs in _edges(args.num_nodes, args.num_edges, args.distribution, args.seed):
            if "binary" in files:
                files["binary"].write(pairs.astype(dtype).tobytes())
            if "text" in files:
                buf = np.empty(pairs.shape[0] * 24, dtype=np.uint8)
                files["text"].write(buf[: _format_pairs(pairs, buf)].tobytes())
    finally:
        for kind, f in files.items():
            f.close()
            paths[kind] = Path(f.name)
    return paths


def _input_path(directory: Path, kind: str, dtype: type) -> Path:
    if kind == "text":
        return directory / "edges.txt"
    return directory / ("edges.i32" if dtype is np.int32 else "edges.i64")


def _peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM, which (unlike ru_maxrss) restarts at exec, so a
    child does not inherit its parent's peak; ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _convert_job(job: dict[str, Any]) -> dict[str, Any]:
    """Runs in a fresh child process: import, convert, report time and peak RSS."""
    import outre_async as oa

    before = _peak_rss()
    start = time.perf_counter()
    path = oa.convert(
        job["src"],
        job["out"],
        memory_budget=job["budget"],
        num_nodes=job["num_nodes"],
        overwrite=True,
    )
    seconds = time.perf_counter() - start
    peak = _peak_rss()  # before opening the result: summary() makes its own O(N) copies
    ds = oa.open_dataset(path)
    return {
        "seconds": seconds,
        "peak_rss_bytes": peak,
        "rss_after_import_bytes": before,
        "num_edges": ds.num_edges,
        "dataset_bytes": sum(f.stat().st_size for f in Path(path).iterdir()),
    }


def _in_child(job: dict[str, Any]) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(job)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"conversion failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    inputs = write_inputs(args)
    results: dict[str, Any] = {"generate_seconds": time.perf_counter() - start}
    for kind, path in inputs.items():
        out = args.dir / f"out-{kind}"
        job = {
            "src": str(path),
            "out": str(out),
            "budget": args.memory_budget,
            "num_nodes": args.num_nodes,
        }
        res = _in_child(job)
        res["edges_per_second"] = args.num_edges / res["seconds"]
        res["input_bytes"] = path.stat().st_size
        results[kind] = res
        shutil.rmtree(out, ignore_errors=True)
        if not args.keep:
            path.unlink()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--num-edges", type=int, default=10_000_000)
    p.add_argument("--distribution", choices=["uniform", "powerlaw"], default="powerlaw")
    p.add_argument("--kind", choices=["binary", "text", "both"], default="both")
    p.add_argument("--memory-budget", default="1GiB", help="memory_budget passed to oa.convert")
    p.add_argument(
        "--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)"
    )
    p.add_argument("--keep", action="store_true", help="keep the generated inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="write results here (default: stdout)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one conversion job
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_convert_job(json.loads(args.child))))
        return 0
    own_dir = args.dir is None
    args.dir = Path(tempfile.mkdtemp(prefix="bench-convert-")) if own_dir else args.dir
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        config = {k: str(v) for k, v in vars(args).items() if k != "child"}
        results = {"config": config, "cpu_count": os.cpu_count(), **run(args)}
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text, file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
