"""The disk's random-read rate, measured once at the start of a suite on the dataset's feature file.

``fio --rw=randread --direct=1 --ioengine=io_uring`` at the block size of one feature row and a
queue depth like the loader's, read-only, for a few seconds.  Without fio, a Python probe does the
same with O_DIRECT ``preadv`` from a pool of threads (one read in flight per thread); it is recorded
as such, since it can underestimate a fast NVMe device.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def probe_random_reads(path: Path, block: int, *, seconds: float = 4.0, depth: int = 64) -> dict[str, Any]:
    """Random ``block``-byte reads per second on ``path``: ``{"tool", "iops", "bytes_per_s", ...}``."""
    fio = shutil.which("fio")
    if fio is not None:
        try:
            return _fio(fio, path, block, seconds, depth)
        except (subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
            fallback = _python_probe(path, block, seconds, min(depth, 32))
            return {**fallback, "fio_error": str(exc)[:300]}
    return _python_probe(path, block, seconds, min(depth, 32))


def _fio(fio: str, path: Path, block: int, seconds: float, depth: int) -> dict[str, Any]:
    cmd = [fio, "--name=outre-probe", f"--filename={path}", "--rw=randread", f"--bs={block}", "--direct=1",
           "--ioengine=io_uring", f"--iodepth={depth}", f"--runtime={max(int(seconds), 1)}", "--time_based",
           "--readonly", "--output-format=json", "--randrepeat=0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True)
    read = json.loads(done.stdout)["jobs"][0]["read"]
    return {"tool": "fio", "command": " ".join(cmd), "block_bytes": block, "depth": depth,
            "seconds": seconds, "iops": float(read["iops"]), "bytes_per_s": float(read["bw_bytes"])}


def _python_probe(path: Path, block: int, seconds: float, threads: int) -> dict[str, Any]:
    size = path.stat().st_size
    align = 4096
    span = -(-block // align) * align
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    deadline = time.perf_counter() + seconds

    def worker(k: int) -> int:
        buf = mmap.mmap(-1, span)  # page-aligned, as O_DIRECT needs
        rng = random.Random(k)
        count = 0
        while time.perf_counter() < deadline:
            offset = rng.randrange(0, max(size - span, 1)) // align * align
            os.preadv(fd, [buf], offset)
            count += 1
        buf.close()
        return count

    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            reads = sum(pool.map(worker, range(threads)))
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return {"tool": "python-odirect", "block_bytes": span, "depth": threads, "seconds": elapsed,
            "iops": reads / elapsed, "bytes_per_s": reads * span / elapsed}
