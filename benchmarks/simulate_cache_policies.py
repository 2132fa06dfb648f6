"""Rows a cache of C rows must read over one epoch of a loader's batches: LRU, static top-C, Belady MIN.

    python -P benchmarks/simulate_cache_policies.py --dataset DATA [--partitions NAME --parts-per-batch 8 \\
        --neighbor-cache 64MiB] [--memory-budget 1.6GiB] --fanouts 10,5 --batch-size 512 \\
        --cache-rows 100000,220000,300000 [--backend memory] [--ordered] --json policies.json

One epoch of ``OutreLoader`` (the public API, with the options given: ``--partitions`` gives
outre-part's batches) is iterated and each batch's ``n_id`` collected in delivery order, each batch's
rows once (the order within a batch kept).  Over that exact sequence ``outre_async.plan._policy_kernels``
counts the rows a cache of C rows reads under LRU, static top-C by frequency (the C rows preloaded:
``static_top_c`` counts them, ``static_top_c_after_preload`` does not) and Belady's MIN (optimal:
evict the row whose next use is furthest; O(n log n), checked against brute force in
``tests/plan/test_cache_policies.py``).  C is each ``--cache-rows`` value and the loader's own
feature-buffer rows, so the table also says how far the loader's buffer (its
``stats()["epoch_io"]["rows_from_disk"]`` for the same epoch; with ``--backend memory`` nothing is
read) is from MIN at its size.  Writes JSON; prints a table.  Nothing here is asserted in CI.

What the buffer's reads cost (issue 26): ``--read-ahead N`` sets the buffer's window (``READ_AHEAD``;
0: no window reads) for the run, ``--trace-reads`` counts the rows read more than once in the epoch
and whether their earlier read was a window's (and the windows' room, rows and batches), and
``--save-batches`` writes the epoch's batches for ``replay_window_reads.py``, which replays them
through the buffer alone in seconds.  papers-like at 1 GiB with the queue 15 deep read 5.25 M rows
with no windows and 5.39 M with windows of 16 (1.28 and 1.31 x MIN): the excess was the queue's
depth, not the windows (``_budget.extract_depth``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from outre_async.loader._options import group_knobs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--partitions", help="partitions/<name>/: partition batches (outre-part)")
    p.add_argument("--parts-per-batch", type=int)
    p.add_argument("--neighbor-cache", default="0")
    p.add_argument("--memory-budget", help="the loader's budget (sizes its feature buffer)")
    p.add_argument("--backend", default="memory", help="memory (default: no disk reads) or auto/io_uring/pread")
    p.add_argument("--ordered", action="store_true", help="plan order instead of completion order")
    p.add_argument("--probe-cache-dir", help="pass the device's cached probe as disk_probe= (measured if absent): "
                                              "reads in flight by Little's law, epoch_io against the probe")
    p.add_argument("--buffer-policy", help="the feature buffer's eviction policy (default: the loader's)")
    p.add_argument("--extract-queue", type=int, help="batches queued ahead of the extractors (the window; "
                                                     "default: the loader's, from the budget)")
    p.add_argument("--foresight", type=int, help="batches foreseen beyond the extract queue (default: the plan's; 0: off)")
    p.add_argument("--layout", help="which copy partition batches read: auto (default), original, ordered or a path")
    p.add_argument("--max-gap", help="IOConfig.max_gap_bytes (default: the loader's)")
    p.add_argument("--read-ahead", type=int, help="the feature buffer's read_ahead (queued batches a window may "
                                                  "read along; 0: no windows; default: the buffer's READ_AHEAD)")
    p.add_argument("--trace-reads", action="store_true",
                   help="count the rows read more than once in the epoch and whether their earlier read was a window's")
    p.add_argument("--save-batches", help="write each batch's rows (delivery order) to this .npz, to replay them")
    p.add_argument("--cache-rows", default="100000,220000,300000", help="cache sizes C, in rows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def epoch_sequence(args: argparse.Namespace) -> tuple[np.ndarray, dict[str, Any]]:
    """The epoch's row accesses (each batch's rows once, in order) and what the loader reported."""
    import outre_async as oa

    opts: dict[str, Any] = {"backend": args.backend, "seed": args.seed, "ordered": args.ordered}
    if args.memory_budget:
        opts["memory_budget"] = args.memory_budget
    if args.buffer_policy:
        opts["buffer_policy"] = args.buffer_policy
    if args.layout:
        opts["layout"] = args.layout
    if args.extract_queue:
        opts["extract_queue"] = args.extract_queue
    if args.foresight is not None:
        opts["foresight"] = args.foresight
    if args.max_gap:
        opts["source_options"] = {"max_gap_bytes": oa._units.parse_bytes(args.max_gap)}
    if args.probe_cache_dir:
        from outre_async.features import cached_probe

        opts["disk_probe"], _ = cached_probe(oa.open_dataset(args.dataset).features_path, args.probe_cache_dir)
    if args.partitions:
        opts |= {"partitions": args.partitions, "parts_per_batch": args.parts_per_batch,
                 "neighbor_cache": oa._units.parse_bytes(args.neighbor_cache) if args.neighbor_cache != "0" else 0}
    if args.read_ahead is not None:  # the buffer reads READ_AHEAD when it is built (the loader has no option for it)
        from outre_async.features import _feature_buffer

        _feature_buffer.READ_AHEAD = args.read_ahead
    trace = _trace_reads() if args.trace_reads else None
    loader = oa.OutreLoader(args.dataset, **group_knobs(dict(split="train", fanouts=[int(f) for f in args.fanouts.split(",")],
                            batch_size=args.batch_size, **opts)))
    loader.set_epoch(args.epoch)
    pieces = []
    start = time.perf_counter()
    try:
        for batch in loader:
            ids = batch.n_id.numpy()
            _, first = np.unique(ids, return_index=True)
            pieces.append(ids[np.sort(first)])  # the batch's rows once, in their order
        seconds = time.perf_counter() - start
        s = loader.stats()
    finally:
        loader.close()
    seq = np.concatenate(pieces).astype(np.int64) if pieces else np.zeros(0, np.int64)
    if args.save_batches:
        np.savez(args.save_batches, rows=seq, sizes=np.array([len(p) for p in pieces], dtype=np.int64))
    reads = _reread_counts(trace) if trace is not None else None
    return seq, {"reads": reads, "batches": len(pieces), "seconds": seconds, "buffer_rows": s["buffer_rows"],
                 "epoch_io": s.get("epoch_io"), "buffer_reads": s.get("buffer", {}).get("reads"),
                 "windows": {k: s.get("buffer", {}).get(k) for k in ("windows", "window_batches", "read_ahead_rows")},
                 "backend": s.get("backend"), "extract_queue": loader.config.extract_capacity,
                 "buffer_policy": loader.config.buffer_policy, "layout": s.get("layout"),
                 "foresight": s.get("foresight")}


def _trace_reads() -> list[tuple[np.ndarray, bool]]:
    """Record every acquisition's READ rows, in order, with whether it was a window's (rows read early for
    queued batches: ``_try_acquire(count=False)``); the buffer's behaviour is unchanged."""
    from outre_async.features import _buffer_kernels as K
    from outre_async.features._feature_buffer import FeatureBuffer

    log: list[tuple[np.ndarray, bool]] = []
    inner = FeatureBuffer._try_acquire

    def traced(self: Any, ids: np.ndarray, limit: int, unpin: bool = False, seq: int = -1, *,
               count: bool = True) -> Any:
        acq = inner(self, ids, limit, unpin, seq, count=count)
        MERGE_ROWS[0] = self.merge_rows
        if acq is not None:
            log.append((acq.ids[acq.actions == K.READ].copy(), not count))
        return acq

    FeatureBuffer._try_acquire = traced  # type: ignore[method-assign]
    from outre_async.features import _feature_buffer

    plan = _feature_buffer.plan_window

    def traced_plan(own: np.ndarray, missing: Any, room: int, near: int) -> tuple[np.ndarray, int]:
        rows, batches = plan(own, missing, room, near)
        WINDOWS.append((room, len(rows), batches))
        return rows, batches

    _feature_buffer.plan_window = traced_plan
    return log


