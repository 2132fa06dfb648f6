"""`outre train` accuracy vs full-graph training of the same model in memory, and time to accuracy.

    python benchmarks/bench_train_accuracy.py --out trainacc.json \
        [--graphs cora,citeseer,facebook_pagepage] [--models sage,gcn] [--seeds 5] [--facebook-dim 256]

For each graph, model and seed: ``outre train`` (the CLI verb, run in this process through
``outre_async.cli.main``: OutreLoader mini-batches with sampled neighbourhoods, evaluation by
layer-wise full-neighbourhood inference every ``eval_every`` epochs, test accuracy at the best
validation accuracy), and full-graph training of the same ``oa.GraphSAGE`` / ``oa.GCN`` on the
in-memory graph the dataset was converted from (full batch, same hidden size, dropout, lr and weight
decay; test accuracy at the best validation accuracy).  Reported per seed and as mean ± std, with
the published figures of ``../shared/data/README.md`` and the wall-clock seconds each took to reach
its best validation accuracy (training + evaluation).  Graphs are converted once under ``--data``.
Facebook Page-Page's 4,714-dim sparse features are projected to ``--facebook-dim`` dense dims by a
fixed seeded Gaussian matrix (0 keeps them all), the same features for both sides.  Nothing here is
asserted; the CPU may be shared, so times are indicative and compared only within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import outre_async as oa
from outre_async.cli import main as outre

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PUBLISHED = {("cora", "gcn"): 81.5, ("citeseer", "gcn"): 70.3, ("cora", "sage"): 83.0, ("citeseer", "sage"): 71.0}
# per graph: batch size, fanouts, outre epochs, eval every, full-graph epochs, weight decay
SETTINGS = {
    "cora": (32, "10,10", 20, 2, 100, 5e-4),
    "citeseer": (32, "10,10", 20, 2, 100, 5e-4),
    "facebook_pagepage": (512, "10,10", 6, 2, 100, 0.0),
}
HIDDEN, DROPOUT, LR = 64, 0.5, 0.01


def load_graph(graph: str, facebook_dim: int) -> dict[str, np.ndarray]:
    z = dict(np.load(DATA / f"{graph}.npz"))
    if "x" not in z:
        n, d = (int(s) for s in z["x_shape"])
        rows = np.repeat(np.arange(n), np.diff(z["x_indptr"]))
        if facebook_dim:
            proj = np.random.default_rng(0).standard_normal((d, facebook_dim)).astype(np.float32) / np.sqrt(facebook_dim)
            x = np.zeros((n, facebook_dim), np.float32)
            np.add.at(x, rows, proj[z["x_indices"]] * z["x_data"][:, None].astype(np.float32))
        else:
            x = np.zeros((n, d), np.float32)
            x[rows, z["x_indices"]] = z["x_data"]
        z["x"] = x
    return z


def prepare(graph: str, z: dict[str, np.ndarray], root: Path) -> Path:
    out = root / graph
    if not (out / "manifest.json").exists():
        oa.write_dataset(out, edge_index=z["edge_index"], num_nodes=int(z["num_nodes"]), x=z["x"], y=z["y"],
                         train_idx=z["train_idx"], val_idx=z["val_idx"], test_idx=z["test_idx"])
    return out


def run_outre(path: Path, graph: str, model: str, seed: int, work: Path, backend: str) -> dict[str, Any]:
    batch, fanouts, epochs, every, _, wd = SETTINGS[graph]
    out = work / f"{graph}-{model}-{seed}"
    shutil.rmtree(out, ignore_errors=True)  # this script's own run folder from an earlier invocation
    args = ["train", str(path), "--model", model, "--hidden", str(HIDDEN), "--fanouts", fanouts, "--batch-size",
            str(batch), "--epochs", str(epochs), "--eval-every", str(every), "--lr", str(LR), "--weight-decay",
            str(wd), "--dropout", str(DROPOUT), "--seed", str(seed), "--backend", backend, "--out", str(out)]
    log = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(log):
        code = outre(args)
    if code != 0:
        raise RuntimeError(f"outre {' '.join(args)} exited {code}:\n{log.getvalue()}")
    m = json.loads((out / "metrics.json").read_text())
    return {"test_accuracy": m["best"]["test_accuracy"], "best_epoch": m["best"]["epoch"],
            "time_to_best_seconds": m["time_to_best_seconds"], "wall_seconds": time.perf_counter() - start,
            "command": "outre " + " ".join(args)}


def run_full_graph(z: dict[str, np.ndarray], graph: str, model_name: str, seed: int) -> dict[str, Any]:
    *_, epochs, wd = SETTINGS[graph]
    torch.manual_seed(seed)
    x, y = torch.from_numpy(z["x"]), torch.from_numpy(z["y"]).long()
    edge_index = torch.from_numpy(z["edge_index"]).long()
    cls = oa.GraphSAGE if model_name == "sage" else oa.GCN
    model = cls(x.shape[1], HIDDEN, 2, int(y.max()) + 1, dropout=DROPOUT)
    opt = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=wd)
    train, val, test = (torch.from_numpy(z[f"{s}_idx"]).long() for s in ("train", "val", "test"))
    best, elapsed = {"val": -1.0}, 0.0
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, edge_index).argmax(-1)
        elapsed += time.perf_counter() - start
        acc = {s: float((pred[i] == y[i]).float().mean()) for s, i in (("val", val), ("test", test))}
        if acc["val"] > best["val"]:
            best = {**acc, "epoch": epoch, "elapsed": elapsed}
    return {"test_accuracy": best["test"], "best_epoch": best["epoch"], "time_to_best_seconds": best["elapsed"],
            "wall_seconds": elapsed}


def summary(values: list[float]) -> dict[str, float]:
    a = 100 * np.asarray(values)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--graphs", default="cora,citeseer,facebook_pagepage")
    p.add_argument("--models", default="sage,gcn")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--facebook-dim", type=int, default=256)
    p.add_argument("--backend", default="auto")
    p.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "outre-bench-train-accuracy")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: no oversubscription on a shared CPU)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rows: list[dict[str, Any]] = []
    for graph in args.graphs.split(","):
        z = load_graph(graph, args.facebook_dim)
        path = prepare(graph, z, args.data)
        for model in args.models.split(","):
            per = {"outre": [], "full": []}  # type: ignore[var-annotated]
            for seed in range(args.seeds):
                per["outre"].append(run_outre(path, graph, model, seed, args.data / "runs", args.backend))
                per["full"].append(run_full_graph(z, graph, model, seed))
                print(f"{graph} {model} seed {seed}: outre {per['outre'][-1]['test_accuracy']:.4f} "
                      f"({per['outre'][-1]['time_to_best_seconds']:.1f} s to best val), full graph "
                      f"{per['full'][-1]['test_accuracy']:.4f} ({per['full'][-1]['time_to_best_seconds']:.1f} s)", flush=True)
                _write(args, rows, graph, model, per)  # after every seed: a cut-short run keeps what it measured
            rows.append(_row(graph, model, per))
            args.out.write_text(json.dumps(_result(args, rows), indent=2))
    for r in rows:
        pub = f"{r['published']:.1f}" if r["published"] else "-"
        print(f"{r['graph']:18s} {r['model']:4s} outre {r['outre_test_accuracy']['mean']:.1f} ± "
              f"{r['outre_test_accuracy']['std']:.1f}  full graph {r['full_test_accuracy']['mean']:.1f} ± "
              f"{r['full_test_accuracy']['std']:.1f}  gap {r['gap_pts']:+.1f} pt  published {pub}  time to best "
              f"{r['outre_time_to_best_seconds_median']:.1f} s vs {r['full_time_to_best_seconds_median']:.1f} s")


def _row(graph: str, model: str, per: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    row = {"graph": graph, "model": model, "published": PUBLISHED.get((graph, model)), "seeds_done": len(per["outre"]),
           **{f"{side}_test_accuracy": summary([r["test_accuracy"] for r in runs]) for side, runs in per.items()},
           **{f"{side}_time_to_best_seconds_median": float(np.median([r["time_to_best_seconds"] for r in runs]))
              for side, runs in per.items()},
           "runs": per}
    row["gap_pts"] = row["outre_test_accuracy"]["mean"] - row["full_test_accuracy"]["mean"]
    return row


def _write(args: argparse.Namespace, rows: list[dict[str, Any]], graph: str, model: str,
           per: dict[str, list[dict[str, Any]]]) -> None:
    args.out.write_text(json.dumps(_result(args, [*rows, _row(graph, model, per)]), indent=2))


def _result(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"benchmark": "train_accuracy", "host": platform.node(), "torch_threads": args.threads,
            "seeds": args.seeds, "facebook_dim": args.facebook_dim, "hidden": HIDDEN, "dropout": DROPOUT, "lr": LR,
            "settings": {g: dict(zip(["batch_size", "fanouts", "epochs", "eval_every", "full_graph_epochs",
                                      "weight_decay"], s, strict=True)) for g, s in SETTINGS.items()},
            "rows": rows}


if __name__ == "__main__":
    main()
