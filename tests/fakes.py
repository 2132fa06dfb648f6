"""Stand-ins that tests put where a real stage, source or plug-in would be: seeded random delays make
concurrency deterministic (torchdata's ``RandomSleepUdf``) and chosen nodes fail on purpose.

Kept free of pytest so that a ``outre bench`` child process can import :class:`RaisingSystem` as a
plug-in (``fakes:RaisingSystem`` with this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import numpy as np

import outre_async as oa
from outre_async.bench import System


class ArraySource:
    """Reads rows of ``features`` after a seeded random delay; fails reads touching ``fail_on``."""

    def __init__(self, features: np.ndarray, seed: int = 0, fail_on: set[int] | None = None) -> None:
        self.features = features
        self.rng = random.Random(seed)
        self.fail_on = fail_on or set()
        self.rows_read: list[int] = []

    async def read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(self.rng.random() * 2e-3)
        if self.fail_on.intersection(ids.tolist()):
            raise OSError("injected read failure")
        self.rows_read += ids.tolist()
        out[:] = self.features[ids]


class DelayedSampler:
    """Wraps a sampler with a seeded random sleep in the worker thread (deterministic chaos)."""

    def __init__(self, inner: Any, seed: int) -> None:
        self.inner, self.rng = inner, random.Random(seed)

    def sample(self, seeds: np.ndarray, stream: int) -> Any:
        time.sleep(self.rng.random() * 3e-3)
        return self.inner.sample(seeds, stream)


class FaultySource:
    """A memory source with seeded delays that fails reads touching chosen nodes."""

    def __init__(self, ds: oa.Dataset, fail_on: set[int] = frozenset(), seed: int = 0) -> None:
        self.backend = "faulty-memory"
        self.ds, self.fail_on, self.rng = ds, set(fail_on), random.Random(seed)
        self.closed = False

    async def read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(self.rng.random() * 3e-3)
        bad = self.fail_on.intersection(ids.tolist())
        if bad:
            raise oa.ExtractorError("injected EIO", path=self.ds.features_path,
                                    offset=min(bad) * self.ds.row_layout.stride, errno=5)
        out[:] = self.ds.features[ids]

    def stats(self) -> dict:
        return {}

    async def aclose(self) -> None:
        self.closed = True


class RaisingSystem(System):
    """A bench plug-in that fails on purpose: the harness must record the failure, not crash."""

    name = "raises"
    summary = "a plug-in that fails on purpose"

    def open(self, ds: Any, spec: Any) -> Any:
        raise RuntimeError("plug-in failure on purpose")
