"""Each query's candidates (the pairs its positive is ranked against), produced block by block.

* ``stored``: the split's fixed evaluation negatives (``test_neg``, written by ``oa.split_edges``),
  ``k`` pairs per positive laid out query after query; the first ``c <= k`` of each query's.
* ``uniform``: ``c`` destinations for the query's source, drawn uniformly over all nodes (they may
  be the true destination, or another true edge, as PyG's negatives).  Candidate ``j`` of query
  ``i`` is a hash of ``(seed, i * c + j)`` (splitmix64's output function, vectorised): it is the same
  whatever the chunk sizes, so chunked and unchunked evaluations score the same pairs.
* ``all``: the query's source against every node but its true destination (``c = N - 1``); column
  ``j`` is node ``j``, or ``j + 1`` from the destination on.

A block is ``(rows of queries, [j0, j1) columns)`` -> ``(src, dst)``, both ``[q, j1 - j0]`` int64 node ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._rng import GOLDEN, stream_state

_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_CANDIDATES = 0x43414E44  # the candidates' stream tag ("CAND")


def hash_ids(key: np.uint64, counters: np.ndarray, n: int) -> np.ndarray:
    """``mix64(key + (counter + 1) * GOLDEN) mod n`` for each counter (uint64 wraps, as splitmix64)."""
    z = key + (counters.astype(np.uint64) + np.uint64(1)) * np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(n)).astype(np.int64)


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidates:
    """Where the candidates of each query come from (see the module)."""

    kind: str                  # "stored", "uniform" or "all"
    per_query: int             # c
    queries: np.ndarray        # [2, Q] the positive pairs
    num_nodes: int
    stored: np.ndarray | None = None  # [2, Q * k] for "stored"
    seed: int = 0

    def block(self, rows: np.ndarray, j0: int, j1: int) -> tuple[np.ndarray, np.ndarray]:
        cols = np.arange(j0, j1, dtype=np.int64)
        if self.kind == "stored":
            assert self.stored is not None
            k = self.stored.shape[1] // self.queries.shape[1]
            at = rows[:, None] * k + cols[None, :]
            return self.stored[0, at], self.stored[1, at]
        src = np.broadcast_to(self.queries[0, rows][:, None], (len(rows), j1 - j0))
        if self.kind == "all":
            dst = cols[None, :] + (cols[None, :] >= self.queries[1, rows][:, None])
            return src, dst
        key = np.uint64(stream_state(self.seed, _CANDIDATES)[0])
        return src, hash_ids(key, rows[:, None] * self.per_query + cols[None, :], self.num_nodes)
