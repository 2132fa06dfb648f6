"""The small files of a project made hostile (issue 27): a FIFO, a device, a folder, a 64 GiB sparse
file or pathological JSON in place of a manifest, a partition meta or array, a profile meta or array,
or a checkpoint.

:func:`make_project` writes one healthy project (``make_base``'s dataset with partitions ``p4``, a
profile ``default``, a checkpoint ``run/last.pt``); every :class:`Hostile` replaces one of its files
in a fresh copy (:func:`materialize`) and names the reader that must refuse it (``trust_calls``), run
in a forked child by ``runner.py`` (verb ``call``) with an alarm, so that a hang is that case's
failure.  Kept free of pytest: ``benchmarks/trust_sweep.py`` imports it too.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from damage import PART, make_base

PROFILE = "default"
SPARSE_BYTES = 64 << 30
# where each small file lives in the project, and the reader (a trust_calls function) that opens it
FILES = {
    "manifest": ("ds/manifest.json", "open_dataset"),
    "part.meta": (f"ds/partitions/{PART}/meta.json", "open_partitions"),
    "part.part_ptr": (f"ds/partitions/{PART}/part_ptr.bin", "open_partitions"),
    "part.adj_indices": (f"ds/partitions/{PART}/adj_indices.bin", "open_partitions"),
    "profile.meta": (f"ds/profile/{PROFILE}/meta.json", "read_profile"),
    "profile.static_rows": (f"ds/profile/{PROFILE}/static_rows.bin", "read_profile"),
    "profile.row_hot": (f"ds/profile/{PROFILE}/row_hot.bin", "read_profile"),
    "checkpoint": ("run/last.pt", "load_checkpoint"),
}
JSON_FILES = ("manifest", "part.meta", "profile.meta")


@dataclass(frozen=True)
class Hostile:
    """One hostile file: ``how`` (``fifo``, ``dev-zero``, ``dir``, ``sparse-64G``, ``deep-json``,
    ``huge-int``) applied to the file ``FILES[file]``."""

    cls: str  # the class: "non-regular", "size-before-read", "json"
    file: str
    how: str

    @property
    def id(self) -> str:
        return f"{self.cls}:{self.file}-{self.how}"


def all_hostile() -> list[Hostile]:
    out = [Hostile("non-regular", f, "fifo") for f in FILES]
    out += [Hostile("non-regular", f, "dir") for f in ("part.meta", "profile.static_rows", "checkpoint")]
    out += [Hostile("size-before-read", f, "dev-zero") for f in (*JSON_FILES, "checkpoint")]
    out += [Hostile("size-before-read", f, "sparse-64G") for f in FILES if f != "part.adj_indices"]
    out += [Hostile("json", f, how) for f in JSON_FILES for how in ("deep-json", "deep-json-inside", "huge-int")]
    return out


def make_project(root: Path) -> Path:
    """``root/project``: ``ds`` (a small dataset with partitions ``p4`` and a profile) and ``run/last.pt``."""
    import torch

    import outre_async as oa
    from outre_async.plan import MissCosts
    from outre_async.trainer._files import save_checkpoint

    project = root / "project"
    project.mkdir()
    ds = make_base(root / "b")
    shutil.move(ds, project / "ds")
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed")
    oa.profile(project / "ds", fanouts=[4, 4], batch_size=64, memory_budget="4MiB", name=PROFILE, costs=costs,
               io=oa.IOOptions(backend="memory"))
    (project / "run").mkdir()
    save_checkpoint(project / "run" / "last.pt", {
        "model": {"w": torch.zeros(3)}, "optimizer": {}, "epoch": 1, "config": {}, "metrics": [], "best": {},
        "torch_rng": torch.get_rng_state(), "dataset": {}})
    return project


def materialize(project: Path, hostile: Hostile, work: Path) -> Path:
    """A copy of ``project`` under ``work`` with ``hostile`` applied; returns the copy."""
    copy = work / "project"
    shutil.copytree(project, copy, symlinks=True)
    target = copy / FILES[hostile.file][0]
    _APPLY[hostile.how](target)
    return copy


def call_for(hostile: Hostile, copy: Path) -> tuple[str, list[Any]]:
    """The reader and its arguments that must refuse ``hostile`` in ``copy``."""
    fn = FILES[hostile.file][1]
    args: dict[str, list[Any]] = {"open_dataset": [str(copy / "ds")], "open_partitions": [str(copy / "ds"), PART],
                                  "read_profile": [str(copy / "ds"), PROFILE],
                                  "load_checkpoint": [str(copy / "run" / "last.pt")]}
    return f"trust_calls:{fn}", args[fn]


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _dev_zero(p: Path) -> None:
    p.unlink()
    p.symlink_to("/dev/zero")


def _dir(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _sparse(p: Path) -> None:
    os.truncate(p, SPARSE_BYTES)


def _deep(p: Path) -> None:
    p.write_text("[" * 200_000 + "]" * 200_000)


def _deep_inside(p: Path) -> None:
    """A valid document of its kind whose one extra key nests 100,000 levels deep."""
    doc = json.loads(p.read_text())
    text = json.dumps(doc)
    p.write_text(text[:-1] + ', "extra": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _huge_int(p: Path) -> None:
    """A valid document of its kind with a 5,000-digit count (Python's int limit is 4,300 digits)."""
    doc = json.loads(p.read_text())
    key = "num_nodes" if "num_nodes" in doc else "num_parts" if "num_parts" in doc else "name"
    doc[key] = 0
    p.write_text(json.dumps(doc).replace(f'"{key}": 0', f'"{key}": 1' + "0" * 5000))


_APPLY: dict[str, Callable[[Path], None]] = {"fifo": _fifo, "dev-zero": _dev_zero, "dir": _dir, "sparse-64G": _sparse,
                                             "deep-json": _deep, "deep-json-inside": _deep_inside,
                                             "huge-int": _huge_int}
