"""Atomic install of a finished directory: fsync it, rename it into place, fsync the parent.

Both the dataset writer and the partitioner write everything into a hidden temporary directory
beside the target first; this is the one place that turns it into the real thing, so a crash at any
moment leaves either the old directory or the new one, never a half-written folder that opens.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path


def install_directory(tmp: Path, path: Path, *, overwrite: bool, exists: Exception) -> None:
    """Rename the finished ``tmp`` directory to ``path`` (replacing it when ``overwrite``, else
    raising ``exists``).  ``tmp`` is fsynced first so that its entries are durable before the
    rename publishes them, and the parent after so that the rename itself survives a crash."""
    _fsync_dir(tmp)
    if path.exists():
        if not overwrite:
            raise exists
        old = path.parent / f".{path.name}.old-{secrets.token_hex(4)}"
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
