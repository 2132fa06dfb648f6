"""The window plan's compiled loop (``_window_kernels.nearest_present``) against a brute-force
reference: per row, the smallest ``present`` of the other rows at most ``near`` ids away."""

from __future__ import annotations

import numpy as np
import pytest

from outre_async.features._window_kernels import nearest_present


def reference(ids: np.ndarray, present: np.ndarray, near: int, last: int) -> np.ndarray:
    out = np.full(len(ids), last, np.int64)
    for i in range(len(ids)):
        close = (np.abs(ids - ids[i]) <= near) & (np.arange(len(ids)) != i)
        if close.any():
            out[i] = min(last, int(present[close].min()))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_each_row_gets_the_smallest_prefix_of_its_neighbours_within_near(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(0, int(rng.integers(1, 400)), size=int(rng.integers(0, 120)))).astype(np.int64)
    last = int(rng.integers(1, 14))
    present = rng.integers(0, last + 1, size=len(ids)).astype(np.int64)
    near = int(rng.integers(1, 12))
    assert np.array_equal(nearest_present(ids, present, near, last), reference(ids, present, near, last))


def test_rows_farther_apart_than_near_get_last() -> None:
    ids = np.array([0, 10, 20], np.int64)
    assert nearest_present(ids, np.array([1, 2, 3], np.int64), 9, 7).tolist() == [7, 7, 7]
    assert nearest_present(ids, np.array([1, 2, 3], np.int64), 10, 7).tolist() == [2, 1, 2]
