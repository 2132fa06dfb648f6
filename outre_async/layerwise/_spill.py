"""One layer's output for every node, spilled to a temporary feature file and read back like features.

The next layer reads rows of this file at random (the sources of each chunk), exactly as the loader
reads ``features.bin``: through a :class:`FeatureSource` (io_uring, pread or memory), so layer-wise
inference costs no more RAM than one chunk whatever the graph's size.  Rows are float32, packed
(stride = 4 dim), written in place with ``pwrite`` at their offsets (chunks cover consecutive nodes);
the file is pre-sized, so a short write is an error, never a hole.  The folder holding the files is
one of our pid-tagged temp folders (``store/_tempdir``): removed on success, error and cancel, and
collected by ``outre clean`` (or the next writer) after a ``kill -9``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..features._backends import Backend, detect_io_uring
from ..features._disk_source import FeatureFile, IOConfig
from ..features._memory_source import MemorySource
from ..features._pread_source import PreadSource
from ..features._source import FeatureSource
from ..store._row_format import RowFormat


class SpillFile:
    """A ``[num_rows, dim]`` float32 file being written chunk by chunk."""

    def __init__(self, path: Path, num_rows: int, dim: int) -> None:
        self.file = FeatureFile.packed(path, num_rows, RowFormat.float32(dim))
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(self._fd, self.file.nbytes)
        except BaseException:
            os.close(self._fd)
            raise

    def write(self, start: int, rows: np.ndarray) -> None:
        """Rows ``start .. start + len(rows)`` (float32 ``[k, dim]``)."""
        data = memoryview(np.ascontiguousarray(rows, dtype=np.float32)).cast("B")  # type: ignore[arg-type]  # an ndarray is a buffer
        offset, done = start * self.file.stride, 0
        while done < len(data):
            done += os.pwrite(self._fd, data[done:], offset + done)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_file_source(file: FeatureFile, backend: Backend) -> FeatureSource:
    """A feature source over ``file``, chosen like :func:`outre_async.features.open_source`."""
    if backend == "memory":
        raw = np.fromfile(file.path, dtype=np.float32, count=file.num_rows * file.dim)
        return MemorySource(raw.reshape(file.num_rows, file.dim))
    if backend == "auto":
        backend = "io_uring" if detect_io_uring() else "pread"
    if backend == "pread":
        return PreadSource(file, IOConfig())
    if backend == "io_uring":
        if not detect_io_uring():
            raise ConfigError("backend='io_uring' but io_uring is unavailable here; use 'auto' or 'pread'")
        from ..features._uring_source import UringSource

        return UringSource(file, IOConfig())
    raise ConfigError(f"backend must be one of auto, io_uring, pread, memory; got {backend!r}")