MERGE_ROWS = [0]  # the buffer's merge_rows (--trace-reads)
WINDOWS: list[tuple[int, int, int]] = []  # per window planned (--trace-reads): room offered, rows planned, batches


def _reread_counts(log: list[tuple[np.ndarray, bool]]) -> dict[str, int]:
    """Rows read, rows read again later in the epoch, and of those re-reads how many followed a read
    made early by a window (the row was read ahead, evicted, then read again)."""
    if not log:
        return {}
    ids = np.concatenate([a for a, _ in log])
    ahead = np.concatenate([np.full(len(a), w) for a, w in log])
    order = np.argsort(ids, kind="stable")  # by row, then read order
    ids_s, ahead_s = ids[order], ahead[order]
    again = np.zeros(len(ids_s), dtype=bool)
    again[1:] = ids_s[1:] == ids_s[:-1]  # a read of a row read before
    prev_ahead = np.zeros(len(ids_s), dtype=bool)
    prev_ahead[1:] = ahead_s[:-1]
    w = np.array(WINDOWS, dtype=np.int64).reshape(-1, 3)
    med = {f"window_{k}_median": int(np.median(w[:, i])) if len(w) else 0
           for i, k in enumerate(("room", "rows", "batches"))}
    return med | {"merge_rows": MERGE_ROWS[0], "windows": len(w), "rows_read": int(len(ids)),
                  "unique_rows_read": int(len(ids) - again.sum()), "read_ahead_rows": int(ahead.sum()),
                  "rereads": int(again.sum()), "rereads_after_read_ahead": int((again & prev_ahead).sum()),
                  "rereads_that_were_read_ahead": int((again & ahead_s).sum())}


