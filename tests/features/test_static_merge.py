"""The static cache's in-place merge (``_static_kernels.merge_static_rows``) against plain numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from outre_async.features._static_kernels import merge_static_rows


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_merge_in_place_equals_the_plain_merge(hit_mask: list[bool], dim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = len(hit_mask)
    hit = np.array(hit_mask, dtype=bool)
    rows = rng.random((8, dim), dtype=np.float32)
    slots = np.where(hit, rng.integers(0, 8, n), -1).astype(np.int32)
    missed = rng.random((int((~hit).sum()), dim), dtype=np.float32)
    expected = np.empty((n, dim), np.float32)
    expected[hit] = rows[slots[hit]]
    expected[~hit] = missed
    out = rng.random((n, dim), dtype=np.float32)  # garbage after the prefix, as a fresh matrix holds
    out[: len(missed)] = missed
    merge_static_rows(out, slots, rows)
    np.testing.assert_array_equal(out, expected)
