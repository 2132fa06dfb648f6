"""The disk's random-read rate, measured once at the start of a suite on the dataset's feature file.

The same probe as ``outre probe`` (:mod:`outre_async.features._disk_probe`: one io_uring driven from
numba, O_DIRECT, read-only), restricted to one read size, the feature row's span rounded up to 4 KiB
(the smallest read every O_DIRECT file system accepts), at every queue depth of the default grid.
The suite's ``iops`` is the best depth's rate: the device's limit for the rows a run must read,
which is what the summary's I/O-bound term divides by.  Measured afresh for every suite (not
cached: the suite records the disk as it was during its runs).  A file system without O_DIRECT gets
buffered reads, recorded as ``"direct": false`` with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import DirectIOUnsupported
from ..features._disk_probe import DEPTHS, in_flight_for, probe_disk


def probe_random_reads(path: Path, block: int, *, seconds: float = 4.0) -> dict[str, Any]:
    """Random ``block``-byte reads per second on ``path``: ``{"tool", "iops", "bytes_per_s", ...}``
    (``seconds`` is the whole probe, shared by the depths)."""
    size = max(4096, -(-block // 4096) * 4096)
    per_depth = seconds / len(DEPTHS)
    fallback = None
    try:
        probe = probe_disk(path, depths=DEPTHS, sizes=(size,), seconds=per_depth)
    except DirectIOUnsupported as exc:
        fallback = str(exc)
        probe = probe_disk(path, depths=DEPTHS, sizes=(size,), seconds=per_depth, direct=False)
    cells = [c for c in probe.cells if c.size == size]
    best = max(cells, key=lambda c: c.iops)
    return {"tool": "outre-probe io_uring", "block_bytes": size, "depth": best.depth,
            "seconds": sum(c.seconds for c in cells), "iops": best.iops, "bytes_per_s": best.bytes_per_s,
            "direct": probe.direct, "fallback": fallback, "in_flight": in_flight_for(probe, size),
            "iops_by_depth": {str(c.depth): round(c.iops, 1) for c in cells}, "device": probe.device}
