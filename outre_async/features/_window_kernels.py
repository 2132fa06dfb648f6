"""The window plan's one loop over rows (``_window_plan._planned_from``), compiled.

Kept apart from the plan (arrays in, arrays out, no Python objects): written with NumPy, the loop made
one pass over every planned row per neighbour distance up to ``near`` ids, six array operations a pass,
and on a 300 k-node, 256-dim graph the window plans were the largest CPU cost left on the event loop
(``benchmarks/bench_loader_cpu.py`` per-thread figures): this kernel visits each row's neighbours once.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def nearest_present(ids: np.ndarray, present: np.ndarray, near: int, last: int) -> np.ndarray:
    """Per row ``i`` of ``ids`` (sorted, distinct): the smallest ``present[j]`` over the other rows ``j``
    at most ``near`` ids away, ``last`` when there is none."""
    n = len(ids)
    out = np.empty(n, np.int64)
    for i in range(n):
        best = last
        j = i - 1
        while j >= 0 and ids[i] - ids[j] <= near:
            best = min(best, present[j])
            j -= 1
        j = i + 1
        while j < n and ids[j] - ids[i] <= near:
            best = min(best, present[j])
            j += 1
        out[i] = best
    return out
