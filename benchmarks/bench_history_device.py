"""The history's own cost per step: pull (gather at hand-over) + push (the hook's copy, then the
scatter on the loop), host table against the device table, optionally against another source tree.

    python benchmarks/bench_history_device.py                                  # CPU: host vs device-on-CPU
    python benchmarks/bench_history_device.py --baseline-src /tmp/main-src --repeats 5 --json hist.json
    python benchmarks/bench_history_device.py --device cuda                    # a GPU: the real contrast

A generated ``products-like`` store of ``--nodes`` nodes (``--dim`` float32 features), fanouts
``--fanouts``, batch ``--batch-size``, ``HistoryConfig(staleness=--staleness, dim=--hidden, warmup=0,
admission="all", placement=P)`` with P = ``host`` and ``device``, and a 2-layer GraphSAGE trained
(SGD, one torch thread) for ``--epochs`` epochs through the sync bridge (so the hook's push and the
loop's write run on different threads, as in a training script).  Each run is a fresh child process
timing, with ``time.perf_counter`` around the loader's own methods: ``EpochHistory.record`` (the
step's pull: clock, age check, the rows' gather and, for a host table on a GPU, their copy),
``HistoryRecord.exchange`` (the hook: pushed rows indexed out of h, to the table's device, pulled
rows put in) and ``HistoryOwner.apply`` (the push's write).  On a CUDA device each timed call
ends with a ``torch.cuda.synchronize`` so that device work is counted where it is issued.  Runs
alternate between the settings (and trees, ``--baseline-src``: that tree's loader, placement not
passed, i.e. its host table), so ratios come from runs made side by side; reported: medians over
``--repeats`` of µs per step of each part and their sum, rows pulled and pushed per step.  Nothing
here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import torch
    import outre_async as oa
    from outre_async.loader import _history as H

    args = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    cuda = args["device"].startswith("cuda")
    spent = {"pull": 0.0, "exchange": 0.0, "apply": 0.0}

    def timed(cls, name, key):
        real = getattr(cls, name)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                out = real(*a, **k)
                if cuda:
                    torch.cuda.synchronize()
                return out
            finally:
                spent[key] += time.perf_counter() - t
        setattr(cls, name, wrapper)

    timed(H.EpochHistory, "record", "pull")
    timed(H.HistoryRecord, "exchange", "exchange")
    timed(H.HistoryOwner, "apply", "apply")
    ds = oa.open_dataset(args["dataset"])
    extra = {} if args["placement"] is None else {"placement": args["placement"]}
    hist = oa.HistoryConfig(staleness=args["staleness"], dim=args["hidden"], warmup=0, admission="all", **extra)
    torch.manual_seed(0)
    model = oa.GraphSAGE(ds.feature_dim, args["hidden"], 2, ds.num_classes).to(args["device"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    with oa.OutreLoader(ds, fanouts=args["fanouts"], batch_size=args["batch_size"], history=hist, ordered=True,
                        io=oa.IOOptions(backend="memory"), device=args["device"], seed=0) as loader:
        for _ in range(args["epochs"]):
            for batch in loader:
                out = model(batch.x, batch.edge_index, history=batch.history)[: batch.batch_size]
                loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size])
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
        h = loader.stats()["history"]
    print(json.dumps({"steps": steps, "spent": spent, "pulled": h["pulled"], "pushed": h["pushed"],
                      "placement": h.get("placement", "host"), "slots": h["slots"]}))
""")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="/tmp/outre-bench", help="where the generated store is kept")
    p.add_argument("--dataset", help="an existing store instead of the generated one")
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--staleness", type=int, default=100)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline-src", help="another source tree (e.g. main's) run side by side, host table")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def dataset(args: argparse.Namespace) -> Path:
    if args.dataset:
        return Path(args.dataset)
    path = Path(args.dir) / f"products-like-{args.nodes}x{args.dim}"
    if not (path / "manifest.json").exists():
        import outre_async as oa

        oa.generate(path, "products-like", num_nodes=args.nodes, feature_dim=args.dim, overwrite=True)
    return path


def run_child(src: Path, placement: str | None, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    spec = {"dataset": str(path), "fanouts": [int(f) for f in args.fanouts.split(",")], "placement": placement,
            "batch_size": args.batch_size, "hidden": args.hidden, "staleness": args.staleness,
            "epochs": args.epochs, "device": args.device}
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-P", "-c", CHILD, json.dumps(spec)], env=env, cwd=src,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"the run under {src} ({placement}) failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    steps = max(1, r["steps"])
    us = {f"{k}_us_per_step": v / steps * 1e6 for k, v in r["spent"].items()}
    return {**us, "total_us_per_step": sum(us.values()), "pulled_per_step": r["pulled"] / steps,
            "pushed_per_step": r["pushed"] / steps, "steps": r["steps"], "slots": r["slots"],
            "placement": r["placement"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = dataset(args)
    settings: dict[str, tuple[Path, str | None]] = {"host": (ROOT, "host"), "device": (ROOT, "device")}
    if args.baseline_src:
        settings["baseline"] = (Path(args.baseline_src), None)
    for src, placement in settings.values():  # warm-up: numba's cache and the page cache, not measured
        run_child(src, placement, path, argparse.Namespace(**{**vars(args), "epochs": 1}))
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        for name, (src, placement) in settings.items():
            runs.append({"setting": name, "repeat": rep, **run_child(src, placement, path, args)})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    keys = ("pull_us_per_step", "exchange_us_per_step", "apply_us_per_step", "total_us_per_step",
            "pulled_per_step", "pushed_per_step")
    summary: dict[str, Any] = {name: {k: statistics.median(r[k] for r in runs if r["setting"] == name) for k in keys}
                               for name in settings}
    for name in settings:
        if name != "host":
            pairs = zip([r for r in runs if r["setting"] == name], [r for r in runs if r["setting"] == "host"],
                        strict=True)
            summary[f"ratio_{name}_over_host"] = statistics.median(a["total_us_per_step"] / b["total_us_per_step"]
                                                                   for a, b in pairs)
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
