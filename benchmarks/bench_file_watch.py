"""What watching a dataset's files costs a loader (``store._watch``, issue 34.2).

    python benchmarks/bench_file_watch.py                 # files in a temp dir
    python benchmarks/bench_file_watch.py --dir /mnt/nvme --files 2 --repeats 200000

Times :meth:`FileWatch.check` (one ``os.stat`` per watched file, compared with its fingerprint) and
:meth:`FileWatch.check_due` when no check is due (one clock read), then states the worst share of one
core the loader can spend on it: a check at most every ``WATCH_INTERVAL_S`` during an epoch, whatever
the batch rate.  A loader watches one file (``features.bin``) or two (``indices`` memory-mapped).
Nothing here is asserted in CI; ``tests/loader/test_dataset_changed.py`` checks the behaviour.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from outre_async.store._watch import WATCH_INTERVAL_S, FileWatch, Fingerprint


def per_call(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t) / repeats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None, help="where the watched files live (default: a temp dir)")
    ap.add_argument("--files", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        paths = [Path(tmp) / f"f{i}.bin" for i in range(args.files)]
        for p in paths:
            p.write_bytes(b"\0" * 4096)
        watch = FileWatch({p: Fingerprint.of(p) for p in paths}, interval_s=3600.0)
        check = per_call(watch.check, args.repeats)
        idle = per_call(watch.check_due, args.repeats)
    print(f"check of {args.files} file(s): {check * 1e6:.2f} us ({check * 1e6 / args.files:.2f} us a file)")
    print(f"check_due, not due: {idle * 1e9:.0f} ns (paid per batch handed over)")
    print(f"at most one check per {WATCH_INTERVAL_S * 1e3:.0f} ms: at most {check / WATCH_INTERVAL_S:.3%} of a core")


if __name__ == "__main__":
    main()
