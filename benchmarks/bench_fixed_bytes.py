"""The loader's fixed part in bytes per node: the least budget it accepts at two graph sizes, and the
memory plan's parts that grow with the node count.

    python benchmarks/bench_fixed_bytes.py                         # 1 M and 4 M nodes
    python benchmarks/bench_fixed_bytes.py --nodes 1000000 4000000 --json fixed.json

Generates ``outre generate --preset quickstart --feature-dim 32`` graphs of each ``--nodes`` count into a
temporary folder (removed at the end), builds ``OutreLoader(split="train", fanouts=10,10,
batch_size=1024)`` with a 1-byte budget to read the least budget from its ``ConfigError``, then a
loader at that budget to read ``stats()["memory"]``'s parts.  Bytes per node: the least budget's growth
between the first and last sizes over the nodes added, and each part's the same way (parts that do
not grow are left out); ``per_node`` is what the plan itself reports (``stats()["memory"]["per_node"]``).
``--plan-at N``: also the least budget the plan gives for the last graph's batches at ``N`` nodes (the
plan is a pure function of the sizes: planned, not run; it reads the loader's private sizes).
Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import outre_async as oa

ROOT = Path(__file__).resolve().parents[1]
LEAST = re.compile(r"is below the (\d+) bytes")


def generate(out: Path, nodes: int) -> None:
    subprocess.run([sys.executable, "-m", "outre_async.cli", "generate", "--preset", "quickstart",
                    "--num-nodes", str(nodes), "--feature-dim", "32", "--no-progress", str(out)],
                   check=True, stdout=subprocess.DEVNULL)


def loader(ds: oa.Dataset, budget: int) -> oa.OutreLoader:
    return oa.OutreLoader(ds, split="train", fanouts=[10, 10], batch_size=1024, memory_budget=budget)


def plan_at(ds: oa.Dataset, least: int, nodes: int) -> int:
    """The least budget the plan gives for this graph's batch sizes at ``nodes`` nodes."""
    from dataclasses import replace

    from outre_async.loader._budget import plan_memory_floor
    probe = loader(ds, least)
    sizes = replace(probe._setup.sizes, num_nodes=nodes)
    return plan_memory_floor(probe.config, sizes, source=probe._setup.source_kind)


def measure(path: Path, at: list[int]) -> dict[str, Any]:
    ds = oa.open_dataset(path)
    try:
        loader(ds, 1)
    except oa.ConfigError as exc:
        found = LEAST.search(str(exc))
        if found is None:
            raise
        least = int(found.group(1))
    else:
        raise SystemExit("a 1-byte budget was accepted")
    memory = loader(ds, least).stats()["memory"]
    parts = {k: v for k, v in memory.items() if isinstance(v, int) and k not in ("budget", "planned")}
    return {"nodes": ds.num_nodes, "least_budget": least, "parts": parts, "per_node": memory.get("per_node"),
            "planned_at": {n: plan_at(ds, least, n) for n in at}}


def per_node(rows: list[dict[str, Any]]) -> dict[str, Any]:
    a, b = rows[0], rows[-1]
    dn = b["nodes"] - a["nodes"]
    parts = {k: (b["parts"].get(k, 0) - a["parts"].get(k, 0)) / dn for k in {*a["parts"], *b["parts"]}}
    return {"least_budget": (b["least_budget"] - a["least_budget"]) / dn,
            "parts": {k: round(v, 3) for k, v in sorted(parts.items()) if abs(v) > 0.01}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plan-at", type=int, nargs="*", default=[], help="node counts to plan the least budget at")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fixed-bytes-", dir="/tmp") as tmp:
        for n in args.nodes:
            path = Path(tmp) / f"qs-{n}"
            generate(path, n)
            rows.append(measure(path, args.plan_at if n == args.nodes[-1] else []))
            r = rows[-1]
            print(f"{n:>11,} nodes: least budget {r['least_budget'] / 2**20:.1f} MiB "
                  f"({r['least_budget']} bytes); " + ", ".join(
                      f"{k} {v / 2**20:.1f} MiB" for k, v in r["parts"].items() if v)
                  + f"; per node {r['per_node']}", flush=True)
            for at, b in r["planned_at"].items():
                print(f"   planned at {at:,} nodes: least budget {b / 2**20:.1f} MiB", flush=True)
            subprocess.run(["rm", "-rf", str(path)], check=True)
    out: dict[str, Any] = {"rows": rows}
    if len(rows) > 1:
        out["bytes_per_node"] = per_node(rows)
        print(f"bytes per node: least budget {out['bytes_per_node']['least_budget']:.2f}; parts "
              + ", ".join(f"{k} {v}" for k, v in out["bytes_per_node"]["parts"].items()))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
