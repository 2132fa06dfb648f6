"""Numba kernel of the knapsack's one pass: take items in a given order while they fit, skipping
those that no longer do (arrays in, arrays out; no I/O)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def take_in_order(order: np.ndarray, weights: np.ndarray, room: int, taken: np.ndarray, kind_of: np.ndarray,
                  caps: np.ndarray) -> int:
    """Mark ``taken[i]`` for each position ``order[i]`` whose weight still fits ``room`` and whose
    kind (``kind_of[order[i]]``) is under its count cap (``caps[kind]``, -1: none); returns the bytes
    used.  ``order`` indexes ``weights`` and ``kind_of``; ``taken`` is uint8 [len(order)], zeroed by
    the caller."""
    used = 0
    counts = np.zeros(len(caps), np.int64)
    for i in range(len(order)):
        w = weights[order[i]]
        k = kind_of[order[i]]
        if used + w <= room and (caps[k] < 0 or counts[k] < caps[k]):
            used += w
            counts[k] += 1
            taken[i] = 1
    return used
