"""``renameat2(2)`` through ctypes: the two renames Python's ``os`` lacks.

``RENAME_NOREPLACE`` publishes a directory only if nothing holds its name (a plain ``rename`` would
silently replace an empty directory), and ``RENAME_EXCHANGE`` swaps two names in one step, so a
replaced dataset is never missing, not even for an instant.  Linux has both since 3.15 (ext4, xfs,
btrfs, tmpfs; overlayfs since 4.x), glibc wraps them since 2.28.  Where the C library has no
``renameat2`` or the kernel or filesystem refuses the flag (``ENOSYS``, ``EINVAL``), the functions
return ``False`` and the caller takes its documented fallback (``_install``).
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import Any

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_UNSUPPORTED = (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)


def _load() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):  # no C library symbol: musl < 1.2.5, glibc < 2.28
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


_renameat2 = _load()


def _call(src: Path, dst: Path, flags: int) -> bool:
    """True when renamed; False when renameat2 with ``flags`` is not available here; raises OSError
    (with the errno and both paths) for every other failure."""
    if _renameat2 is None:
        return False
    if _renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (``FileExistsError`` then); False when the
    kernel or filesystem cannot do it atomically."""
    return _call(src, dst, RENAME_NOREPLACE)


def rename_exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` atomically (both must exist); False when not available."""
    return _call(a, b, RENAME_EXCHANGE)
