"""Accuracy of partition-based batches vs random batches at equal epochs, and the redundancy each keeps.

    python benchmarks/bench_partition_accuracy.py --out partacc.json \
        [--graphs cora,citeseer,facebook_pagepage] [--settings random,16x2,16x2x8,default] [--seeds 3]

Graphs: the real ones in ``../shared/data`` (converted once into ``--data``, default a folder under
the system temp dir).  Facebook Page-Page's 4,714-dim sparse features are projected to
``--facebook-dim`` dense dims by a fixed seeded Gaussian matrix (0 keeps them all: a batch matrix of
4,714-dim rows is slow on a shared 2-core box); the projection is the same for every setting.

Each setting trains GraphSAGE (``outre_async.nn``, 2 layers) from the same initialisation per seed:
``random`` is ``OutreLoader`` without partitions; ``KxP`` partitions the graph with FENNEL into K
parts (``outre_async.partition.partition``, its defaults otherwise) and trains with
``OutreLoader(partitions=..., parts_per_batch=P, interleave=1)`` (macro batch after macro batch, the
behaviour before interleaving existed); ``KxPxW`` interleaves W macro batches; ``default`` is what a user gets from
``outre partition DATASET`` and ``OutreLoader(partitions=NAME)`` with no counts given.  The test
accuracy after the last epoch (sampled neighbourhoods, the same test loader for every setting) is
reported per seed and as mean ± std, with the redundancy ratio (OUTRE eq. 2) of one epoch of each
setting's batches.  Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from outre_async.partition import open_partitions, partition, redundancy_ratio

import outre_async as oa
from outre_async._train import evaluate, train_epoch
from outre_async.loader._options import group_knobs

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GRAPHS = {  # batch size, epochs: about 5 batches an epoch on the Planetoid splits (140 / 120 seeds)
    "cora": (32, 30),
    "citeseer": (32, 30),
    "facebook_pagepage": (512, 10),
}


def prepare(graph: str, root: Path, facebook_dim: int) -> oa.Dataset:
    """The dataset for ``graph``, converted (and for Facebook projected) once under ``root``."""
    src = DATA / f"{graph}.npz"
    dim = facebook_dim if graph == "facebook_pagepage" else 0
    out = root / (f"{graph}-d{dim}" if dim else graph)
    if not (out / "manifest.json").exists():
        if dim:
            _write_projected(src, out, dim)
        else:
            oa.convert(src, out)
    return oa.open_dataset(out)


def _write_projected(src: Path, out: Path, dim: int) -> None:
    z = np.load(src)
    n, d = (int(s) for s in z["x_shape"])
    proj = torch.from_numpy(np.random.default_rng(0).standard_normal((d, dim)) / np.sqrt(dim)).float()
    rows = torch.from_numpy(np.repeat(np.arange(n), np.diff(z["x_indptr"])))
    terms = proj[torch.from_numpy(z["x_indices"]).long()] * torch.from_numpy(z["x_data"]).float()[:, None]
    dense = torch.zeros(n, dim).index_add_(0, rows, terms).numpy()
    oa.write_dataset(out, edge_index=z["edge_index"], num_nodes=int(z["num_nodes"]), x=dense,
                     y=z["y"], train_idx=z["train_idx"], val_idx=z["val_idx"], test_idx=z["test_idx"])


def parse_setting(text: str) -> tuple[int | None, int | None, int | None] | None:
    """``random`` -> None; ``default`` -> (None, None, None); ``KxP`` -> (K, P, 1); ``KxPxW`` -> (K, P, W)."""
    if text == "random":
        return None
    if text == "default":
        return None, None, None
    k, p, *w = (int(x) for x in text.split("x"))
    return k, p, w[0] if w else 1


def partitions_for(ds: oa.Dataset, k: int | None) -> str:
    """Partition ``ds`` into ``k`` parts (None: the partitioner's default count) once; the folder name."""
    name = "bench-default" if k is None else f"bench-fennel-{k}"
    try:
        open_partitions(ds, name)
    except oa.errors.PartitionError:
        partition(ds, k, name=name, overwrite=True)
    return name


def loader_options(ds: oa.Dataset, setting: tuple[int | None, int | None, int | None] | None) -> dict[str, Any]:
    if setting is None:
        return {}
    k, p, w = setting
    opts: dict[str, Any] = {"partitions": partitions_for(ds, k)}
    if p is not None:
        opts["parts_per_batch"] = p
    if w is not None:
        opts["interleave"] = w
    return opts


def train_one(ds: oa.Dataset, opts: dict[str, Any], *, seed: int, batch_size: int, epochs: int,
              fanouts: list[int], hidden: int, lr: float) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = oa.GraphSAGE(ds.feature_dim, hidden, len(fanouts), ds.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    common = {"fanouts": fanouts, "batch_size": batch_size, "backend": "memory", "num_samplers": 1,
              "num_extractors": 1}
    start = time.perf_counter()
    with oa.OutreLoader(ds, **group_knobs(dict(split="train", seed=seed, **common, **opts))) as train:
        losses = [train_epoch(model, train, optimizer).loss for _ in range(epochs)]
        lists = train.stats().get("neighbor_lists", {})
    with oa.OutreLoader(ds, **group_knobs(dict(split="test", shuffle=False, seed=12345, **common))) as test:
        acc = evaluate(model, test).accuracy
    return {"seed": seed, "test_accuracy": acc, "final_loss": losses[-1], "seconds": time.perf_counter() - start,
            "parts_per_batch": lists.get("parts_per_batch"), "interleave": lists.get("interleave"),
            "macro_loads": lists.get("macro_loads")}


def redundancy(ds: oa.Dataset, opts: dict[str, Any], parts_per_batch: int | None, *, batch_size: int,
               fanouts: list[int]) -> dict[str, Any]:
    parts = open_partitions(ds, opts["partitions"]) if opts else None
    rr = redundancy_ratio(ds, fanouts=fanouts, batch_size=batch_size, partitions=parts,
                          parts_per_batch=parts_per_batch)
    out = {"rr": rr["partition" if parts is not None else "random"]["rr"], "random_rr": rr["random"]["rr"]}
    if parts is not None:
        out |= {"reduction": rr["reduction"], "num_parts": parts.num_parts,
                "edge_cut_fraction": parts.meta["quality"]["edge_cut_fraction"]}
    return out


def run_setting(ds: oa.Dataset, text: str, args: argparse.Namespace, batch_size: int, epochs: int) -> dict[str, Any]:
    opts = loader_options(ds, parse_setting(text))
    runs = [train_one(ds, opts, seed=s, batch_size=batch_size, epochs=epochs, fanouts=args.fanouts,
                      hidden=args.hidden, lr=args.lr) for s in range(args.seeds)]
    accs = np.array([r["test_accuracy"] for r in runs])
    ppb = runs[0]["parts_per_batch"]
    return {"setting": text, "partitions": opts.get("partitions"), "parts_per_batch": ppb,
            "interleave": runs[0]["interleave"],
            "test_accuracy_mean": float(accs.mean()), "test_accuracy_std": float(accs.std(ddof=1)) if len(accs) > 1 else 0.0,
            "runs": runs, "redundancy": redundancy(ds, opts, ppb, batch_size=batch_size, fanouts=args.fanouts)}


def _paired(rows: list[dict[str, Any]]) -> None:
    """Each setting's accuracy minus random batches', seed by seed (same initialisation): mean ± std."""
    base = next((r for r in rows if r["setting"] == "random"), None)
    if base is None:
        return
    ref = np.array([r["test_accuracy"] for r in base["runs"]])
    for row in rows:
        diff = np.array([r["test_accuracy"] for r in row["runs"]]) - ref
        row["minus_random_mean"] = float(diff.mean())
        row["minus_random_std"] = float(diff.std(ddof=1)) if len(diff) > 1 else 0.0
        print(f"{row['setting']:>8}: {100 * row['minus_random_mean']:+.2f} ± {100 * row['minus_random_std']:.2f} pt "
              f"vs random (paired by seed)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--settings", default="random,16x2,16x2x8,default")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, help="default: per graph (cora/citeseer 30, facebook 10)")
    ap.add_argument("--batch-size", type=int, help="default: per graph (cora/citeseer 32, facebook 512)")
    ap.add_argument("--fanouts", default="10,10")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--facebook-dim", type=int, default=128, help="0: the 4,714 original dims")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "outre-partacc-data")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {"machine": platform.platform(), "args": {k: str(v) for k, v in vars(args).items()},
                               "graphs": {}}
    for graph in args.graphs.split(","):
        ds = prepare(graph, args.data, args.facebook_dim)
        batch_size, epochs = GRAPHS[graph]
        batch_size, epochs = args.batch_size or batch_size, args.epochs or epochs
        rows = []
        for text in args.settings.split(","):
            row = run_setting(ds, text, args, batch_size, epochs)
            rows.append(row)
            rr = row["redundancy"]
            pw = f"P={row['parts_per_batch']}, W={row['interleave']}"
            print(f"{graph:>18} {text:>8} ({pw}) test acc {100 * row['test_accuracy_mean']:.2f} "
                  f"± {100 * row['test_accuracy_std']:.2f}  RR {rr['rr']:.2f} (random {rr['random_rr']:.2f})", flush=True)
        _paired(rows)
        results["graphs"][graph] = {"batch_size": batch_size, "epochs": epochs, "settings": rows}
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
