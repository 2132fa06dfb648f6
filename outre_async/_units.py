"""Human byte sizes: ``"4GiB"`` → 4294967296 and back, for budgets given on the command line."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ConfigError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(value: str | int) -> int:
    """Parse ``"512MiB"``, ``"1.5GB"``, ``"1000"`` or an int into a positive number of bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ConfigError(f"a byte size must be positive, got {value}")
        return value
    match = _PATTERN.match(str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ConfigError(f"cannot read {value!r} as a byte size; write e.g. 512MiB, 4GiB or 1000000")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ConfigError(f"a byte size must be positive, got {value!r}")
    return size


def format_bytes(size: float) -> str:
    """``1536`` → ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def available_memory() -> int:
    """Bytes a new allocation can take now: ``MemAvailable``, lowered to the room left under the
    memory cgroup limits of this process and its ancestors (v2 ``memory.max - memory.current``, v1
    ``memory.limit_in_bytes - memory.usage_in_bytes``), so a process under a cap (``outre bench``'s
    children) does not count the host's memory."""
    avail = _meminfo_available()
    for folder, limit_file, used_file in _cgroup_folders():
        try:
            limit = (folder / limit_file).read_text().strip()
            used = int((folder / used_file).read_text())
        except (OSError, ValueError):
            continue
        if limit != "max" and int(limit) < 1 << 60:  # v1 writes "no limit" as a huge number
            avail = min(avail, max(int(limit) - used, 0))
    return avail


def _cgroup_folders() -> list[tuple[Path, str, str]]:
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.strip().split(":", 2) for ln in f if ln.count(":") >= 2]
    except OSError:
        return []
    out = []
    for _, controllers, rel in lines:
        if controllers == "":
            base, files = Path("/sys/fs/cgroup"), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = Path("/sys/fs/cgroup/memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        group = base / rel.lstrip("/")
        out += [(folder, *files) for folder in (group, *group.parents) if folder.is_relative_to(base)]
    return out


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
