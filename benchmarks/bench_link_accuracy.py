"""Link prediction accuracy: OutreLoader edge batches against PyG's LinkNeighborLoader (issue 37's goal).

    python benchmarks/bench_link_accuracy.py --datasets cora,citeseer --seeds 0,1,2 --epochs 20 \
        --batch-size 512 --samplers uniform,resident@0.5 --json link-accuracy.json
    python benchmarks/bench_link_accuracy.py --rows cora,citeseer,quickstart --json link-rows.json

For each dataset (``../shared/data/<name>.npz``): a random 85/5/10 link split (``oa.split_edges``,
seed 0; both directions of a held-out pair leave message passing), then per seed a 2-layer GraphSAGE
encoder (hidden 64, dropout 0, Adam lr 0.01) with a dot decoder trained ``--epochs`` epochs with
binary cross-entropy on the training pairs, one uniform negative pair per positive (``--amount``), at
fanouts 10,10 and batch size 256, by

* ``pyg``: ``LinkNeighborLoader`` over the split's message-passing graph held in memory;
* ``ours-<sampler>``: ``OutreLoader(edge_label_index="train", neg_sampling={..., "sampler": S})``,
  ``uniform`` being PyG's negatives, ``resident`` the batch's own endpoints (``resident@F``: a share F
  of them drawn by degree instead, the ``degree_fraction``).

Every run is evaluated alike, with ``oa.evaluate_links`` on the test pairs, each against 100 uniform
candidate destinations (``negatives="uniform"``, seed 0): MRR, hits@10 and the AUC of the positive
scores against the candidates'.  Reported per (dataset, loader), mean ± std over seeds: test AUC, MRR,
hits@10, distinct feature rows per batch (``len(n_id)``: what a batch reads) and, for ours, the
false-negative rate measured against the graph.  Nothing is asserted; seconds are rough on a shared machine.

``--rows D1,D2``: no training; for each dataset (a ``.npz`` name, or a generator preset such as
``quickstart``, or ``quickstart:300000`` for the preset at that many nodes; split the same way),
sampler (uniform, degree, resident) and ``--amounts``, one epoch of ``OutreLoader`` edge batches
(batch ``--rows-batch-size``, fanouts 10,10, at most ``--rows-batches`` batches): distinct feature
rows per batch and the false-negative rate, and the uniform / resident ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import outre_async as oa

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="outre-link-acc-"))
    if args.rows:
        try:
            return _rows(args, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    runs = []
    try:
        for name in args.datasets.split(","):
            ds = _split(args, name, root)
            for seed in (int(s) for s in args.seeds.split(",")):
                for loader in ["pyg", *(f"ours-{s}" for s in args.samplers.split(","))]:
                    run = _run(args, ds, loader, seed)
                    runs.append({"dataset": name, **run})
                    print(json.dumps(runs[-1]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = _table(runs)
    result = {"benchmark": "link-accuracy", "args": vars(args), "runs": runs, "table": table}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    _print(table)
    return result


def _run(args: argparse.Namespace, ds: oa.Dataset, loader: str, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = oa.GraphSAGE(ds.feature_dim, args.hidden, 2, args.hidden, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    rows: list[int] = []
    extra: dict[str, Any] = {}
    if loader == "pyg":
        for epoch in range(args.epochs):
            for batch in _pyg_batches(args, ds, seed, epoch):
                _step(model, opt, batch)
                rows.append(len(batch.n_id))
    else:
        sampler, _, fraction = loader.split("-", 1)[1].partition("@")  # resident@0.5: that degree_fraction
        neg = {"mode": "binary", "amount": args.amount, "sampler": sampler, "degree_fraction": float(fraction or 0)}
        with oa.OutreLoader(ds, edge_label_index="train", neg_sampling=neg, num_neighbors=[10, 10],
                            batch_size=args.batch_size, seed=seed) as ours:
            for _ in range(args.epochs):
                for batch in ours:
                    _step(model, opt, batch)
                    rows.append(len(batch.n_id))
            extra = {"false_negative_rate": ours.stats()["negatives"]["false_negative_rate"]}
    seconds = time.perf_counter() - start
    got = oa.evaluate_links(model, ds, split="test", candidates=100, negatives="uniform", seed=0,
                            metrics=("mrr", "hits@10", "auc"))
    return {"loader": loader, "seed": seed, "auc": got["auc"], "mrr": got["mrr"], "hits@10": got["hits@10"],
            "rows_per_batch": float(np.mean(rows)), "train_seconds": seconds, **extra}


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: Any) -> None:
    model.train()
    h = model(batch.x, batch.edge_index)
    src, dst = batch.edge_label_index
    loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label.float())
    opt.zero_grad()
    loss.backward()
    opt.step()


_PYG: dict[str, Any] = {}


def _pyg_batches(args: argparse.Namespace, ds: oa.Dataset, seed: int, epoch: int) -> Any:
    """PyG's LinkNeighborLoader over the same message-passing graph and training pairs."""
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader

    key = str(ds.path)
    if key not in _PYG:
        dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
        edge_index = torch.from_numpy(np.stack([np.asarray(ds.indices, np.int64), dst]))
        _PYG.clear()
        _PYG[key] = Data(x=torch.from_numpy(np.array(ds.features[:])), edge_index=edge_index, num_nodes=ds.num_nodes)
    torch.manual_seed(seed * 1000 + epoch)  # PyG's shuffle and negatives
    return LinkNeighborLoader(_PYG[key], num_neighbors=[10, 10], edge_label_index=torch.from_numpy(ds.edge_split("train")),
                              neg_sampling=dict(mode="binary", amount=args.amount), batch_size=args.batch_size,
                              shuffle=True)


