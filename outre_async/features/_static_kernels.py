"""Kernel of the static feature cache: merge its rows into a batch matrix in place."""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def merge_static_rows(out, slots, rows) -> None:
    """``out`` holds the missed rows (``slots < 0``) in order as a prefix; afterwards ``out[i]`` is
    ``rows[slots[i]]`` where ``slots[i] >= 0`` and the next missed row elsewhere.

    Missed row k moves to its position p_k >= k; going from the last missed row down, a move never
    overwrites a missed row not yet moved (those sit at indices < k <= p_k)."""
    n, dim = out.shape
    missed = 0
    for i in range(n):
        if slots[i] < 0:
            missed += 1
    k = missed - 1
    for i in range(n - 1, -1, -1):
        s = slots[i]
        if s >= 0:
            for j in range(dim):
                out[i, j] = rows[s, j]
        else:
            if i != k:
                for j in range(dim):
                    out[i, j] = out[k, j]
            k -= 1
