"""``loader.stats()["epoch_io"]``: what the latest epoch asked of the disk, beside what the disk can do.

The source's counters run from its opening (``stats()["io"]``); an epoch's share is the difference
between a snapshot taken when the epoch starts and one taken when it ends (or now, while it runs).
``ios``: reads submitted; ``rows_from_disk``: distinct rows per request that the source read (rows
the feature buffer or the static cache served never reach it); ``rows_per_io`` > 1 when neighbouring
rows were coalesced into one read.  ``reads_per_s`` is over the epoch's wall time (what training
sees), ``busy_reads_per_s`` over the time with at least one read in flight (what the device did).
With a probe of the device (``disk_probe=``, or the one ``outre profile`` recorded), ``vs_probe`` is
``reads_per_s`` over the probe's rate at the loader's depth for reads of one row's span, and
``probe_direct`` says whether that probe used O_DIRECT (False: a buffered fallback, page cache).
With a probe's grid of read sizes (``disk_probe=``), ``limit_seconds`` is the least time the device
needs for the epoch's reads and bytes, ``max(ios × t(mean read), bytes ÷ bandwidth)`` at the loader's
depth, ``t`` the probe's seconds per read interpolated linearly between its sizes (a read costs a
fixed time plus its bytes over the bandwidth, a model the virtio disk here fitted closely at every
probed size; ``tests/loader/test_epoch_io.py`` checks the interpolation), and ``vs_limit`` the epoch's seconds over it (1 is the device's
limit; ``outre bench`` reports it per system).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeRate:
    """What the loader knows of its device's rate: reads/s at its depth, the best depth's, the probe's mode."""

    iops_at_depth: float
    peak_iops: float
    depth: int
    read_bytes: int
    direct: bool
    read_seconds: tuple[tuple[int, float], ...] = ()  # (read size, seconds per read) at the depth, by size
    bandwidth: float = 0.0  # bytes/s: the best of the depth's read sizes


@dataclass(frozen=True, kw_only=True, slots=True)
class IOMark:
    t: float
    io: dict[str, Any]


def epoch_io(start: IOMark, end: IOMark, rate: ProbeRate | None) -> dict[str, Any]:
    """The epoch's I/O figures between two marks (module docstring); a pure function of its inputs."""
    def diff(key: str) -> float:
        return float(end.io.get(key, 0)) - float(start.io.get(key, 0))

    seconds = max(end.t - start.t, 0.0)
    ios, nbytes, rows, busy = int(diff("reads_submitted")), int(diff("bytes_read")), int(diff("unique_rows")), diff("busy_seconds")
    out: dict[str, Any] = {
        "seconds": round(seconds, 4), "ios": ios, "bytes_read": nbytes, "rows_from_disk": rows,
        "rows_per_io": round(rows / ios, 3) if ios else 0.0, "bytes_per_io": round(nbytes / ios, 1) if ios else 0.0,
        "reads_per_s": round(ios / seconds, 1) if seconds > 0 else 0.0,
        "busy_reads_per_s": round(ios / busy, 1) if busy > 0 else 0.0,
        "max_in_flight": end.io.get("max_in_flight"), "direct": end.io.get("direct"),
    }
    if rate is not None:
        out.update(probe_iops_at_depth=round(rate.iops_at_depth, 1), probe_peak_iops=round(rate.peak_iops, 1),
                   probe_depth=rate.depth, probe_read_bytes=rate.read_bytes, probe_direct=rate.direct,
                   vs_probe=round(out["reads_per_s"] / rate.iops_at_depth, 3) if rate.iops_at_depth else None)
        limit = disk_limit_seconds(rate, ios, nbytes)
        if limit is not None:
            out.update(limit_seconds=round(limit, 3), vs_limit=round(seconds / limit, 3) if limit > 0 else None)
    return out


def disk_limit_seconds(rate: ProbeRate, ios: int, nbytes: int) -> float | None:
    """The least seconds the device needs for ``ios`` reads of ``nbytes`` in all (module docstring);
    None without a grid of read sizes."""
    if not rate.read_seconds or rate.bandwidth <= 0:
        return None
    if not ios:
        return 0.0
    sizes = [float(z) for z, _ in rate.read_seconds]
    secs = [t for _, t in rate.read_seconds]
    mean = nbytes / ios
    if len(sizes) == 1:
        per_read = secs[0]
    else:  # linear between the sizes around the mean, extended from the nearest pair beyond them
        k = min(max(1, sum(z <= mean for z in sizes)), len(sizes) - 1)
        (z0, t0), (z1, t1) = (sizes[k - 1], secs[k - 1]), (sizes[k], secs[k])
        per_read = max(t0 + (mean - z0) * (t1 - t0) / (z1 - z0), 0.0)
    return max(ios * per_read, nbytes / rate.bandwidth)


def probe_rate(iops_by_depth: dict[int, float], depth: int, read_bytes: int, direct: bool) -> ProbeRate:
    """The rate at ``depth`` (the largest probed depth at or below it, else the smallest probed) and
    the best probed rate, from a probe's reads/s by depth at one read size."""
    depths = sorted(iops_by_depth)
    below = [d for d in depths if d <= depth] or depths[:1]
    return ProbeRate(iops_at_depth=iops_by_depth[below[-1]], peak_iops=max(iops_by_depth.values()), depth=depth,
                     read_bytes=read_bytes, direct=direct)


def known_rate(probe: Any, profile_info: dict[str, Any] | None, stride: int, depth: int | None) -> ProbeRate | None:
    """The device's rate at the loader's depth: from the loader's ``disk_probe`` (a
    :class:`~outre_async.features.DiskProbe`), else from the applied profile's record (``info["io"]``)."""
    if not depth:
        return None
    if probe is not None:
        size = probe.size_for(stride)
        by_depth = {c.depth: c.iops for c in probe.cells if c.size == size}
        rate = probe_rate(by_depth, int(depth), size, probe.direct)
        cells = [c for c in probe.cells_at(int(depth)) if c.iops > 0]
        return replace(rate, read_seconds=tuple((c.size, 1.0 / c.iops) for c in cells),
                       bandwidth=max((c.bytes_per_s for c in cells), default=0.0))
    io = profile_info.get("io") if profile_info is not None else None
    if io and io.get("iops_by_depth"):
        by_depth = {int(d): float(r) for d, r in io["iops_by_depth"].items()}
        return probe_rate(by_depth, int(depth), int(io["read_bytes"]), bool(io["direct"]))
    return None


def latest_epoch_io(marks: tuple[IOMark, IOMark | None] | None, source_stats: dict[str, Any] | None,
                    probe: Any, profile_info: dict[str, Any] | None, stride: int) -> dict[str, Any]:
    """The latest epoch's reads: to its end, or to now (``source_stats``, the open source's counters)
    while it runs; empty before any epoch, or while one runs with the source closed."""
    if marks is None:
        return {}
    start, end = marks
    if end is None:
        if source_stats is None:
            return {}
        end = IOMark(t=time.perf_counter(), io=source_stats)
    return epoch_io(start, end, known_rate(probe, profile_info, stride, end.io.get("max_in_flight")))
