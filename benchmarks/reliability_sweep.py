"""Every damaged input of ``tests/reliability/damage.py`` through every operation that must refuse it,
each in its own forked child; tallies the outcomes (issue 11's table).

    python benchmarks/reliability_sweep.py --out reliability.json [--classes bad-ids,truncated]

To measure another checkout of the product with these damages: ``PYTHONPATH=/path/to/checkout python
benchmarks/reliability_sweep.py --named-rc 1,2`` (before issue 11 the CLI exited 1 on a named error).

Operations: ``outre info --verify``, ``outre partition`` and a loader epoch for a damaged dataset;
``outre stats redundancy --partitions`` and a partition-mode loader epoch for a damaged partition
folder (or a partition name that is a path); ``outre convert`` for a damaged ``.npz``.  Outcomes:
``crash`` (segfault, bus error: the child died of a signal), ``hang`` (60 s), ``followed-outside``
(a path outside the folder was opened, or an escaping input was accepted), ``traceback``, ``accepted``
(exit 0: silently accepted), ``other`` (non-zero without the one-line error), ``named-error`` (exit 2,
one ``...: error: ...`` line: the only right answer).  ``changed`` counts refusals that still changed
the input folder (temp litter or a modified input).  Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))

from damage import CLASSES, make_base  # noqa: E402
from runner import OUTCOMES, classify, jobs_for, run_jobs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("reliability.json"))
    ap.add_argument("--classes", help="comma-separated damage classes (default: all)")
    ap.add_argument("--named-rc", default="2", help="exit codes of a named error (1,2 for older checkouts)")
    args = ap.parse_args()
    classes = args.classes.split(",") if args.classes else list(CLASSES)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="outre-sweep-") as tmp:
        root = Path(tmp)
        base = make_base(root)
        damages = [d for c in classes for d in CLASSES[c]()]
        jobs, of_job = [], {}
        for i, d in enumerate(damages):
            for job in jobs_for(d, base, root / f"case{i}", root):
                jobs.append(job)
                of_job[job["id"]] = d
        results = run_jobs(jobs, root, timeout=3600)
    rows: list[dict[str, Any]] = []
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for job in jobs:
        res, d = results[job["id"]], of_job[job["id"]]
        outcome = classify(d, res, tuple(int(c) for c in args.named_rc.split(",")))
        table[d.kind][outcome] += 1
        if outcome == "named-error" and res["changed"]:
            table[d.kind]["changed"] += 1
        rows.append({"id": job["id"], "outcome": outcome, "rc": res["rc"], "changed": res["changed"],
                     "outside": res["outside"], "seconds": res["seconds"], "stderr": res["stderr"][-2000:]})
    totals: Counter[str] = sum(table.values(), Counter())
    report = {"inputs": len(damages), "runs": len(jobs), "seconds": time.perf_counter() - start,
              "python": platform.python_version(), "table": {k: dict(v) for k, v in table.items()},
              "totals": dict(totals), "runs_detail": rows}
    args.out.write_text(json.dumps(report, indent=2))
    print(_markdown(table, totals, len(damages), len(jobs)))
    print(f"wrote {args.out}")


def _markdown(table: dict[str, Counter[str]], totals: Counter[str], inputs: int, runs: int) -> str:
    cols = [*OUTCOMES, "changed"]
    lines = [f"{inputs} damaged inputs, {runs} runs", "", "| class | " + " | ".join(cols) + " |",
             "|---|" + "---|" * len(cols)]
    for kind, counts in [*table.items(), ("total", totals)]:
        lines.append(f"| {kind} | " + " | ".join(str(counts.get(c, 0)) for c in cols) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
