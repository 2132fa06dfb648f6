"""Replay a saved epoch of batches through the feature buffer alone: rows read, merged reads, x MIN.

    python -P benchmarks/replay_window_reads.py --batches papers.npz --num-nodes N --slots 656530 \\
        --merge-rows 57 --extract-queue 14 [--read-ahead 0,4,8,16]

``--batches``: what ``simulate_cache_policies.py --save-batches`` wrote (each batch's rows, in delivery
order).  The real :class:`FeatureBuffer` (its windows, eviction and pins) is driven the way the loader
drives it, without sampling or disk: a producer pins each batch and queues it (``--extract-queue`` deep,
pinned before it waits for room, as the sample stage does), ``--extractors`` tasks extract the batches
through pieces of ``slots / extractors`` rows, and the source only counts: rows read, and merged reads
(sorted ids of one request at most ``--merge-rows`` apart share a read; no read-size cap).  Minutes
faster than an epoch of the loader, so a window rule can be measured on papers-like's sequence; the
loader's own figures (``simulate_cache_policies.py``) stay the reference.  Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np


class CountingSource:
    """Reads nothing: counts the rows asked for and the merged reads they would take."""

    def __init__(self, merge_rows: int) -> None:
        self.merge_rows, self.rows, self.ios = merge_rows, 0, 0

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray, /) -> None:
        u = np.unique(ids)
        self.rows += len(u)
        self.ios += int(1 + (np.diff(u) > self.merge_rows).sum()) if len(u) else 0
        await asyncio.sleep(0)


async def replay(batches: list[np.ndarray], num_nodes: int, slots: int, *, read_ahead: int, merge_rows: int,
                 depth: int, extractors: int, policy: str, foresight: int = 0) -> dict[str, int]:
    from outre_async.features._feature_buffer import FeatureBuffer

    buf = FeatureBuffer(num_nodes, slots, 1, policy=policy, read_ahead=read_ahead, merge_rows=merge_rows)
    src = CountingSource(merge_rows)
    queue: asyncio.Queue = asyncio.Queue(depth)

    sights: dict[int, object] = {}

    async def produce() -> None:
        for seq in range(min(foresight, len(batches))):
            sights[seq] = buf.foresee(batches[seq])
        for seq, ids in enumerate(batches):
            if seq in sights:
                sights.pop(seq).release()
            if foresight and seq + foresight < len(batches):
                sights[seq + foresight] = buf.foresee(batches[seq + foresight])
            await queue.put((ids, buf.pin(ids, seq)))
        for _ in range(extractors):
            await queue.put(None)

    async def extract() -> None:
        while (item := await queue.get()) is not None:
            ids, pin = item
            await buf.extract(ids, np.empty((len(ids), 1), np.float32), src, piece_rows=slots // extractors,
                              pin=pin)

    await asyncio.gather(produce(), *(extract() for _ in range(extractors)))
    await buf.aclose()
    return {"rows": src.rows, "ios": src.ios, "read_ahead_rows": buf.counters["read_ahead_rows"],
            "windows": buf.counters["windows"], "window_batches": buf.counters["window_batches"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", required=True)
    p.add_argument("--num-nodes", type=int, required=True)
    p.add_argument("--slots", type=int, required=True)
    p.add_argument("--merge-rows", type=int, required=True)
    p.add_argument("--extract-queue", type=int, required=True)
    p.add_argument("--extractors", type=int, default=2)
    p.add_argument("--policy", default="lru-lookahead")
    p.add_argument("--read-ahead", default="0,16")
    p.add_argument("--foresight", default="0", help="batches beyond the queue whose rows are foreseen (comma list)")
    p.add_argument("--min", action="store_true", help="also Belady's MIN at --slots")
    args = p.parse_args()
    saved = np.load(args.batches)
    rows, sizes = saved["rows"].astype(np.int64), saved["sizes"]
    batches = np.split(rows, np.cumsum(sizes)[:-1])
    mn = None
    if args.min:
        from outre_async.plan._policy_kernels import dense_ids, reads_min

        dense, n = dense_ids(rows)
        mn = int(reads_min(dense, n, args.slots))
        print(f"MIN at {args.slots:,} slots: {mn:,} rows ({len(batches)} batches, {len(rows):,} accesses)")
    for fs in [int(x) for x in args.foresight.split(",")]:
        for ra in [int(x) for x in args.read_ahead.split(",")]:
            t = time.perf_counter()
            r = asyncio.run(replay(batches, args.num_nodes, args.slots, read_ahead=ra, merge_rows=args.merge_rows,
                                   depth=args.extract_queue, extractors=args.extractors, policy=args.policy,
                                   foresight=fs))
            x = f", {r['rows'] / mn:.3f} x MIN" if mn else ""
            print(f"foresight {fs}, read_ahead {ra}: {r['rows']:,} rows in {r['ios']:,} reads{x}; {r} "
                  f"({time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
