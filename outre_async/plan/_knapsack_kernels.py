"""Numba kernel of the knapsack's one pass: take items in a given order while they fit, skipping
those that no longer do (arrays in, arrays out; no I/O)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def take_in_order(order: np.ndarray, weights: np.ndarray, room: int, taken: np.ndarray) -> int:
    """Mark ``taken[i]`` for each position ``order[i]`` whose weight still fits ``room``; returns the
    bytes used.  ``order`` indexes ``weights``; ``taken`` is uint8 [len(order)], zeroed by the caller."""
    used = 0
    for i in range(len(order)):
        w = weights[order[i]]
        if used + w <= room:
            used += w
            taken[i] = 1
    return used
