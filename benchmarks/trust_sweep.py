"""Every hostile small file of ``tests/reliability/small_files.py`` through the reader that must refuse
it, each in its own forked child (20 s alarm); tallies the outcomes per class (issue 27's table).

    python benchmarks/trust_sweep.py --out trust.json

To measure another checkout (the "before" column): ``PYTHONPATH=/path/to/checkout python
benchmarks/trust_sweep.py``.  Outcomes as in ``reliability_sweep.py`` (``hang``: killed by the
alarm; ``named-error``: one ``...: error: ...`` line, the only right answer), plus the bytes each
reader read (``rchar``).  Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))

from runner import OUTCOMES, classify, run_jobs  # noqa: E402
from small_files import all_hostile, call_for, make_project, materialize  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("trust.json"))
    args = ap.parse_args()
    start = time.perf_counter()
    cases = all_hostile()
    with tempfile.TemporaryDirectory(prefix="trust-") as tmp:
        root = Path(tmp)
        project = make_project(root)
        jobs = []
        for i, h in enumerate(cases):
            call, call_args = call_for(h, materialize(project, h, root / f"case{i}"))
            jobs.append({"id": f"{h.id}@call", "verb": "call", "call": call, "args": call_args, "timeout": 20,
                         "io": str(root / f"case{i}.io"), "logs": str(root)})
        results = run_jobs(jobs, root, timeout=3600)
        reads = {h.id: (root / f"case{i}.io").read_text() for i, h in enumerate(cases) if (root / f"case{i}.io").exists()}
    table: dict[str, Counter[str]] = defaultdict(Counter)
    rows = []
    for h in cases:
        res = results[f"{h.id}@call"]
        outcome = classify(SimpleNamespace(escape=False, unread_by=()), res)  # type: ignore[arg-type]
        table[h.cls][outcome] += 1
        rows.append({"id": h.id, "outcome": outcome, "rc": res["rc"], "read_bytes": reads.get(h.id),
                     "seconds": round(res["seconds"], 2), "stderr": res["stderr"][-600:]})
    report = {"cases": len(cases), "seconds": time.perf_counter() - start, "table": {k: dict(v) for k, v in table.items()},
              "runs": rows}
    args.out.write_text(json.dumps(report, indent=2))
    lines = ["| class | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    lines += [f"| {k} | " + " | ".join(str(v.get(c, 0)) for c in OUTCOMES) + " |" for k, v in table.items()]
    print("\n".join(lines))
    for r in rows:
        last = r["stderr"].strip().splitlines()[-1][:150] if r["stderr"].strip() else ""
        print(f"{r['id']:45s} {r['outcome']:12s} read {r['read_bytes']}  {last}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