def simulate(seq: np.ndarray, sizes: list[int]) -> list[dict[str, Any]]:
    from outre_async.plan._policy_kernels import dense_ids, reads_lru, reads_min, reads_static

    dense, rows = dense_ids(seq)
    reads_min(dense[:10], rows, 1)  # compile outside the timings
    reads_lru(dense[:10], rows, 1)
    out = []
    for c in sizes:
        t0 = time.perf_counter()
        lru = int(reads_lru(dense, rows, c))
        t1 = time.perf_counter()
        mn = int(reads_min(dense, rows, c))
        t2 = time.perf_counter()
        static = reads_static(dense, rows, c)
        out.append({"cache_rows": c, "lru": lru, "static_top_c": static, "static_preload": min(c, rows),
                    "static_top_c_after_preload": static - min(c, rows), "belady_min": mn,
                    "lru_seconds": round(t1 - t0, 3), "min_seconds": round(t2 - t1, 3)})
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seq, loader = epoch_sequence(args)
    sizes = sorted({int(c) for c in args.cache_rows.split(",") if c} | {int(loader["buffer_rows"])})
    table = simulate(seq, sizes)
    unique = int(len(np.unique(seq)))
    print(f"{loader['batches']} batches, {len(seq):,} rows gathered (each batch's once), {unique:,} unique; "
          f"loader buffer {loader['buffer_rows']:,} rows ({loader['backend']}, {loader['buffer_policy']}, "
          f"extract queue {loader['extract_queue']}, foresight {loader['foresight']}), epoch {loader['seconds']:.1f} s")
    print("| C (rows) | LRU | static top-C by frequency (+ its C preloaded) | Belady MIN (optimal) |")
    print("|---|---|---|---|")
    for r in table:
        mark = " (loader's buffer)" if r["cache_rows"] == loader["buffer_rows"] else ""
        print(f"| {r['cache_rows']:,}{mark} | {r['lru']:,} | {r['static_top_c_after_preload']:,} "
              f"(+ {r['static_preload']:,}) | {r['belady_min']:,} |")
    io = loader.get("epoch_io") or {}
    if io.get("ios"):
        at = next(r for r in table if r["cache_rows"] == loader["buffer_rows"])
        print(f"loader read {io['rows_from_disk']:,} rows in {io['ios']:,} I/Os ({io['rows_per_io']} rows/I/O, "
              f"{io['bytes_read'] / 2**30:.2f} GiB, {io['reads_per_s']:,.0f} reads/s): "
              f"{io['rows_from_disk'] / max(at['belady_min'], 1):.3f} x MIN at its buffer size; "
              f"window reads: {loader['windows']}")
    if loader.get("reads"):
        print(f"reads traced: {loader['reads']}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "host": platform.node(), "batches": loader["batches"], "accesses": len(seq),
            "unique_rows": unique, "loader": loader, "policies": table}, indent=1))


if __name__ == "__main__":
    main()
