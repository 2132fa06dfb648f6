"""Each outre run against the disk's limit for the reads it issued (the goal: an epoch close to it),
from the device's probe grid when one is cached (``outre probe``; ``--disk-grid`` measures it if
absent and also gives it to the loaders).  Read-only here: with a cached grid every run is
judged the same way whether or not its loader read with the grid.

The limit is :func:`outre_async.loader._epoch_io.disk_limit_seconds`: reads times the probe's time per
read at their mean size (interpolated between its sizes, at the run's reads in flight), or bytes over
its bandwidth, whichever is more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..features._disk_probe import DiskProbe, read_cached
from ..loader._epoch_io import disk_limit_seconds, known_rate


def cached_grid(features: Path, cache_dir: Path) -> DiskProbe | None:
    """The cached grid of ``features``' device (O_DIRECT's, else the buffered one), or None."""
    return read_cached(features, cache_dir) or read_cached(features, cache_dir, direct=False)


def annotate(runs: list[dict[str, Any]], grid: DiskProbe | None, stride: int) -> dict[str, Any] | None:
    """Add ``extra["disk_limit"]`` = {seconds, vs_limit, ios, bytes, bytes_per_io, depth} to every run
    whose loader reports its reads (``extra["io"]``); return the grid's source (``DiskProbe.source``)
    for the report, with ``untrusted`` (why) when the grid may not judge (no run is then annotated).

    A run faster than its own limit is impossible: it is flagged (``beats_limit``, ``vs_limit`` None),
    not reported, since it says the grid is wrong, not that the run is fast."""
    if grid is None:
        return None
    source = grid.source()
    why = grid.untrusted()
    if why is not None:
        return {**source, "untrusted": why}
    for run in runs:
        metrics = run.get("metrics") or {}
        extra = metrics.get("extra") or {}
        io = extra.get("io") or {}
        ios, nbytes, depth = io.get("reads_submitted"), io.get("bytes_read"), io.get("max_in_flight")
        epoch = metrics.get("epoch_seconds")
        if not ios or nbytes is None or not depth or not epoch:
            continue
        rate = known_rate(grid, None, stride, int(depth))
        limit = disk_limit_seconds(rate, int(ios), int(nbytes)) if rate is not None else None
        if not limit:
            continue
        ratio = float(epoch) / limit
        extra["disk_limit"] = {"seconds": round(limit, 3), "vs_limit": round(ratio, 3) if ratio >= 1.0 else None,
                               "ios": int(ios), "bytes": int(nbytes), "bytes_per_io": round(int(nbytes) / int(ios), 1),
                               "depth": int(depth)}
        if ratio < 1.0:
            extra["disk_limit"]["beats_limit"] = (f"{ratio:.2f} x the limit: faster than the grid allows, so the "
                                                  "grid is wrong (run `outre probe --refresh`)")
    return source
