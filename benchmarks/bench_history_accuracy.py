"""Accuracy of the historical embedding cache (issue 10): staleness x model x order x admission.

    python benchmarks/bench_history_accuracy.py --staleness 1,10,100,1000 --admission all,grad \
        --seeds 5 --epochs 30 --warmup 0 --json cora-citeseer.json                      # Cora + CiteSeer
    python benchmarks/bench_history_accuracy.py --datasets facebook_pagepage --facebook-dim 128 \
        --staleness 1,100 --seeds 5 --epochs 10 --batch-size 512 --json fb.json

Each run trains a 2-layer model (hidden 64, dropout 0.5, Adam lr 0.01, weight decay 5e-4) with
OutreLoader (mini-batches, fanouts 10,10) for ``--epochs`` epochs, with
``history=HistoryConfig(staleness=S, warmup=W)`` (S = 1 is no history; ``--warmup`` left out takes
the config's default, W = S), and evaluates exactly (eval mode, whole graph, no history) every
``--eval-every`` epochs.  Reported per setting (mean ± std over seeds): test accuracy at the last
epoch and at the epoch of best validation accuracy (the usual protocol), their difference from
staleness 1, optimizer steps per epoch and the staleness in epochs (S / steps per epoch), sampled
edges and feature rows per epoch, training seconds, and the training seconds until the test
accuracy first reaches the staleness-1 final mean.  The machine may be shared: compare accuracies;
treat seconds as rough.  Nothing is asserted.

``--facebook-dim D`` trains Facebook Page-Page on its 4,714-dim sparse features projected to ``D``
dense dims by one fixed seeded matrix (``bench_partition_accuracy.prepare``, the same copy that
benchmark trains): the raw rows make a batch of 512 with fanouts 10,10 a ~750 MB matrix, hours for
a 5-seed grid on two cores.  Every staleness trains the same projected features, so the deltas
compare like with like; absolute accuracies are the projected graph's, not the published ones.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import outre_async as oa

HERE = Path(__file__).resolve()
DATA = HERE.parents[2] / "shared" / "data"
sys.path.insert(0, str(HERE.parent))  # bench_partition_accuracy.prepare: one projected Facebook copy


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    if args.table:
        runs = [json.loads(line) for log in args.table for line in Path(log).read_text().splitlines()
                if line.startswith('{"test_accuracy"')]
        rows = _table(runs)
        _print_table(rows)
        return {"runs": runs, "table": rows}
    torch.set_num_threads(args.threads)  # small graphs: one thread is fastest, and the machine may be shared
    root = Path(tempfile.mkdtemp(prefix="outre-hist-acc-"))
    try:
        runs = _grid(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"benchmark": "history-accuracy", "args": vars(args), "runs": runs, "table": _table(runs)}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    _print_table(result["table"])
    return result


def _grid(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    runs = []
    for name in args.datasets.split(","):
        if name == "facebook_pagepage" and args.facebook_dim:
            from bench_partition_accuracy import prepare

            ds = prepare(name, root, args.facebook_dim)
        else:
            ds = oa.open_dataset(oa.convert(Path(args.data) / f"{name}.npz", root / name))
        graph = _FullGraph(ds)
        for staleness in (1, 2):  # untimed warm-up: numba loads (or compiles) both kernel variants
            _run(ds, argparse.Namespace(**{**vars(args), "epochs": 1}), model="sage", staleness=staleness,
                 ordered=True, admission="all", seed=0, graph=graph)
        grid = itertools.product(args.models.split(","), _ints(args.staleness), args.orders.split(","),
                                 args.admission.split(","), range(args.first_seed, args.first_seed + args.seeds))
        for model, staleness, order, admission, seed in grid:
            if staleness == 1 and admission != args.admission.split(",")[0]:
                continue  # admission means nothing without history
            run = _run(ds, args, model=model, staleness=staleness, ordered=order == "ordered",
                       admission=admission, seed=seed, graph=graph)
            run.update(dataset=name, model=model, staleness=staleness, order=order, admission=admission, seed=seed)
            runs.append(run)
            print(json.dumps(run), flush=True)  # one line per run, curve included: a cut-short grid still counts
    return runs


def _run(ds: oa.Dataset, args: argparse.Namespace, *, model: str, staleness: int, ordered: bool, admission: str,
         seed: int, graph: _FullGraph | None = None) -> dict[str, Any]:
    torch.manual_seed(seed)
    cls = {"sage": oa.GraphSAGE, "gcn": oa.GCN}[model]
    net = cls(ds.feature_dim, args.hidden, 2, ds.num_classes)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=5e-4)
    history = oa.HistoryConfig(staleness=staleness, dim=args.hidden, admission=admission,
                               warmup=args.warmup, window=args.window,
                               **({} if args.jitter is None else {"jitter": args.jitter})) if staleness > 1 else None
    train = oa.OutreLoader(ds, split="train", fanouts=[10, 10], batch_size=args.batch_size, seed=seed,
                           ordered=ordered, history=history, io=oa.IOOptions(backend="memory"))
    graph = graph or _FullGraph(ds)
    curve, seconds, steps = [], 0.0, 0
    try:
        for epoch in range(1, args.epochs + 1):
            net.train()
            start = time.perf_counter()
            for batch in train:
                out = net(batch.x, batch.edge_index, history=batch.history)[: batch.batch_size]
                loss = F.cross_entropy(out, batch.y[: batch.batch_size])
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
            seconds += time.perf_counter() - start
            if epoch % args.eval_every == 0 or epoch == args.epochs:
                curve.append((epoch, seconds, *graph.accuracy(net)))
        stats = train.stats()
    finally:
        train.close()
    hist = stats.get("history", {})
    best = max(curve, key=lambda c: c[2])  # best validation accuracy, the earliest on ties
    return {"test_accuracy": curve[-1][3], "best_val_test_accuracy": best[3], "best_val_epoch": best[0],
            "train_seconds": seconds, "curve": curve, "steps_per_epoch": steps / args.epochs,
            "sampled_edges_per_epoch": stats["sampled_edges"] / args.epochs,
            "rows_per_epoch": stats["sampled_nodes"] / args.epochs,
            "pulled": hist.get("pulled", 0), "max_realised_staleness": max(hist.get("realised_staleness", {}), default=0),
            "admission_run": hist.get("admission"), "window_run": hist.get("window")}  # what the defaults resolved to


class _FullGraph:
    """Exact evaluation, no history and no sampling: one eval-mode forward over the whole graph (for
    a 2-layer model the same as full neighbourhoods), read at the validation and test nodes."""

    def __init__(self, ds: oa.Dataset) -> None:
        deg = np.diff(np.asarray(ds.indptr))
        dst = np.repeat(np.arange(ds.num_nodes), deg)
        self.edge_index = torch.from_numpy(np.stack([np.asarray(ds.indices, np.int64), dst]))
        self.x = torch.from_numpy(np.array(ds.features[:], dtype=np.float32))
        self.y = torch.from_numpy(np.asarray(ds.labels, np.int64))
        self.val = torch.from_numpy(np.asarray(ds.split("val"), np.int64))
        self.test = torch.from_numpy(np.asarray(ds.split("test"), np.int64))

    @torch.no_grad()
    def accuracy(self, net: torch.nn.Module) -> tuple[float, float]:
        net.eval()
        pred = net(self.x, self.edge_index).argmax(-1)
        return tuple(float((pred[i] == self.y[i]).float().mean()) for i in (self.val, self.test))  # type: ignore[return-value]


def _table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    key = ("dataset", "model", "order", "admission", "staleness")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(tuple(r[k] for k in key), []).append(r)
    s1 = {(k[0], k[1], k[2]): g for k, g in groups.items() if k[4] == 1}
    rows = []
    for k, g in sorted(groups.items()):
        base = s1.get((k[0], k[1], k[2])) or s1.get((k[0], k[1], "ordered"))  # a grid without S1 in this order
        row: dict[str, Any] = {**dict(zip(key, k, strict=True)), "runs": len(g)}
        for metric, name in (("test_accuracy", "final"), ("best_val_test_accuracy", "best_val")):
            accs = [r[metric] for r in g]
            row[f"{name}_mean"], row[f"{name}_std"] = statistics.mean(accs), statistics.pstdev(accs)
            row[f"{name}_delta_pt"] = None if base is None else \
                100 * (statistics.mean(accs) - statistics.mean(r[metric] for r in base))
        target = None if base is None else statistics.mean(r["test_accuracy"] for r in base)
        reach = [_time_to(r["curve"], target) if "curve" in r else None for r in g] if target is not None else []
        steps = statistics.mean(r["steps_per_epoch"] for r in g)
        row.update(steps_per_epoch=steps, staleness_epochs=k[4] / steps,
                   best_val_epoch=statistics.median(r["best_val_epoch"] for r in g),
                   train_seconds=statistics.median(r["train_seconds"] for r in g),
                   edges_per_epoch=statistics.mean(r["sampled_edges_per_epoch"] for r in g),
                   rows_per_epoch=statistics.mean(r["rows_per_epoch"] for r in g),
                   seconds_to_s1_acc=None if not reach or None in reach else statistics.median(reach),
                   max_realised_staleness=max(r["max_realised_staleness"] for r in g))
        rows.append(row)
    return rows


def _time_to(curve: list[tuple], target: float) -> float | None:
    """Training seconds until the test accuracy first reaches ``target`` (None: never)."""
    return next((c[1] for c in curve if c[3] >= target - 1e-9), None)


def _print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'dataset':<17} {'model':<5} {'order':<10} {'adm':<4} {'S':>5} {'S ep':>6} {'final %':>13} {'Δ pt':>6} "
          f"{'best-val %':>13} {'Δ pt':>6} {'edges/ep':>9} {'rows/ep':>8} {'train s':>8} {'s to S1':>8}")
    for r in rows:
        d1 = "" if r["final_delta_pt"] is None else f"{r['final_delta_pt']:+.2f}"
        d2 = "" if r["best_val_delta_pt"] is None else f"{r['best_val_delta_pt']:+.2f}"
        reach = "-" if r["seconds_to_s1_acc"] is None else f"{r['seconds_to_s1_acc']:.1f}"
        print(f"{r['dataset']:<17} {r['model']:<5} {r['order']:<10} {r['admission']:<4} {r['staleness']:>5} "
              f"{r['staleness_epochs']:>6.1f} {100 * r['final_mean']:>6.2f} ± {100 * r['final_std']:<4.2f} {d1:>6} "
              f"{100 * r['best_val_mean']:>6.2f} ± {100 * r['best_val_std']:<4.2f} {d2:>6} "
              f"{r['edges_per_epoch']:>9.0f} {r['rows_per_epoch']:>8.0f} {r['train_seconds']:>8.1f} {reach:>8}")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA), help="folder with the .npz graphs (../shared/data)")
    p.add_argument("--datasets", default="cora,citeseer")
    p.add_argument("--facebook-dim", type=int, default=0,
                   help="project Facebook Page-Page's features to this many dims (0: the raw 4,714)")
    p.add_argument("--models", default="sage,gcn")
    p.add_argument("--staleness", default="1,10,100")
    p.add_argument("--orders", default="ordered,completion")
    p.add_argument("--admission", default="all", help="comma-separated: all, grad, auto (the library default)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--window", type=int, default=None, help="HistoryConfig(window=): completion order's overtaking "
                   "window (default: the config's, min(samplers + extractors, shortest lifetime // 10))")
    p.add_argument("--warmup", type=int, default=None, help="HistoryConfig(warmup=): steps without pulls (default: staleness)")
    p.add_argument("--jitter", type=float, default=None, help="HistoryConfig(jitter=): share of staleness a row's "
                   "lifetime is shortened by at most (default: the config's)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--json", help="write the runs and the table here")
    p.add_argument("--table", nargs="+", metavar="LOG", help="only print the table of the run lines in these logs")
    return p


if __name__ == "__main__":
    main()
