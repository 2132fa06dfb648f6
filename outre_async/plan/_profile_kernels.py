"""Numba kernels of profiling: which hop-1 subtree owns each sampled node, and replaying a node's
appearances against a reuse window or a staleness bound (arrays in, arrays out; no I/O)."""

from __future__ import annotations

import numpy as np
from numba import njit

UNSET, SHARED = -2, -1


@njit(cache=True, nogil=True)
def subtree_owners(src: np.ndarray, dst: np.ndarray, num_nodes: int, batch_size: int, num_hop1: int,
                   passes: int, owner: np.ndarray) -> None:
    """``owner[u]`` (local ids) = the hop-1 node whose subtree alone reaches ``u``, or ``SHARED``.

    Seeds are ``SHARED`` (always needed); a hop-1 node owns itself (pruning it keeps its own row);
    any later node takes its parents' owner if they all agree (edges ``src -> dst``: ``src`` is
    sampled for ``dst``).  ``passes`` sweeps reach the fixpoint of an ``L``-hop sample for ``passes >= L``.
    """
    for u in range(num_nodes):
        owner[u] = UNSET
    for u in range(batch_size):
        owner[u] = SHARED
    for u in range(batch_size, batch_size + num_hop1):
        owner[u] = u
    fixed = batch_size + num_hop1
    for _ in range(passes):
        for e in range(len(src)):
            u, t = src[e], dst[e]
            if u < fixed:
                continue
            o = owner[t]
            if o == UNSET:
                continue
            if owner[u] == UNSET:
                owner[u] = o
            elif owner[u] != o:
                owner[u] = SHARED


@njit(cache=True, nogil=True)
def reads_after_reuse(node: np.ndarray, step: np.ndarray, reuse: int, out: np.ndarray) -> None:
    """``out[i] = 1`` where access ``i`` would miss a buffer that keeps ``reuse`` batches' rows: the
    node's previous access is more than ``reuse`` batches before (accesses sorted by node, then step)."""
    for i in range(len(node)):
        if i == 0 or node[i] != node[i - 1] or step[i] - step[i - 1] > reuse:
            out[i] = 1
        else:
            out[i] = 0


@njit(cache=True, nogil=True)
def replay_history(node: np.ndarray, step: np.ndarray, frontier: np.ndarray, horizon: int,
                   pulled: np.ndarray) -> None:
    """``pulled[i] = 1`` where hop-1 appearance ``i`` would take the node's history: its last push
    (an appearance it was computed at) is at most ``horizon`` batches before.  A pulled appearance
    pushes nothing, so the row ages until the node is computed again.  Sorted by node, then step."""
    last = np.int64(-1)
    have = False
    for i in range(len(node)):
        if i == 0 or node[i] != node[i - 1]:
            have = False
        if frontier[i] and have and step[i] - last <= horizon:
            pulled[i] = 1
        else:
            pulled[i] = 0
            have = True
            last = step[i]
