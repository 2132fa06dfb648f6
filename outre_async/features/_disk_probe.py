"""Know the disk: random-read IOPS and bandwidth by queue depth and read size, with O_DIRECT.

What a feature read costs is set by the device under the dataset's file: how many random reads per
second it serves at each queue depth and read size.  :func:`probe_disk` measures that grid on one
file, read-only: for each ``(depth, size)`` cell it keeps ``depth`` reads of ``size`` bytes at random
4 KiB-aligned offsets in flight on one io_uring (:mod:`._probe_kernels`, the loop in numba, so the
depth is the device's real queue depth) for ``seconds``.  Reads use ``O_DIRECT``, so the page cache
never answers; a file system that refuses it (tmpfs) raises :class:`DirectIOUnsupported` and the
caller decides whether buffered reads are worth measuring (``direct=False``; the result says
``direct: false``, and the CLI says so).  The kernel runs chunks of about 50 ms and Python times them;
reads stay in flight across chunks (the queue never drains inside a cell), and each cell ends with
an untimed drain, so a cell's rate is the steady state's.

Results are cached per device (:func:`cached_probe`): one JSON file per ``st_dev`` and mount source,
in a folder the caller passes (the CLI picks ``$XDG_CACHE_HOME/outre/probe/``); nothing here reads
the environment.  A cached grid is reused when it covers the cells asked for, whatever file on that
device it was measured on.

:func:`in_flight_for` turns a probe into the loader's ``max_in_flight`` by Little's law: the device
reaches its peak rate once ``depth = rate x latency`` reads are outstanding; the smallest measured
depth reaching ``fraction`` of the peak at that read size is that knee, doubled because the loader's
loop reaps completions in bursts (docs/reference/options.md, ``max_in_flight``).  The loader never probes by itself:
``outre profile`` records the depth in the profile, or pass ``disk_probe=`` (see ``LoaderConfig``).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DirectIOUnsupported, ProbeError
from ._disk_source import open_direct
from ._probe_grid import DEPTHS, SECONDS, SIZES
from ._staging import SECTOR, merge_gap_bytes

SCHEMA = "outre-probe/1"
ALIGN = 4096   # offsets are 4 KiB aligned, like a feature row's span
BUFFER_CAP = 64 << 20  # the reads' scratch buffer at most (slots are shared beyond it)
CHUNK_SECONDS = 0.05
SCRATCH_BYTES = 1 << 30
# What a grid must have been measured on to stand for the device's limit (:meth:`DiskProbe.untrusted`):
# a small file sits in the device's and the host's caches, and a short cell is mostly ramp-up: a tiny
# test file probed in short cells under load once gave a fraction of the device's rate, and every
# "x limit" judged by it came out impossible (tests/features/test_disk_probe.py pins the refusal).
TRUSTED_FILE_BYTES = 256 << 20
TRUSTED_CELL_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeCell:
    """One cell of the grid: ``reads`` of ``size`` bytes with ``depth`` in flight over ``seconds``."""

    depth: int
    size: int
    iops: float
    bytes_per_s: float
    reads: int
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class DiskProbe:
    """One measured grid: ``cells`` by ``(depth, size)``; ``device`` says which device it describes."""

    path: str
    file_bytes: int
    direct: bool
    device: dict[str, Any]
    measured_at: float  # Unix time
    seconds_per_cell: float
    cells: tuple[ProbeCell, ...]
    tool: str = "io_uring"
    note: str = ""
    load_per_core: float | None = None  # the 1-minute load average over the usable cores when measured
    _index: dict[tuple[int, int], ProbeCell] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({(c.depth, c.size): c for c in self.cells})

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(sorted({c.depth for c in self.cells}))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(sorted({c.size for c in self.cells}))

    def cell(self, depth: int, size: int) -> ProbeCell | None:
        return self._index.get((depth, size))

    def covers(self, depths: Sequence[int], sizes: Sequence[int]) -> bool:
        return all((d, s) in self._index for d in depths for s in sizes)

    def size_for(self, read_bytes: int) -> int:
        """The measured read size that stands for reads of ``read_bytes``: the smallest at or above it
        (a 512 B read costs a 4 KiB one's I/O), else the largest."""
        sizes = self.sizes
        return next((s for s in sizes if s >= read_bytes), sizes[-1])

    def measured_depth(self, depth: int) -> int:
        """The depth that stands for ``depth``: the largest measured at or below it, else the smallest."""
        below = [d for d in self.depths if d <= depth]
        return below[-1] if below else self.depths[0]

    def cells_at(self, depth: int) -> list[ProbeCell]:
        """The cells of :meth:`measured_depth` ``(depth)``, one per read size (a cached file that repeats
        a cell counts it once), by size."""
        d = self.measured_depth(depth)
        return [self._index[(d, z)] for z in self.sizes if (d, z) in self._index]

    def iops_at(self, depth: int, read_bytes: int) -> float:
        """Reads/s at ``depth`` (:meth:`measured_depth`) for reads of ``read_bytes``."""
        cell = self.cell(self.measured_depth(depth), self.size_for(read_bytes))
        return cell.iops if cell is not None else 0.0

    def untrusted(self) -> str | None:
        """Why this grid must not stand for the device's limit (too small a file, too short a cell),
        or None: a limit judged from it could be beaten by the very runs it judges."""
        if self.file_bytes < TRUSTED_FILE_BYTES:
            return (f"measured on a {self.file_bytes / 2**20:.1f} MiB file (at least {TRUSTED_FILE_BYTES >> 20} MiB: "
                    "a smaller one sits in the device's caches); run `outre probe --refresh` on the dataset")
        if self.seconds_per_cell < TRUSTED_CELL_SECONDS:
            return (f"{self.seconds_per_cell:g} s a cell (at least {TRUSTED_CELL_SECONDS:g} s); run "
                    "`outre probe --refresh --seconds 1`")
        return None

    def source(self, now: float | None = None) -> dict[str, Any]:
        """What the grid was measured on, for a report that judges runs by it."""
        return {"path": self.path, "file_bytes": self.file_bytes, "seconds_per_cell": self.seconds_per_cell,
                "age_seconds": round(self.age(now), 1), "direct": self.direct, "load_per_core": self.load_per_core}

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.measured_at)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "tool": self.tool, "path": self.path, "file_bytes": self.file_bytes,
                "direct": self.direct, "device": dict(self.device), "measured_at": self.measured_at,
                "measured_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.measured_at)),
                "seconds_per_cell": self.seconds_per_cell, "note": self.note, "load_per_core": self.load_per_core,
                "depths": list(self.depths), "sizes": list(self.sizes),
                "cells": [{"depth": c.depth, "size": c.size, "iops": round(c.iops, 1),
                           "bytes_per_s": round(c.bytes_per_s, 1), "reads": c.reads,
                           "seconds": round(c.seconds, 4)} for c in self.cells]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DiskProbe:
        """The probe a :meth:`to_json` wrote; ``ProbeError`` if it is of another schema or malformed."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ProbeError(f"expected a probe of schema {SCHEMA!r}, found {found!r}; run `outre probe --refresh`")
        try:
            cells = tuple(ProbeCell(depth=int(c["depth"]), size=int(c["size"]), iops=float(c["iops"]),
                                    bytes_per_s=float(c["bytes_per_s"]), reads=int(c["reads"]),
                                    seconds=float(c["seconds"])) for c in data["cells"])
            return cls(path=str(data["path"]), file_bytes=int(data["file_bytes"]), direct=bool(data["direct"]),
                       device=dict(data["device"]), measured_at=float(data["measured_at"]),
                       seconds_per_cell=float(data["seconds_per_cell"]), cells=cells,
                       tool=str(data.get("tool", "io_uring")), note=str(data.get("note", "")),
                       load_per_core=None if data.get("load_per_core") is None else float(data["load_per_core"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeError(f"a probe's JSON lacks or mistypes {exc}; run `outre probe --refresh`") from exc


# -- Little's law ------------------------------------------------------------------------------------


def saturating_depth(depths: Sequence[int], iops: Sequence[float], *, fraction: float = 0.9) -> int:
    """The smallest depth whose rate reaches ``fraction`` of the best rate among ``depths`` (sorted
    by depth or not): the knee of the curve, ``peak rate x latency`` reads outstanding."""
    if not depths or len(depths) != len(iops):
        raise ValueError(f"need one rate per depth, got {len(depths)} depths and {len(iops)} rates")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    peak = max(iops)
    return min(d for d, r in zip(depths, iops, strict=True) if r >= fraction * peak)


def in_flight_for(probe: DiskProbe, read_bytes: int, *, fraction: float = 0.9, burst: int = 2,
                  limit: int = 4096) -> int:
    """Reads to keep in flight for reads of ``read_bytes`` on the probed device: the saturating depth
    at that size (:func:`saturating_depth`) times ``burst`` (the loop reaps in bursts), at most ``limit``
    and at most the deepest depth the probe measured.  Why that cap: past it nothing says the device
    takes more, and reads beyond the device's block queue go to io_uring's worker threads, which left
    the disk idle longer and the epoch slower (``benchmarks/disk_idle_epoch.py`` counts the idle
    seconds)."""
    size = probe.size_for(read_bytes)
    cells = [probe.cell(d, size) for d in probe.depths]
    pairs = [(c.depth, c.iops) for c in cells if c is not None]
    knee = saturating_depth([d for d, _ in pairs], [r for _, r in pairs], fraction=fraction)
    return max(1, min(limit, knee * burst, max(d for d, _ in pairs)))


# -- the device a path lives on ------------------------------------------------------------------


def device_of(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> dict[str, Any]:
    """``{"dev", "source", "fstype", "mount", "block", "key"}`` of the file system holding ``path``:
    ``st_dev`` as ``MAJ:MIN``, the mount's source and type (``/proc/self/mountinfo``), the block
    device's name (``/sys/dev/block/MAJ:MIN``, when there is one) and a file-name-safe key."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    source = fstype = mount = ""
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            fields = line.split()
            if len(fields) > 4 and fields[2] == dev and " - " in line:
                tail = line.split(" - ", 1)[1].split()
                mount = fields[4]
                fstype, source = (tail + ["", ""])[:2]
                break
    block = ""
    with contextlib.suppress(OSError):
        block = Path(os.readlink(f"/sys/dev/block/{dev}")).name
    name = block or source.rsplit("/", 1)[-1] or fstype or "unknown"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return {"dev": dev, "source": source, "fstype": fstype, "mount": mount, "block": block,
            "key": f"{dev.replace(':', '-')}-{safe}"}


