"""Counters read from the kernel: per-process I/O, per-device I/O, page-cache eviction, machine facts.

``/proc/<pid>/io`` ``read_bytes`` counts the bytes this process caused to be fetched from the block
layer (page-cache misses, readahead and O_DIRECT reads of every thread); ``/proc/diskstats`` counts
the sectors the device really read, for every process on the machine.  The harness reports both:
on a quiet machine they agree, and a diskstats figure far above read_bytes means someone else was
reading the same disk during the run.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
from pathlib import Path
from typing import Any


def proc_read_bytes(pid: int | str = "self") -> int:
    """``read_bytes`` of ``/proc/<pid>/io`` (0 where the file does not exist)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def device_of(path: str | os.PathLike[str]) -> str | None:
    """The ``/proc/diskstats`` name of the block device holding ``path`` (None if not found)."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    for fields in _diskstats():
        if int(fields[0]) == major and int(fields[1]) == minor:
            return fields[2]
    return None


def diskstats_read_bytes(device: str | None) -> int | None:
    """Bytes read so far by ``device`` (sectors read × 512), or None without the device."""
    if device is None:
        return None
    for fields in _diskstats():
        if fields[2] == device:
            return int(fields[5]) * 512
    return None


def _diskstats() -> list[list[str]]:
    try:
        return [line.split() for line in Path("/proc/diskstats").read_text().splitlines() if line.strip()]
    except OSError:
        return []


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (``ru_maxrss`` is in KiB on Linux)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def evict_from_page_cache(directory: str | os.PathLike[str]) -> int:
    """``posix_fadvise(DONTNEED)`` every file of ``directory``; return the bytes advised.

    Pages mapped by a live process are not dropped; the harness calls this between child processes,
    when nothing maps the dataset.
    """
    total = 0
    for path in sorted(Path(directory).iterdir()):
        if not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return total


def machine_facts(dataset_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What a reader needs to judge the numbers: CPU, memory, kernel, disk, load, versions."""
    import numpy
    import torch
    import torch_geometric

    from .. import __version__

    device = device_of(dataset_dir)
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": _meminfo("MemTotal"),
        "mem_available_bytes": _meminfo("MemAvailable"),
        "loadavg": _loadavg(),
        "disk_device": device,
        "disk_rotational": _sysfs_block(device, "queue/rotational"),
        "disk_read_ahead_kb": _sysfs_block(device, "queue/read_ahead_kb"),
        "disk_free_bytes": shutil.disk_usage(dataset_dir).free,
        "root": os.geteuid() == 0,
        "fio": shutil.which("fio"),
        "versions": {"outre_async": __version__, "torch": torch.__version__,
                     "torch_geometric": torch_geometric.__version__, "numpy": numpy.__version__},
        "torch_threads": torch.get_num_threads(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo(key: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _loadavg() -> list[float]:
    try:
        return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _sysfs_block(device: str | None, rel: str) -> str | None:
    if device is None:
        return None
    for base in (Path("/sys/class/block") / device, Path("/sys/block") / device):
        try:
            return (base / rel).read_text().strip()
        except OSError:
            continue
    return None
