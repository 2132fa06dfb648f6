"""Wall time of ``outre`` commands that should not pay for torch: help, info, clean, an argument error.

    python benchmarks/bench_cli_startup.py                      # a tiny dataset is generated in a temp dir
    python benchmarks/bench_cli_startup.py --dataset DS --repeats 9 --json startup.json

Each command runs ``--repeats`` times as a fresh ``python -m outre_async.cli`` child (what the
``outre`` entry point runs); the median, min and max wall time, the median CPU time (user + system:
what the load of other processes changes least) and the heavy modules each imported (from
``python -X importtime``: torch, torch_geometric, numba) are printed.  Run it from another source
tree's root (``cd OTHER && python /path/to/bench_cli_startup.py``) to time that tree's code.  The
figures depend on the machine's load: compare runs made side by side.  Nothing here is asserted in
CI; ``tests/test_cli.py`` checks instead that building the parser imports no torch.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEAVY = ("torch", "torch_geometric", "numba")


def commands(dataset: Path, scratch: Path) -> dict[str, list[str]]:
    return {
        "outre --help": ["--help"],
        "outre train --help": ["train", "--help"],
        "outre bench --help": ["bench", "--help"],
        "outre partition --help": ["partition", "--help"],
        "outre info DS": ["info", str(dataset)],
        "outre clean DIR": ["clean", str(scratch)],
        "outre train DS --epochs 0 (error)": ["train", str(dataset), "--epochs", "0"],
    }


def time_one(argv: list[str], repeats: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "outre_async.cli", *argv]
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    traced = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], capture_output=True, text=True, check=False)
    imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if line.startswith("import time:")}
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls), "cpu_median_s": statistics.median(cpus),
            "heavy_imports": [m for m in HEAVY if m in imported]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, help="an outre dataset (default: generate the tiny preset)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dataset = args.dataset
        if dataset is None:
            dataset = Path(tmp) / "tiny"
            subprocess.run([sys.executable, "-m", "outre_async.cli", "generate", "--preset", "tiny", str(dataset)],
                           check=True, stdout=subprocess.DEVNULL)
        results = {name: time_one(argv, args.repeats) for name, argv in commands(dataset, Path(tmp)).items()}
    for name, r in results.items():
        print(f"{name:38s} median {r['median_s']:6.2f} s  (min {r['min_s']:.2f}, max {r['max_s']:.2f}), CPU {r['cpu_median_s']:.2f} s  "
              f"imports {', '.join(r['heavy_imports']) or 'none of ' + '/'.join(HEAVY)}")
    if args.json:
        args.json.write_text(json.dumps({"repeats": args.repeats, "results": results}, indent=2))


if __name__ == "__main__":
    main()
