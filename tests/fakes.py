"""Test doubles shared by the test packages (import with ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import asyncio
import random

import numpy as np

import outre_async as oa


class FaultySource(oa.FeatureSource):
    """A memory source with seeded delays that fails reads touching chosen nodes (``fail_on`` may be
    changed between epochs).  It is what ``OutreLoader(..., source=...)`` is for: a test's own source."""

    backend = "faulty-memory"

    def __init__(self, ds: oa.Dataset, fail_on: set[int] | frozenset[int] = frozenset(), seed: int = 0) -> None:
        super().__init__(ds.num_nodes, ds.feature_dim, ds.feature_dtype)
        self.ds, self.fail_on, self.rng = ds, set(fail_on), random.Random(seed)
        self.closed = False

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(self.rng.random() * 3e-3)
        bad = self.fail_on.intersection(ids.tolist())
        if bad:
            raise oa.ExtractorError("injected EIO", path=self.ds.features_path,
                                    offset=min(bad) * self.ds.row_layout.stride, errno=5)
        out[:] = self.ds.features[ids]

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()
