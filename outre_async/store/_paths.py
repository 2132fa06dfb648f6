"""Files named by a manifest or a partition meta stay inside their folder (``tarfile``'s ``"data"``
filter is the model): a name is a plain file name, never a path, and a symlink may point elsewhere
inside the folder but never out of it.

:func:`confined` is the one check, used by the dataset reader and the partition reader; the caller
passes the error class its own tree uses (:class:`DatasetCorruptError`, :class:`PartitionCorruptError`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import OutreError


def plain_name(name: Any) -> str | None:
    """``name`` if it is a plain file name (a non-empty str, no separator, not ``.``/``..``, no NUL),
    else None."""
    if not isinstance(name, str) or not name or name in (".", "..") or "\x00" in name:
        return None
    if "/" in name or "\\" in name or os.sep in name:
        return None
    return name


def confined(root: Path, name: Any, error: type[OutreError], what: str) -> Path:
    """``root / name`` after checking that ``name`` is a plain file name and that it resolves
    (symlinks followed) to a place inside ``root``; raises ``error`` naming ``what`` otherwise."""
    plain = plain_name(name)
    if plain is None:
        raise error(f"{root}: {what} names {name!r}, which is not a plain file name inside the folder "
                    "(absolute paths, '..' and separators are refused); re-create it")
    path = root / plain
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise error(f"{root}: {what} file {plain!r} resolves to {real}, outside the folder "
                    "(a symlink leaving it is refused); re-create it")
    return path
