"""The device probed beside each run: right after an outre system's epoch (untimed, in the harness), a
short probe of random reads at that run's mean read size and reads in flight, on the dataset's feature
file; recorded in the run (``extra["disk_probe_beside"]``) and the first thing its limit is judged by
(``_disk_limit``).

Why beside the run: a cached grid (``outre probe``) drifts with the device and the host's load, so a
limit from a grid measured minutes or days before can flatter a run or be beaten by it; a probe seconds
after the epoch sees the device as the run left it.  Why one cell: the limit needs the rate at the
run's own read size and depth only, and one cell of ``BESIDE_SECONDS`` keeps the suite short.  The
cell is a :class:`~outre_async.features.DiskProbe` like any grid, so the same trust rule applies (a
small file or a short cell judges nothing).  Runs that report no reads of their own (the PyG systems
read through the page cache) are not probed; a probe that cannot run records why.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DirectIOUnsupported, ProbeError

if TYPE_CHECKING:  # the probe (numpy, the io_uring kernels) loads when a suite runs, not with the CLI's parser
    from ..features._disk_probe import DiskProbe

ALIGN = 4096          # read sizes are whole 4 KiB blocks, as the probe's offsets are (``_disk_probe.ALIGN``)
BESIDE_SECONDS = 1.0  # the cell's length: at least the grid's TRUSTED_CELL_SECONDS, short beside an epoch
MAX_READ = 64 << 20   # the probe's largest read size
MAX_DEPTH = 4096      # and its deepest queue


def run_reads(run: dict[str, Any]) -> tuple[int, int, int] | None:
    """``(reads, bytes, reads in flight)`` a run's loader reports (``extra["io"]``), or None."""
    io = (((run.get("metrics") or {}).get("extra") or {}).get("io")) or {}
    ios, nbytes, depth = io.get("reads_submitted"), io.get("bytes_read"), io.get("max_in_flight")
    if not ios or not nbytes or not depth:
        return None
    return int(ios), int(nbytes), int(depth)


def probe_beside(features: Path, run: dict[str, Any], seconds: float = BESIDE_SECONDS) -> None:
    """Probe ``features``' device at ``run``'s mean read size (rounded up to 4 KiB) and reads in
    flight, and record the cell (or why there is none) in the run's ``extra["disk_probe_beside"]``."""
    reads = run_reads(run)
    if reads is None:
        return
    ios, nbytes, depth = reads
    size = min(MAX_READ, max(ALIGN, -(-(nbytes // ios) // ALIGN) * ALIGN))
    extra = run["metrics"]["extra"]
    try:
        probe = _probe(features, min(depth, MAX_DEPTH), size, seconds)
    except (ProbeError, OSError) as exc:  # recorded like any other fact of the run, not fatal to the suite
        extra["disk_probe_beside"] = {"error": f"{type(exc).__name__}: {exc}"}
        return
    extra["disk_probe_beside"] = {**probe.to_json(), "untrusted": probe.untrusted()}


def _probe(features: Path, depth: int, size: int, seconds: float) -> DiskProbe:
    from ..features._disk_probe import probe_disk

    try:
        return probe_disk(features, depths=(depth,), sizes=(size,), seconds=seconds)
    except DirectIOUnsupported:  # tmpfs and kin: buffered reads, recorded as ``direct: false``
        return probe_disk(features, depths=(depth,), sizes=(size,), seconds=seconds, direct=False)


def beside_probe(run: dict[str, Any]) -> DiskProbe | None:
    """The trusted probe beside ``run``, or None (none taken, it failed, or too small or short to judge)."""
    data = (((run.get("metrics") or {}).get("extra") or {}).get("disk_probe_beside")) or {}
    if "cells" not in data or data.get("untrusted"):
        return None
    from ..features._disk_probe import DiskProbe

    try:
        return DiskProbe.from_json(data)
    except ProbeError:
        return None
