"""A memory cap for one child process: a cgroup created before the child starts and removed after.

cgroup v1 (``memory`` controller: ``memory.limit_in_bytes``, ``memory.max_usage_in_bytes``, the
``oom_kill`` count in ``memory.oom_control``) and v2 (``memory.max``, ``memory.peak``, the
``oom_kill`` count in ``memory.events``; where the memory controller is available but not enabled
for the harness's group, it is enabled down the ancestors first, :func:`enable_memory_controller`).
The group is created *inside* the harness's own cgroup, so the cap nests in whatever limit the
harness already runs under. Page cache is charged to the group that faulted it in, so a memory-
mapped reader under the cap keeps at most ``cap`` of file pages resident, which is exactly the
condition being benchmarked.

:func:`open_cap` returns a :class:`MemoryCap`, or an :class:`Uncapped`
that says why not (not root, no memory controller, a write refused). Nothing here raises for an
unusable cgroup: the suite runs uncapped and records it.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .._units import format_bytes

CGROUP_ROOT = Path("/sys/fs/cgroup")
_names = itertools.count()


@dataclass(frozen=True, slots=True)
class Uncapped:
    reason: str
    limit_bytes: None = None

    def describe(self) -> str:
        return f"uncapped ({self.reason})"


class MemoryCap:
    """One cgroup with a memory limit; ``attach`` runs in the child between fork and exec."""

    def __init__(self, path: Path, version: int, limit_bytes: int) -> None:
        self.path, self.version, self.limit_bytes = path, version, limit_bytes

    def describe(self) -> str:
        return f"cgroup v{self.version} {format_bytes(self.limit_bytes)}"

    def attach(self) -> None:
        """Move the calling process into the group (used as ``preexec_fn``: the child's own pid)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak_bytes(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            lines = (self.path / name).read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Remove the (empty) group; retried briefly while the kernel finishes reaping the child."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        self.path.rmdir()  # the last try raises with the cause


def open_cap(limit_bytes: int | None, *, root: Path = CGROUP_ROOT) -> MemoryCap | Uncapped:
    """Create a fresh cgroup limited to ``limit_bytes`` (None: no cap asked for)."""
    if limit_bytes is None:
        return Uncapped("no cap requested")
    if os.geteuid() != 0:
        return Uncapped("not root: cannot create a cgroup")
    why: list[str] = []
    parent, version = _own_memory_cgroup(root, why)
    if parent is None:
        return Uncapped(why[0] if why else "no cgroup memory controller found")
    path = parent / f"outre-bench-{os.getpid()}-{next(_names)}"
    try:
        path.mkdir()
    except OSError as exc:
        return Uncapped(f"cannot create {path}: {exc.strerror}")
    try:
        name = "memory.limit_in_bytes" if version == 1 else "memory.max"
        (path / name).write_text(str(limit_bytes))
        if version == 2:
            _write_if_present(path / "memory.swap.max", "0")
    except OSError as exc:
        path.rmdir()
        return Uncapped(f"cannot set the limit in {path}: {exc.strerror}")
    return MemoryCap(path, version, limit_bytes)


def _own_memory_cgroup(root: Path, why: list[str] | None = None) -> tuple[Path | None, int]:
    """The directory of this process's memory cgroup and the cgroup version (``why``: gets the
    reason when a v2 group's memory controller could not be enabled)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, 0
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(",") and (root / "memory").is_dir():
            return root / "memory" / rel.lstrip("/"), 1
    for line in lines:
        if line.startswith("0::") and (root / "cgroup.controllers").is_file():
            parent = root / line[3:].lstrip("/")
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            reason = enable_memory_controller(root, parent) if "memory" not in enabled else None
            if reason is not None:
                if why is not None:
                    why.append(f"cgroup v2 memory controller not enabled: {reason}")
                return None, 2
            return parent, 2
    return None, 0


def enable_memory_controller(root: Path, group: Path) -> str | None:
    """cgroup v2: enable the memory controller for the children of ``group`` by writing ``+memory``
    into ``cgroup.subtree_control`` of the root and of every group down to ``group`` (a controller
    reaches a group only when each ancestor enables it for its children).  Root may do this; a
    machine can have the controller available but enabled nowhere (a lent GPU box did), and the bench
    would then run uncapped there (``tests/bench/test_cgroup_v2.py``).  Returns None when enabled,
    else why not (the caller runs uncapped and says so).

    A group that holds processes itself cannot enable controllers for its children (cgroup v2's
    "no internal processes" rule, EBUSY), except the root: the harness then stays uncapped rather
    than moving processes it does not own."""
    chain = [root] + [root.joinpath(*group.relative_to(root).parts[:i + 1])
                      for i in range(len(group.relative_to(root).parts))]
    for node in chain:
        try:
            available = (node / "cgroup.controllers").read_text().split()
            enabled = (node / "cgroup.subtree_control").read_text().split()
        except OSError as exc:
            return f"cannot read {node}: {exc.strerror}"
        if "memory" not in available:
            return f"the memory controller is not available in {node}"
        if "memory" in enabled:
            continue
        try:
            (node / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:
            return f"cannot enable the memory controller in {node / 'cgroup.subtree_control'}: {exc.strerror}"
    return None


def _write_if_present(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)
