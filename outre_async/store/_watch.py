"""Noticing that a dataset's files changed under a live reader: a fingerprint per file, compared again.

A loader reads ``features.bin`` (and a memory-mapped ``indices``) for as long as it runs.  A file
rewritten in place meanwhile would otherwise give batches of old and new bytes mixed, with no word.
So :class:`~outre_async.store.Dataset` records a :class:`Fingerprint` of each of its files when it is
opened, and a :class:`FileWatch` compares the files the loader reads with those fingerprints: at
every epoch's start, and during the epoch before a batch is handed over, at most once every
``interval_s`` (:data:`WATCH_INTERVAL_S`; ``benchmarks/bench_file_watch.py`` measures one check).
A difference is a :class:`DatasetChangedError` naming the file and what changed.

What a fingerprint sees: the path's device and inode (a file replaced by a rename, or deleted), its
size (truncated, extended) and its ``mtime``/``ctime`` in nanoseconds (written in place at the same
size, ``utime`` set back: ``ctime`` cannot be set from user space).  What it cannot see: a write that
moves neither time, i.e. one landing within the file system's timestamp granularity (a kernel clock
tick, ~4 ms, or a few seconds on some file systems) of the fingerprint's own times; writes through a
shared ``mmap`` to a page that was already dirty (the kernel updates ``mtime`` on the first write
fault only); writes by another machine to a network file system before its attributes refresh.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatasetChangedError

WATCH_INTERVAL_S = 0.01  # at most one check per 10 ms during an epoch: a stat per file, a small share of a core
                         # (benchmarks/bench_file_watch.py)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What ``stat`` says about a file that a rewrite, a replacement or a truncation changes."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> Fingerprint | None:
        """The fingerprint of ``path`` now (following links, as the reader's ``open`` does); None if
        there is no file."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def change_to(self, now: Fingerprint | None) -> str:
        """What differs from ``now``, in words ('' when nothing does)."""
        if now is None:
            return "it was removed"
        if (now.dev, now.ino) != (self.dev, self.ino):
            return "it was replaced by another file (a new inode)"
        if now.size != self.size:
            return f"its size went from {self.size} to {now.size} bytes"
        if now.mtime_ns != self.mtime_ns:
            return "it was written in place (its mtime moved)"
        if now.ctime_ns != self.ctime_ns:
            return "it was changed in place (its ctime moved)"
        return ""


class FileWatch:
    """The files a reader depends on and their fingerprints when the dataset was opened.

    :meth:`check` stats each file (cheap, no read); :meth:`check_due` does so only when
    ``interval_s`` has passed since the last check, for calls on a hot path."""

    def __init__(self, files: Mapping[Path, Fingerprint | None], *, interval_s: float = WATCH_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.files = dict(files)
        self.interval_s = interval_s
        self.checks = 0
        self._clock = clock
        self._last = clock()

    def check(self) -> None:
        """Raise :class:`DatasetChangedError` if a watched file differs from its fingerprint."""
        self.checks += 1
        self._last = self._clock()
        for path, then in self.files.items():
            now = Fingerprint.of(path)
            if now == then:
                continue
            what = "it appeared" if then is None else then.change_to(now)
            raise DatasetChangedError(
                f"{path} changed while a loader was reading it ({what}); batches from here on could mix old and "
                "new bytes, so this epoch stops: open the dataset again and make a new loader (and do not "
                "rewrite a dataset's files while a loader uses it)", path=path)

    def check_due(self) -> None:
        """:meth:`check`, if at least ``interval_s`` has passed since the last one."""
        if self._clock() - self._last >= self.interval_s:
            self.check()

    def stats(self) -> dict[str, int]:
        return {"files": len(self.files), "checks": self.checks}