def _split(args: argparse.Namespace, name: str, root: Path) -> oa.Dataset:
    preset, _, nodes = name.partition(":")  # quickstart:300000: the preset at that many nodes
    if preset in oa.PRESETS:
        base = oa.generate(root / name, preset, seed=0, **({"num_nodes": int(nodes)} if nodes else {}))
    else:
        base = oa.convert(Path(args.data) / f"{name}.npz", root / name)
    return oa.open_dataset(oa.split_edges(base, root / f"{name}-links", val=0.05, test=0.1, seed=0))


def _rows(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    table = []
    for name in args.rows.split(","):
        ds = _split(args, name, root)
        for amount in (float(a) for a in args.amounts.split(",")):
            got = {}
            for sampler in ("uniform", "degree", "resident"):
                neg = {"mode": "binary", "amount": amount, "sampler": sampler}
                with oa.OutreLoader(ds, edge_label_index="train", neg_sampling=neg, num_neighbors=[10, 10],
                                    batch_size=args.rows_batch_size, seed=0) as loader:
                    for i, _ in enumerate(loader):
                        if i + 1 >= args.rows_batches:
                            break
                    stats = loader.stats()["negatives"]
                got[sampler] = stats
                table.append({"dataset": name, "amount": amount, "sampler": sampler,
                              "rows_per_batch": stats["distinct_rows_per_batch"],
                              "false_negative_rate": stats["false_negative_rate"]})
            ratio = got["uniform"]["distinct_rows_per_batch"] / got["resident"]["distinct_rows_per_batch"]
            table.append({"dataset": name, "amount": amount, "sampler": "uniform/resident", "rows_ratio": ratio})
    print(f"{'dataset':12} {'amount':>6} {'sampler':17} {'rows/batch':>11} {'false neg':>10}")
    for r in table:
        if "rows_ratio" in r:
            print(f"{r['dataset']:12} {r['amount']:>6} {r['sampler']:17} {r['rows_ratio']:>10.2f}x")
        else:
            print(f"{r['dataset']:12} {r['amount']:>6} {r['sampler']:17} {r['rows_per_batch']:>11.1f} {r['false_negative_rate']:>10.4f}")
    result = {"benchmark": "link-rows", "args": vars(args), "table": table}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


def _table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key in sorted({(r["dataset"], r["loader"]) for r in runs}):
        group = [r for r in runs if (r["dataset"], r["loader"]) == key]
        row = {"dataset": key[0], "loader": key[1], "seeds": len(group)}
        for m in ("auc", "mrr", "hits@10", "rows_per_batch", "false_negative_rate", "train_seconds"):
            vals = [r[m] for r in group if m in r]
            if vals:
                row[m] = (statistics.mean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0)
        out.append(row)
    return out


def _print(table: list[dict[str, Any]]) -> None:
    print(f"{'dataset':10} {'loader':15} {'test AUC':>15} {'MRR (1+100)':>15} {'hits@10':>15} {'rows/batch':>12} "
          f"{'false neg':>10}")
    for r in table:
        def cell(m: str, w: int = 15, r: dict[str, Any] = r) -> str:
            return f"{r[m][0]:.4f} ± {r[m][1]:.4f}".rjust(w) if m in r else "-".rjust(w)
        rows = f"{r['rows_per_batch'][0]:.0f}".rjust(12)
        fn = f"{r['false_negative_rate'][0]:.4f}".rjust(10) if "false_negative_rate" in r else "-".rjust(10)
        print(f"{r['dataset']:10} {r['loader']:15} {cell('auc')} {cell('mrr')} {cell('hits@10')} {rows} {fn}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--datasets", default="cora,citeseer")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--samplers", default="uniform,resident")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--amount", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", default=None, help="datasets or presets: distinct rows per batch by sampler, no training")
    p.add_argument("--amounts", default="1,3")
    p.add_argument("--rows-batch-size", type=int, default=256)
    p.add_argument("--rows-batches", type=int, default=30)
    p.add_argument("--json", default=None)
    return p


if __name__ == "__main__":
    main()
