"""The feature buffer's numba kernels alone: ns per batch row, replaying a recorded epoch of batches.

    python benchmarks/bench_buffer_kernels.py                        # 300k nodes, 10,10 x 512, 64k slots
    PYTHONPATH=/tmp/base_src python -P benchmarks/bench_buffer_kernels.py   # the same, another tree

Why: the loader's user CPU per row is mostly these kernels and the copy out of the slots, and an
end-to-end epoch is noisy (I/O, threads, the event loop); this isolates them.  The batch id arrays
(``n_id``) are recorded once from the uniform sampler over a random CSC (``--nodes``, in-degree
``--degree``, ``--fanouts``, ``--batch-size``; fixed seeds, so every tree replays the same ids), then
each repeat replays them through a fresh buffer of ``--slots`` rows of ``--dim`` float32 values the
way :meth:`FeatureBuffer.extract` does: ``announce`` each batch ``--window`` batches before it is
extracted, then per piece of at most ``--piece-rows`` rows ``acquire(..., unpin=True)``,
``mark_valid`` of the rows read (no I/O: the slot keeps whatever it held) and ``gather_release``
into the batch matrix (``--unfused``: ``gather_rows`` then ``release``).  Reported: the median over
``--repeats`` of each kernel's ns per batch row and their sum.  Only
``outre_async.features._buffer_kernels`` is timed, so the script runs unchanged against any tree on
``PYTHONPATH``.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import outre_async as oa
from outre_async.features import _buffer_kernels as K


def _at_least(low: int):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


_positive = _at_least(1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=_positive, default=300_000)
    p.add_argument("--degree", type=_positive, default=15, help="in-degree of every node of the random CSC")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=_positive, default=512)
    p.add_argument("--batches", type=_positive, default=60)
    p.add_argument("--slots", type=_positive, default=65_536, help="buffer rows (64 MiB at --dim 256)")
    p.add_argument("--dim", type=_positive, default=256)
    p.add_argument("--window", type=_at_least(0), default=4, help="batches announced ahead of extraction")
    p.add_argument("--piece-rows", type=_positive, default=4096)
    p.add_argument("--unfused", action="store_true", help="gather_rows then release (FeatureBuffer.gather's "
                   "path) instead of gather_release")
    p.add_argument("--repeats", type=_positive, default=5)
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def record_batches(args: argparse.Namespace) -> list[np.ndarray]:
    """The ``n_id`` of each batch of one epoch prefix: fixed seeds, so reproducible across trees."""
    rng = np.random.default_rng(0)
    indptr = np.arange(0, (args.nodes + 1) * args.degree, args.degree, dtype=np.int64)
    indices = rng.integers(0, args.nodes, size=args.nodes * args.degree).astype(np.int32)
    sampler = oa.NeighborSampler((indptr, indices), [int(f) for f in args.fanouts.split(",")], seed=1)
    order = rng.permutation(args.nodes)
    return [np.ascontiguousarray(sampler.sample(order[i * args.batch_size:(i + 1) * args.batch_size], i).n_id,
                                 dtype=np.int64) for i in range(args.batches)]


def replay(batches: list[np.ndarray], args: argparse.Namespace, data: np.ndarray) -> dict[str, float]:
    """One epoch through a fresh buffer; nanoseconds spent in each kernel."""
    nodes, rec = K.new_state(args.nodes, args.slots)
    out = np.empty((max(len(b) for b in batches), args.dim), np.float32)
    ns = {"announce": 0, "acquire": 0, "mark_valid": 0, **({"gather_rows": 0, "release": 0} if args.unfused
                                                          else {"gather_release": 0})}
    clock = time.perf_counter_ns

    def announce(i: int) -> None:
        if i < len(batches):
            t = clock()
            K.announce(batches[i], nodes, rec)
            ns["announce"] += clock() - t

    for i in range(args.window):
        announce(i)
    for b, ids in enumerate(batches):
        announce(b + args.window)
        pos = 0
        while pos < len(ids):
            part = ids[pos:]
            slots = np.empty(min(len(part), args.piece_rows), np.int64)
            actions = np.empty(len(slots), np.int8)
            t = clock()
            n = int(K.acquire(part, nodes, rec, slots, actions, args.piece_rows, True))
            ns["acquire"] += clock() - t
            slots = slots[:n]
            read = slots[actions[:n] == K.READ]
            t = clock()
            K.mark_valid(read, rec)
            ns["mark_valid"] += clock() - t
            t = clock()
            if args.unfused:
                K.gather_rows(data, slots, out[pos:pos + n])
                t1 = clock()
                K.release(slots, nodes, rec)
                ns["gather_rows"] += t1 - t
                ns["release"] += clock() - t1
            else:
                K.gather_release(data, slots, out[pos:pos + n], nodes, rec)
                ns["gather_release"] += clock() - t
            pos += n
    return ns


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    batches = record_batches(args)
    rows = sum(len(b) for b in batches)
    data = np.ones((args.slots, args.dim), np.float32)
    replay(batches[:2], args, data)  # compile / load the cache
    runs = [replay(batches, args, data) for _ in range(args.repeats)]
    per_row = {k: statistics.median(r[k] for r in runs) / rows for k in runs[0]}
    per_row["total"] = statistics.median(sum(r.values()) for r in runs) / rows
    result = {"kernels": K.__file__, "rows": rows, "batches": len(batches), "ns_per_row": per_row,
              "all_total_ns_per_row": [sum(r.values()) / rows for r in runs]}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
