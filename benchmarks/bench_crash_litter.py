"""Kill real ``outre`` writers at random moments and count what they leave (issue 11 items 4 and 8).

For each run: start ``outre generate`` (or ``outre partition``, ``outre reorder``, ``outre profile``, or
``outre generate --overwrite`` of an existing dataset) in a fresh folder, send SIGKILL or SIGTERM after a random delay within the verb's
measured run time, then record the exit code, the state of the output (absent, a valid dataset or
partition set, or partial: present but does not open), the hidden entries left beside it, and how
many remain after the next writer into the same folder and after ``outre clean`` (when this version
has it).  Only the CLI and ``open_dataset``/``open_partitions`` are used, so the same script measures
an older checkout (``PYTHONPATH=that/checkout``).

    python benchmarks/bench_crash_litter.py --runs 20 --signal KILL --verb generate --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import outre_async as oa

GEN = ["--num-nodes", "200000", "--feature-dim", "64", "--no-progress"]


def outre(*argv: str) -> list[str]:
    return [sys.executable, "-m", "outre_async.cli", *argv]


def hidden(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep) if folder.is_dir() else []


def state(verb: str, root: Path) -> str:
    try:
        if verb == "reorder":
            if not (root / "out").exists():
                return "absent"
            oa.open_dataset(root / "out").verify()
        elif verb == "profile":
            from outre_async.plan._files import read_profile

            if not (root / "ds" / "profile" / "p").exists():
                return "absent"
            read_profile(oa.open_dataset(root / "ds"), "p")
        elif verb == "partition":
            from outre_async.partition import open_partitions

            path = root / "ds" / "partitions" / "p"
            if not path.exists():
                return "absent"
            open_partitions(oa.open_dataset(root / "ds"), "p")
        else:
            if not (root / "ds").exists():
                return "absent"
            oa.open_dataset(root / "ds")
    except oa.OutreError:
        return "partial"
    return "valid"


def command(verb: str, root: Path) -> tuple[list[str], Path, set[str]]:
    """The writer's argv, the folder it writes into, and the names that belong there."""
    if verb == "partition":
        return outre("partition", str(root / "ds"), "--parts", "64", "--name", "p"), root / "ds" / "partitions", {"p"}
    if verb == "reorder":
        return outre("reorder", str(root / "ds"), str(root / "out"), "--partitions", "base"), root, {"ds", "out"}
    if verb == "profile":
        return (outre("profile", str(root / "ds"), "--fanouts", "10,5", "--batch-size", "1024", "--memory-budget",
                      "64MiB", "--backend", "pread", "--name", "p"), root / "ds" / "profile", {"p"})
    extra = ["--overwrite", "--seed", "1"] if verb == "overwrite" else []
    return outre("generate", str(root / "ds"), *GEN, *extra), root, {"ds"}


def prepare(verb: str, root: Path, base: Path | None) -> None:
    if verb != "generate" and base is not None:
        shutil.copytree(base, root / "ds")


def one_run(verb: str, sig: signal.Signals, delay: float, root: Path, base: Path | None,
            has_clean: bool) -> dict[str, Any]:
    prepare(verb, root, base)
    argv, parent, keep = command(verb, root)
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    child.send_signal(sig)
    _, err = child.communicate(timeout=300)
    row: dict[str, Any] = {"delay_s": round(delay, 3), "rc": child.returncode, "output": state(verb, root),
                           "traceback": "Traceback" in err, "litter": hidden(parent, keep)}
    row["litter_bytes"] = sum(f.stat().st_size for name in row["litter"] for f in (parent / name).rglob("*")
                              if f.is_file())
    nxt = outre("generate", str(parent / "next"), "--num-nodes", "300", "--feature-dim", "8", "--no-progress")
    subprocess.run(nxt, check=True, capture_output=True)
    row["litter_after_next_writer"] = hidden(parent, keep | {"next"})
    if has_clean:
        subprocess.run(outre("clean", str(root / "ds" if verb in ("partition", "profile") else root)), check=True,
                       capture_output=True)
        row["litter_after_clean"] = hidden(parent, keep | {"next"})
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    p.add_argument("--verb", choices=["generate", "overwrite", "partition", "reorder", "profile"], default="generate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    has_clean = subprocess.run(outre("clean", "--help"), capture_output=True).returncode == 0
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="outre-crash-") as tmp:
        base = None
        if args.verb != "generate":
            base = Path(tmp) / "base"
            subprocess.run(outre("generate", str(base), *GEN), check=True, capture_output=True)
            if args.verb == "reorder":  # the partitions it reorders by, part of every copy
                subprocess.run(outre("partition", str(base), "--parts", "64", "--name", "base"), check=True,
                               capture_output=True)
        for warm in (True, False):  # a first run compiles (numba caches); the second one is timed
            full = Path(tmp) / f"full-{warm}"
            full.mkdir()
            prepare(args.verb, full, base)
            start = time.perf_counter()  # the verb's full run time bounds the random delays
            subprocess.run(command(args.verb, full)[0], check=True, capture_output=True)
            span = time.perf_counter() - start
            shutil.rmtree(full)
        rows = []
        for i in range(args.runs):
            root = Path(tmp) / f"run{i}"
            root.mkdir()
            rows.append(one_run(args.verb, signal.Signals[f"SIG{args.signal}"], rng.uniform(0.0, span), root,
                                base, has_clean))
            shutil.rmtree(root)
    summary = {
        "verb": args.verb, "signal": args.signal, "runs": args.runs, "full_run_s": round(span, 2),
        "outre_async": str(Path(oa.__file__).parent), "has_clean": has_clean,
        "outputs": {s: sum(r["output"] == s for r in rows) for s in ("absent", "valid", "partial")},
        "tracebacks": sum(r["traceback"] for r in rows),
        "runs_with_litter": sum(bool(r["litter"]) for r in rows),
        "litter_bytes_max": max(r["litter_bytes"] for r in rows),
        "runs_with_litter_after_next_writer": sum(bool(r["litter_after_next_writer"]) for r in rows),
        "runs_with_litter_after_clean": sum(bool(r.get("litter_after_clean")) for r in rows) if has_clean else None,
        "exit_codes": sorted({r["rc"] for r in rows}),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
