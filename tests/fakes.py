"""Stand-ins that tests put where a real stage, source or plug-in would be: seeded random delays make
concurrency deterministic (torchdata's ``RandomSleepUdf``) and chosen nodes or files fail on purpose.

- :class:`ArraySource`, :class:`FaultySource`: in-memory :class:`~outre_async.FeatureSource` subclasses
  with seeded delays that fail reads touching chosen nodes; ``FaultySource`` is what
  ``OutreLoader(..., io=IOOptions(source=...))`` is for.
- :class:`DelayedSampler`: a sampler wrapper that sleeps a seeded random time in the worker thread.
- :class:`UnreadablePreadSource` / :func:`unreadable_source`: disk sources whose reads fail for real: the
  feature file is opened write-only, so the kernel answers every read with EBADF through the product's
  own error path (``os.preadv`` raising in a pread worker, a negative CQE result on io_uring).
  ``heal()`` puts a readable descriptor on the same fd number (``dup2``), so a test can check that the
  source still works after failed reads.  No hook in the product: the doubles override how the file
  is opened, nothing else.
- :class:`RaisingSystem`: a bench plug-in that fails on purpose.

Kept free of pytest so that an ``outre bench`` child process can import :class:`RaisingSystem` as a
plug-in (``fakes:RaisingSystem`` with this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import numpy as np

import outre_async as oa
from outre_async.bench import System
from outre_async.features import PreadSource
from outre_async.features._disk_source import _DiskSource


class ArraySource(oa.FeatureSource):
    """Reads rows of ``features`` after a seeded random delay; fails reads touching ``fail_on``."""

    backend = "array"

    def __init__(self, features: np.ndarray, seed: int = 0, fail_on: set[int] | None = None) -> None:
        super().__init__(*features.shape, features.dtype)
        self.features = features
        self.rng = random.Random(seed)
        self.fail_on = fail_on or set()
        self.rows_read: list[int] = []

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(self.rng.random() * 2e-3)
        if self.fail_on.intersection(ids.tolist()):
            raise OSError("injected read failure")
        self.rows_read += ids.tolist()
        out[:] = self.features[ids]


class FaultySource(oa.FeatureSource):
    """A memory source with seeded delays that fails reads touching chosen nodes (``fail_on`` may be
    changed between epochs)."""

    backend = "faulty-memory"

    def __init__(self, ds: oa.Dataset, fail_on: set[int] | frozenset[int] = frozenset(), seed: int = 0) -> None:
        super().__init__(ds.num_nodes, ds.feature_dim, ds.feature_dtype)
        self.ds, self.fail_on, self.rng = ds, set(fail_on), random.Random(seed)
        self.closed = False

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(self.rng.random() * 3e-3)
        bad = self.fail_on.intersection(ids.tolist())
        if bad:
            raise oa.errors.ExtractorError("injected EIO", path=self.ds.features_path,
                                    offset=min(bad) * self.ds.row_layout.stride, errno=5)
        out[:] = self.ds.features[ids]

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


class DelayedSampler:
    """Wraps a sampler with a seeded random sleep in the worker thread (deterministic chaos)."""

    def __init__(self, inner: Any, seed: int) -> None:
        self.inner, self.rng = inner, random.Random(seed)

    def sample(self, seeds: np.ndarray, stream: int, *prune: Any) -> Any:
        time.sleep(self.rng.random() * 3e-3)
        return self.inner.sample(seeds, stream, *prune)

    def sample_nodes(self, seeds: np.ndarray, stream: int) -> np.ndarray:  # the loader's foresight
        time.sleep(self.rng.random() * 3e-3)
        return self.inner.sample_nodes(seeds, stream)


def _open_write_only(src: _DiskSource) -> tuple[int, bool, int]:
    return os.open(src.file.path, os.O_WRONLY | os.O_CLOEXEC), False, 512


def _heal(src: _DiskSource) -> None:
    fd = os.open(src.file.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.dup2(fd, src._fd)
    finally:
        os.close(fd)


class UnreadablePreadSource(PreadSource):
    """A pread source whose every read fails with EBADF until :meth:`heal`."""

    _open_file = _open_write_only
    heal = _heal


def unreadable_source(dataset: oa.Dataset, backend: str, **opts: Any) -> _DiskSource:
    """An ``io_uring`` or ``pread`` source over ``dataset`` whose reads fail with EBADF until
    ``heal()``; ``opts`` are ``IOConfig`` fields."""
    if backend == "pread":
        return UnreadablePreadSource(dataset, **opts)
    from outre_async.features._uring_source import UringSource  # needs liburing

    class UnreadableUringSource(UringSource):
        _open_file = _open_write_only
        heal = _heal

    return UnreadableUringSource(dataset, **opts)


class RaisingSystem(System):
    """A bench plug-in that fails on purpose: the harness must record the failure, not crash."""

    name = "raises"
    summary = "a plug-in that fails on purpose"

    def open(self, ds: Any, spec: Any) -> Any:
        raise RuntimeError("plug-in failure on purpose")
