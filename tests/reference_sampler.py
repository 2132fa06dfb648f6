"""Plain-Python reference of the neighbour sampler (no numba, no numpy tricks): the test oracle.

It implements the algorithm documented in ``outre_async.sampling._sampler_kernels`` step by step, with a
dict for the relabelling and ``_rng.py_bounded`` for the random numbers, so that for the same
``(seed, stream)`` it must produce exactly the kernel's ``n_id``, ``edge_index`` and per-hop counts.
"""

from __future__ import annotations

from outre_async._rng import py_bounded, stream_state
from outre_async.sampling._sampler_kernels import FLOYD_FACTOR


class _Rng:
    def __init__(self, seed: int, stream: int) -> None:
        self.state = int(stream_state(seed, stream)[0])

    def bounded(self, n: int) -> int:
        value, self.state = py_bounded(self.state, n)
        return value


def reference_sample(indptr, indices, seeds, fanouts, *, seed: int, stream: int = 0, pruned=frozenset()) -> dict:
    """Return ``n_id``, ``edge_index`` ([rows, cols] lists), ``e_id`` (CSC positions) and per-hop counts.

    ``pruned``: global ids that are not expanded when hop 1 discovered them (the history cache).
    """
    indptr = [int(x) for x in indptr]
    rng = _Rng(seed, stream)
    n_id = [int(s) for s in seeds]
    local = {v: i for i, v in enumerate(n_id)}
    if len(local) != len(n_id):
        raise ValueError("seeds must be unique")
    rows: list[int] = []
    cols: list[int] = []
    e_id: list[int] = []
    nodes_per_hop, edges_per_hop = [len(n_id)], []
    lo = 0
    for h, k in enumerate(fanouts):
        hi, edges_before = len(n_id), len(rows)
        for t in range(lo, hi):
            if h == 1 and n_id[t] in pruned:
                continue
            start, stop = indptr[n_id[t]], indptr[n_id[t] + 1]
            for pos in choose_positions(rng, stop - start, k):
                u = int(indices[start + pos])
                if u not in local:
                    local[u] = len(n_id)
                    n_id.append(u)
                rows.append(local[u])
                cols.append(t)
                e_id.append(start + pos)
        nodes_per_hop.append(len(n_id) - hi)
        edges_per_hop.append(len(rows) - edges_before)
        lo = hi
    return {"n_id": n_id, "edge_index": [rows, cols], "e_id": e_id,
            "num_sampled_nodes": nodes_per_hop, "num_sampled_edges": edges_per_hop}


def choose_positions(rng: _Rng, d: int, k: int) -> list[int]:
    """Positions of the neighbours taken, in emission order (all when ``k < 0 or d <= k``)."""
    if k < 0 or d <= k:
        return list(range(d))
    if uses_floyd(d, k):
        return floyd(rng, d, k)
    return selection(rng, d, k)


def uses_floyd(d: int, k: int) -> bool:
    return k * (k + FLOYD_FACTOR) <= FLOYD_FACTOR * d


def floyd(rng: _Rng, d: int, k: int) -> list[int]:
    chosen: list[int] = []
    for j in range(d - k, d):
        t = rng.bounded(j + 1)
        chosen.append(j if t in chosen else t)
    return chosen


def selection(rng: _Rng, d: int, k: int) -> list[int]:
    chosen: list[int] = []
    for i in range(d):
        if rng.bounded(d - i) < k - len(chosen):
            chosen.append(i)
            if len(chosen) == k:
                break
    return chosen
