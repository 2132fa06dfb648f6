"""Numba kernel of the negatives stage: how many drawn pairs are edges of the graph.

Arrays in, a count out; no I/O.  ``indices`` values are compared, never used as an index, and the
pair ids come from the sampler's own draws (in ``[0, N)``), so nothing here needs a range check.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_edges(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.int64:
    """How many ``(src[i], dst[i])`` are edges ``src -> dst`` of the CSC graph (``src`` among the
    in-neighbours of ``dst``); a pair counts once however many parallel copies it has."""
    found = np.int64(0)
    for i in range(len(src)):
        u = src[i]
        for k in range(indptr[dst[i]], indptr[dst[i] + 1]):
            if indices[k] == u:
                found += 1
                break
    return found