# -- the measurement -------------------------------------------------------------------------------


def probe_disk(path: str | os.PathLike[str], *, depths: Sequence[int] = DEPTHS, sizes: Sequence[int] = SIZES,
               seconds: float = SECONDS, direct: bool = True, seed: int = 0,
               progress: Callable[[ProbeCell], None] | None = None) -> DiskProbe:
    """Measure random reads on the file ``path`` (read-only; module docstring).  Raises
    :class:`DirectIOUnsupported` where O_DIRECT is refused (and ``direct``), :class:`ProbeError` for a
    file smaller than the largest read or a failed read."""
    from . import _uring_kernels as K

    path = Path(path)
    depths, sizes = _check_grid(depths, sizes, seconds)
    fd, is_direct, _ = open_direct(path, direct)
    try:
        if direct and not is_direct:
            dev = device_of(path)
            raise DirectIOUnsupported(f"{path} is on {dev['fstype'] or 'a file system'} ({dev['source']}), which "
                                      "refuses O_DIRECT reads; probe buffered reads instead (outre probe does, "
                                      "and says so) or probe a file on the dataset's disk")
        size = os.fstat(fd).st_size
        if size < sizes[-1] + ALIGN:
            raise ProbeError(f"{path} has {size} bytes; the probe needs a file larger than its largest read "
                             f"({sizes[-1]} B): probe a dataset's features file or a folder (a scratch file)")
        ring = K.new_ring()
        rc = K.clib().io_uring_queue_init(1 << (max(depths) - 1).bit_length(), ring.ctypes.data, 0)
        if rc < 0:
            raise ProbeError(f"io_uring_queue_init failed: {os.strerror(-rc)}; the probe needs io_uring "
                             "(Linux 5.6 or later, not disabled by sysctl or a seccomp profile)")
        buf = mmap.mmap(-1, min(BUFFER_CAP, max(depths) * sizes[-1]))
        try:
            cells = _measure(ring, fd, buf, path, size, depths, sizes, seconds, seed, progress)
        finally:
            K.clib().io_uring_queue_exit(ring.ctypes.data)
            buf.close()
    finally:
        os.close(fd)
    note = "" if is_direct else "buffered reads (no O_DIRECT): the page cache may answer, not the device"
    return DiskProbe(path=str(path.resolve()), file_bytes=size, direct=is_direct, device=device_of(path),
                     measured_at=time.time(), seconds_per_cell=seconds, cells=tuple(cells), note=note,
                     load_per_core=_load_per_core())


