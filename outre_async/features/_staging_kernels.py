"""numba kernel of staging: copy staged rows to their destination once (arrays in, arrays out).

Why a kernel: numpy's ``out[dest] = window[elems]`` builds a temporary of the gathered rows and then
scatters it, two copies per row; this loop is one.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def scatter_rows(staged: np.ndarray, row_elems: np.ndarray, rows: np.ndarray, out: np.ndarray,
                 dest: np.ndarray, start: int, stop: int) -> None:
    """``out[dest[i]] = staged[row_elems[rows[i]] : + dim]`` for ``i`` in ``[start, stop)``: one copy
    per row, straight from the staging arena into its place (a buffer slot or a batch row); ``staged``
    and ``out`` hold the same type (the caller passes same-size unsigned views: a bit copy, any
    dtype, float16 included).  The caller checks that every index is in range (they come from a plan)."""
    # unsigned indices: numba then emits no negative-index wraparound per element and the inner
    # loop vectorises (several times less user CPU per row than signed ones: benchmarks/bench_extract.py)
    dim = np.uint64(out.shape[1])
    for i in range(start, stop):
        src = np.uint64(row_elems[rows[i]])
        d = np.uint64(dest[i])
        for j in range(dim):
            out[d, j] = staged[src + j]
