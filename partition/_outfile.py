"""One output file of the partition writer, written with a bounded amount of dirty page cache.

:class:`OutFile` writes arrays at item offsets (``pwrite``, looped over short writes) or appends
them.  Every ``sync_bytes`` written it calls ``fdatasync`` on the file.  Why: a memory cap (a cgroup's
limit) counts the page cache, and dirty pages can only be reclaimed after writeback, which reclaim
inside a cgroup v1 does not start; a large output written through the cache alone can get the
writer OOM-killed.  Here at most ``sync_bytes`` of the file are dirty at any time, and after each
sync its pages are dropped (``POSIX_FADV_DONTNEED``), so nothing of it stays cached.  A later write
into part of a dropped page makes the kernel read that page back first: writers that write pages in
parts (``_buckets``) align their writes to pages.

:meth:`OutFile.close` returns the file's ``meta.json`` entry; its CRC-32 is computed while the file
is written in order, and by reading it back (in blocks) when it was written out of order.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

SYNC_BYTES = 16 << 20
_READ_BLOCK = 8 << 20


class OutFile:
    """A new file of ``dtype`` items (truncated if it exists); use as a context manager."""

    def __init__(self, path: Path, dtype: Any, *, sync_bytes: int = SYNC_BYTES) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.sync_bytes = max(int(sync_bytes), 1)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._items = 0          # size in items (the end of the furthest write)
        self._unsynced = 0
        self._crc: int | None = 0  # None once a write went anywhere but the end

    def append(self, array: np.ndarray) -> None:
        self.pwrite(array, self._items)

    def pwrite(self, array: np.ndarray, item: int) -> None:
        """Write ``array`` (converted to the file's dtype) starting at item offset ``item``."""
        data = np.ascontiguousarray(array, dtype=self.dtype)
        view = data.data.cast("B")  # the array's own memoryview (ndarray.data): typed, unlike memoryview(ndarray)
        if self._crc is not None:
            self._crc = zlib.crc32(view, self._crc) if item == self._items else None
        offset, done = int(item) * self.dtype.itemsize, 0
        while done < len(view):
            done += os.pwrite(self._fd, view[done:], offset + done)
        self._items = max(self._items, int(item) + len(data))
        self._unsynced += len(view)
        if self._unsynced >= self.sync_bytes:
            self._sync()

    def close(self, *, checksum: bool = True) -> dict[str, Any]:
        """Sync, close, and return the ``meta.json`` entry (``crc32`` None unless ``checksum``)."""
        if self._fd < 0:
            raise ValueError(f"{self.path} is already closed")
        self._sync()
        os.close(self._fd)
        self._fd = -1
        crc = None
        if checksum:
            crc = self._crc if self._crc is not None else file_crc32(self.path)
        return {"file": self.path.name, "dtype": str(self.dtype), "shape": [self._items],
                "nbytes": self._items * self.dtype.itemsize, "crc32": crc}

    def _sync(self) -> None:
        os.fdatasync(self._fd)
        _drop_cache(self._fd)
        self._unsynced = 0

    def __enter__(self) -> OutFile:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def file_crc32(path: Path) -> int:
    """CRC-32 of a file, read in fixed-size blocks (its pages dropped from the cache again)."""
    crc = 0
    buf = bytearray(_READ_BLOCK)
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while got := os.preadv(fd, [buf], offset):
            crc = zlib.crc32(memoryview(buf)[:got], crc)
            offset += got
        _drop_cache(fd)
    finally:
        os.close(fd)
    return crc


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
