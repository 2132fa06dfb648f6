"""Collecting what crashed writers left behind: our temp folders whose writer is dead.

Every writer calls :func:`open_temp_dir`, which first collects the litter in the parent it is about to
write into ("the next writer into the same parent"); ``outre clean DIR`` calls :func:`collect_litter`
on request and prints what it did.  Only entries whose name matches ``_tempdir``'s pattern are looked
at, only real directories (never a symlink, never a file) are touched, and only when
:func:`~._tempdir.writer_is_dead` is sure.  An ``old`` folder (the previous copy of a dataset during a
two-rename replace that was cut between its renames) is renamed back when its target name is free,
since then it is the only copy; otherwise it is removed like the rest.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._tempdir import Kind, TempDir, parse_temp_name, writer_is_dead

Action = Literal["removed", "restored", "kept", "failed"]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Litter:
    """One temp folder of ours found in a parent, and what was done with it."""

    path: Path
    kind: Kind
    pid: int
    action: Action
    bytes: int  # apparent size of the files inside
    detail: str  # why kept or failed; the restored name

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "kind": self.kind, "pid": self.pid, "action": self.action,
                "bytes": self.bytes, "detail": self.detail}


def open_temp_dir(parent: Path, stem: str, kind: Kind) -> TempDir:
    """Collect the litter in ``parent`` (created if missing), then make a locked temp folder there."""
    parent.mkdir(parents=True, exist_ok=True)
    collect_litter(parent)
    return TempDir(parent, stem, kind)


def collect_litter(parent: Path, *, dry_run: bool = False) -> list[Litter]:
    """Remove (or, for an interrupted replace, restore) every temp folder of ours in ``parent`` whose
    writer is dead; report those still alive as ``kept``.  With ``dry_run`` nothing changes and the
    report says what would happen."""
    try:
        with os.scandir(parent) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:  # missing, not a folder, not listable: nothing of ours to collect there
        return []
    found = []
    for entry in entries:
        name = parse_temp_name(entry.name)
        if name is None or not _is_real_dir(entry):
            continue
        path = Path(entry.path)
        size = _tree_bytes(path)
        if not writer_is_dead(path, name):
            found.append(Litter(path, name.kind, name.pid, "kept", size, "its writer may still be running"))
            continue
        target = parent / name.stem
        action: Action = "restored" if name.kind == "old" and not os.path.lexists(target) else "removed"
        detail = str(target) if action == "restored" else ""
        if not dry_run:
            action, detail = _collect(path, target, action, detail)
        found.append(Litter(path, name.kind, name.pid, action, size, detail))
    return found


def _collect(path: Path, target: Path, action: Action, detail: str) -> tuple[Action, str]:
    try:
        if action == "restored":
            os.rename(path, target)
        else:
            shutil.rmtree(path)
    except OSError as exc:
        return "failed", f"{type(exc).__name__}: {exc.strerror or exc}"
    log.info("%s %s%s", action, path, f" as {detail}" if detail else "")
    return action, detail


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:  # gone meanwhile (another collector)
        return False


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for file in files:
            try:
                st = os.lstat(os.path.join(root, file))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total
