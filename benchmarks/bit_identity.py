"""Bit-identity check for refactors: a sha256 of every epoch's batches, per loader configuration.

    python benchmarks/bit_identity.py --out before.json     # on the unchanged branch
    python benchmarks/bit_identity.py --out after.json      # after the change
    python benchmarks/bit_identity.py --compare before.json after.json

Builds loaders on a tiny generated graph (in a temporary folder) in the configurations a refactor of
the batch plan can disturb: plain, ordered, partition mode (one rank and each of two ranks), history
(a small model trained so rows are pushed and pruned), foresight on and off, the pread, io_uring (when
the kernel has it) and in-memory backends, a caller's unsorted ``input_nodes``.  Each epoch's batches
are hashed in plan order (``seq``): ``n_id``, ``x``, ``edge_index``, ``y``, ``batch_size`` and
``input_id``.  Nothing here is asserted but by ``--compare``, which exits 1 on any difference.

History: what a sampler prunes depends on which rows training has pushed by the time it samples
(``loader/_history.py``), so batches of a trained history run are not reproducible run to run.  The
history cases train nothing (nothing is pruned until a first exchange) and hash what the first plan
decides: the candidate nodes of the table (``key "candidates"``), besides the batches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.partition import partition
from outre_async.loader._options import group_knobs

N, DIM, HID, CLASSES, EPOCHS = 700, 12, 8, 4, 2


def _dataset(root: Path) -> oa.Dataset:
    rng = np.random.default_rng(11)
    deg = rng.integers(0, 9, size=N)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, N, size=int(indptr[-1]))
    with oa.DatasetWriter(root / "ds", num_nodes=N, feature_dim=DIM, num_classes=CLASSES) as w:
        w.write_csc(indptr, indices)
        w.append_features(rng.standard_normal((N, DIM)).astype(np.float32))
        w.write_labels(rng.integers(0, CLASSES, size=N))
        w.write_split("train", np.arange(0, 560))
    ds = oa.open_dataset(root / "ds")
    partition(ds, 16, name="p16", passes=2)
    return ds


def _cases(backends: list[str]) -> dict[str, dict[str, Any]]:
    base: dict[str, Any] = {"fanouts": [4, 3], "batch_size": 40, "seed": 5}
    cases: dict[str, dict[str, Any]] = {}
    for b in backends:
        cases[f"plain-{b}"] = {**base, "backend": b}
        cases[f"ordered-{b}"] = {**base, "backend": b, "ordered": True}
        cases[f"foresight-off-{b}"] = {**base, "backend": b, "foresight": 0, "ordered": True}
        cases[f"partitions-{b}"] = {**base, "backend": b, "partitions": "p16", "parts_per_batch": 2}
    cases["noshuffle-droplast"] = {**base, "backend": "memory", "shuffle": False, "drop_last": True}
    cases["foresight-on"] = {**base, "backend": "pread", "foresight": 4, "ordered": True, "buffer_rows": 600}
    cases["partitions-ordered-interleave"] = {**base, "backend": "pread", "partitions": "p16", "parts_per_batch": 2,
                                              "interleave": 3, "ordered": True}
    for r in range(2):
        cases[f"rank{r}of2"] = {**base, "backend": "memory", "rank": r, "world_size": 2}
        cases[f"partitions-rank{r}of2"] = {**base, "backend": "memory", "partitions": "p16", "parts_per_batch": 3,
                                           "rank": r, "world_size": 2}
    cases["input-nodes-unsorted"] = {**base, "backend": "memory", "split": "unsorted"}
    cases["history"] = {**base, "backend": "memory", "ordered": True, "history": "on"}
    cases["history-partitions"] = {**base, "backend": "pread", "ordered": True, "history": "on",
                                   "partitions": "p16", "parts_per_batch": 2}
    return cases


def _hash(h: Any, t: Any) -> None:
    if t is None:
        h.update(b"none")
        return
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    h.update(str(a.dtype).encode() + str(a.shape).encode())
    h.update(np.ascontiguousarray(a).tobytes())


def _run(ds: oa.Dataset, opts: dict[str, Any]) -> list[dict[str, str]]:
    opts = dict(opts)
    if opts.get("split") == "unsorted":
        opts["split"] = np.random.default_rng(3).permutation(N)[:450]
    if opts.pop("history", None):
        opts["history"] = oa.HistoryConfig(staleness=6, dim=HID, warmup=0, admission="all", profile_batches=5)
    loader = oa.OutreLoader(ds, **group_knobs(opts))
    epochs: list[dict[str, str]] = []
    try:
        for _ in range(EPOCHS):
            per_seq: dict[int, str] = {}
            for batch in loader:
                h = hashlib.sha256()
                for name in ("n_id", "x", "edge_index", "y", "input_id"):
                    _hash(h, getattr(batch, name, None))
                h.update(str(int(batch.batch_size)).encode())
                per_seq[int(batch.seq)] = h.hexdigest()
                batch.release()
            epochs.append({str(k): per_seq[k] for k in sorted(per_seq)})
        owner = loader._history  # the candidates the first plan chose (private: a check, not an API)
        if owner is not None:
            h = hashlib.sha256()
            _hash(h, owner.table.nodes)
            epochs.append({"candidates": h.hexdigest()})
    finally:
        loader.close()
    return epochs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2)
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} vs {len(b)} cases; differ: {bad or 'none'}")
        return 1 if bad else 0
    torch.set_num_threads(1)
    backends = ["memory", "pread"] + (["io_uring"] if detect_io_uring() else [])
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ds = _dataset(Path(tmp))
        for name, opts in _cases(backends).items():
            out[name] = _run(ds, opts)
            print(name, "ok", flush=True)
    text = json.dumps(out, indent=1, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
