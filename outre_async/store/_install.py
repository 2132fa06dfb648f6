"""Atomic install of a finished directory: fsync it, rename it into place, fsync the parent.

Both the dataset writer and the partitioner write everything into a hidden temporary directory
beside the target first (``_tempdir``); this is the one place that turns it into the real thing, so a
crash at any moment leaves either the old directory or the new one, never a half-written folder
that opens.

* A new name is published with ``renameat2(RENAME_NOREPLACE)``: if anything took the name meanwhile
  (even an empty folder, which a plain ``rename`` would silently replace) the writer's ``exists``
  error is raised and the finished folder stays where it was.
* A replaced folder (``overwrite``; the caller has checked with ``_overwrite`` that it is ours) is
  swapped in one step with ``renameat2(RENAME_EXCHANGE)``: the path names the old folder, then the
  new one, and is never missing.  The old content, now under the temp name, is deleted afterwards.

Fallback where the C library, kernel or filesystem lacks ``renameat2`` (Linux < 3.15, glibc < 2.28,
some network filesystems): an existence check then ``rename`` for a new name (an empty folder made
at that name in between is replaced), and two renames for a replace: the old folder moves aside to
``.{name}.outre-old-{host}-{pid}-{token}``, the new one moves in, the old one is deleted.  Between
the two renames the path is missing (a reader opening it then gets ``DatasetNotFoundError``); a
crash there leaves the old copy under its ``old`` name, and the next writer into that parent (or
``outre clean``) renames it back, since the path is still free.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ._rename import rename_exchange, rename_noreplace
from ._tempdir import temp_name


def install_directory(tmp: Path, path: Path, *, overwrite: bool, exists: Exception) -> None:
    """Rename the finished ``tmp`` directory to ``path``: replacing what is there when ``overwrite``,
    else raising ``exists`` if the name is taken.  ``tmp`` is fsynced first so that its entries are
    durable before the rename publishes them, and the parent after so that the rename itself
    survives a crash."""
    fsync_path(tmp)
    if overwrite and os.path.lexists(path):
        _replace(tmp, path)
    else:
        _publish(tmp, path, exists)
    fsync_path(path.parent)


def _publish(tmp: Path, path: Path, exists: Exception) -> None:
    try:
        if rename_noreplace(tmp, path):
            return
    except FileExistsError:
        raise exists from None
    if os.path.lexists(path):  # fallback: check, then rename (see the module docstring)
        raise exists
    os.rename(tmp, path)


def _replace(tmp: Path, path: Path) -> None:
    if rename_exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # the old content, under the temp name
        return
    replace_by_two_renames(tmp, path)


def replace_by_two_renames(tmp: Path, path: Path) -> None:
    """The fallback replace: ``path`` is missing between the two renames (module docstring)."""
    old = path.parent / temp_name(path.name, "old")
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def fsync_path(path: Path) -> None:
    """fsync a file or a folder by path (a folder: its entries, so a rename into it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