def _load_per_core() -> float | None:
    """The 1-minute load average over this process's usable cores (a loaded machine measures less)."""
    try:
        return round(os.getloadavg()[0] / max(1, len(os.sched_getaffinity(0))), 2)
    except (AttributeError, OSError):
        return None


def _check_grid(depths: Sequence[int], sizes: Sequence[int], seconds: float) -> tuple[list[int], list[int]]:
    d, s = sorted({int(x) for x in depths}), sorted({int(x) for x in sizes})
    if not d or d[0] < 1 or d[-1] > 4096:
        raise ProbeError(f"depths must be in [1, 4096], got {list(depths)}")
    if not s or any(x < 512 or x % 512 or x > (64 << 20) for x in s):
        raise ProbeError(f"read sizes must be multiples of 512 B up to 64 MiB, got {list(sizes)}")
    if not 0.0 < seconds <= 60.0:
        raise ProbeError(f"seconds per cell must be in (0, 60], got {seconds}")
    return d, s


def _measure(ring: np.ndarray, fd: int, buf: mmap.mmap, path: Path, file_size: int, depths: list[int],
             sizes: list[int], seconds: float, seed: int,
             progress: Callable[[ProbeCell], None] | None) -> list[ProbeCell]:
    from ._probe_kernels import random_reads

    run = _Runner(random_reads, ring, fd, buf, path, file_size, np.random.default_rng(seed))
    run.chunk(sizes[0], 1, 1)  # compile (first use) and warm
    run.drain(sizes[0])
    cells = []
    for depth in depths:
        for length in sizes:
            reads = nbytes = 0
            n = max(16, depth, min(4 * depth, (32 << 20) // length))
            started = time.perf_counter()
            while (elapsed := time.perf_counter() - started) < seconds:
                t = time.perf_counter()
                got, b = run.chunk(length, depth, n)
                reads, nbytes = reads + got, nbytes + b
                took = time.perf_counter() - t
                # the next chunk: about CHUNK_SECONDS long, never far past the cell's end
                goal = min(CHUNK_SECONDS, max(seconds - elapsed - took, 0.005))
                n = int(min(max(16, n * goal / max(took, 1e-6)), 1 << 22))
            run.drain(length)  # untimed: the reads still in flight belong to no cell
            cell = ProbeCell(depth=depth, size=length, iops=reads / elapsed, bytes_per_s=nbytes / elapsed,
                             reads=reads, seconds=elapsed)
            cells.append(cell)
            if progress is not None:
                progress(cell)
    return cells


class _Runner:
    """The kernel's arguments that stay put across a probe's calls, and its in-flight state."""

    def __init__(self, kernel: Any, ring: np.ndarray, fd: int, buf: mmap.mmap, path: Path, file_size: int,
                 rng: np.random.Generator) -> None:
        self.kernel, self.ring, self.fd, self.path, self.file_size, self.rng = kernel, ring, fd, path, file_size, rng
        self.addr = np.frombuffer(buf, dtype=np.uint8).ctypes.data
        self.buf_bytes = len(buf)
        self.cqes = np.zeros(256, dtype=np.uint64)
        self.state = np.zeros(2, dtype=np.int64)  # reads in flight, reads numbered so far

    def chunk(self, length: int, depth: int, n: int) -> tuple[int, int]:
        offsets = self.rng.integers(0, (self.file_size - length) // ALIGN + 1, size=n, dtype=np.uint64)
        return self._call(length, depth, offsets * np.uint64(ALIGN))

    def drain(self, length: int) -> None:
        self._call(length, 1, np.empty(0, dtype=np.uint64))

    def _call(self, length: int, depth: int, offsets: np.ndarray) -> tuple[int, int]:
        done, nbytes, err = self.kernel(self.ring.ctypes.data, self.fd, self.addr, max(1, self.buf_bytes // length),
                                        length, offsets, depth, self.cqes, self.state)
        if err < 0:
            raise ProbeError(f"a {length} B read of {self.path} failed: {os.strerror(-err)} (errno {-err}); "
                             "check the disk (dmesg) or probe another file")
        return done, nbytes


# -- the cache -----------------------------------------------------------------------------------------


def cache_file(cache_dir: Path, device: dict[str, Any], direct: bool) -> Path:
    return Path(cache_dir) / f"{device['key']}{'' if direct else '-buffered'}.json"


def read_cached(path: Path, cache_dir: Path, *, direct: bool = True) -> DiskProbe | None:
    """The cached probe of ``path``'s device, or None (none there, or unreadable: measured again)."""
    try:
        data = json.loads(cache_file(cache_dir, device_of(path), direct).read_text())
        return DiskProbe.from_json(data)
    except (OSError, ValueError, ProbeError):
        return None


def cached_probe(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str], *, refresh: bool = False,
                 depths: Sequence[int] = DEPTHS, sizes: Sequence[int] = SIZES, seconds: float = SECONDS,
                 direct: bool = True, progress: Callable[[ProbeCell], None] | None = None,
                 ) -> tuple[DiskProbe, bool]:
    """``(probe, cached)``: the device's cached grid when it covers ``depths x sizes`` (and not
    ``refresh``), else a new measurement of ``path``, written to ``cache_dir`` atomically."""
    path, cache_dir = Path(path), Path(cache_dir)
    if not refresh:
        old = read_cached(path, cache_dir, direct=direct)
        if old is not None and old.covers(depths, sizes):
            return old, True
    probe = probe_disk(path, depths=depths, sizes=sizes, seconds=seconds, direct=direct, progress=progress)
    target = cache_file(cache_dir, probe.device, probe.direct)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(probe.to_json(), indent=1))
    os.replace(tmp, target)
    return probe, False


@contextlib.contextmanager
def scratch_file(folder: Path, nbytes: int = SCRATCH_BYTES) -> Iterator[Path]:
    """A file of ``nbytes`` pseudo-random bytes in ``folder`` (a hidden temporary name), flushed to
    the device, removed on the way out: what the probe reads where no dataset file is given."""
    folder = Path(folder)
    free = os.statvfs(folder)
    if free.f_bavail * free.f_frsize < 2 * nbytes:
        raise ProbeError(f"{folder} has {free.f_bavail * free.f_frsize} bytes free; a {nbytes} B scratch file "
                         "needs twice that: probe a dataset folder or a large file instead")
    path = folder / f".outre-probe-{os.getpid()}.tmp"
    block = np.random.default_rng(0).integers(0, 256, size=8 << 20, dtype=np.uint8).tobytes()
    try:
        with open(path, "wb") as f:
            left = nbytes
            while left > 0:
                left -= f.write(block[: min(left, len(block))])
            f.flush()
            os.fsync(f.fileno())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def gap_from_probe(probe: DiskProbe | None, depth: int, read_bytes: int, *, max_read: int = 128 << 10) -> int:
    """:func:`merge_gap_bytes` with the rates of a :class:`DiskProbe` at ``depth``: reads/s of
    ``read_bytes`` reads and the best bandwidth among its read sizes at that depth (None: the default)."""
    if probe is None:
        return merge_gap_bytes(None, None, max_read=max_read)
    bandwidth = max((c.bytes_per_s for c in probe.cells_at(depth)), default=0.0)
    return merge_gap_bytes(probe.iops_at(depth, read_bytes), bandwidth,
                           read_bytes=max(read_bytes, SECTOR), max_read=max_read)
