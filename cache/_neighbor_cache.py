"""Global neighbour cache (OUTRE §4.2): the in-neighbour lists of the highest-ranked nodes, in RAM.

Ranking: each node's count of cross-partition in-neighbours (the partitioner's ``cross`` output):
a list that crosses partitions is the one the macro batch's partition adjacency is most likely
not to hold.  Nodes are taken in rank order (ties: lower id first) while the cache fits its byte
budget, skipping nodes ranked 0.  The cache is a small CSC (``indptr``/``indices`` over the chosen
nodes, in id order) plus ``slot`` [N] int32 (-1: not cached), so a look-up is one array read.

Budget accounting: ``4 N`` bytes for ``slot`` + ``8 (c + 1)`` for ``indptr`` + ``8 c`` for the node ids
+ the lists' ids; :attr:`NeighborCache.nbytes` reports the total and never exceeds the budget (a
budget below ``4 N + 8`` gives an empty cache without a slot table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from outre_async.errors import ConfigError
from outre_async.store._csc_kernels import gather_lists


@dataclass(frozen=True, slots=True)
class NeighborCache:
    nodes: np.ndarray      # int64 [c], ascending
    indptr: np.ndarray     # int64 [c + 1]
    indices: np.ndarray    # [E_c], the lists in the dataset's CSC order
    slot: np.ndarray       # int32 [N] (or [0] when empty): position in ``nodes`` or -1

    @property
    def num_cached(self) -> int:
        return len(self.nodes)

    @property
    def nbytes(self) -> int:
        return int(self.nodes.nbytes + self.indptr.nbytes + self.indices.nbytes + self.slot.nbytes)

    def neighbors(self, v: int) -> np.ndarray | None:
        """v's cached in-neighbour list, or None."""
        if not len(self.slot) or self.slot[v] < 0:
            return None
        s = int(self.slot[v])
        return self.indices[self.indptr[s] : self.indptr[s + 1]]

    @classmethod
    def empty(cls, dtype: np.dtype | type = np.int32) -> NeighborCache:
        return cls(np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, dtype), np.empty(0, np.int32))

    @classmethod
    def build(cls, indptr: np.ndarray, indices: np.ndarray, rank: np.ndarray, budget_bytes: int) -> NeighborCache:
        """Cache the lists of the top-``rank`` nodes that fit ``budget_bytes`` (``indices`` may be a memmap)."""
        if budget_bytes < 0:
            raise ConfigError(f"neighbor cache budget_bytes={budget_bytes} must be >= 0")
        n = len(indptr) - 1
        rank = np.asarray(rank)
        if rank.shape != (n,):
            raise ConfigError(f"rank must hold one score per node ({n}), got shape {rank.shape}")
        room = budget_bytes - 4 * n - 8
        if room <= 0:
            return cls.empty(indices.dtype)
        order = np.argsort(-rank.astype(np.int64), kind="stable")
        order = order[rank[order] > 0]
        cost = np.cumsum((indptr[order + 1] - indptr[order]) * indices.dtype.itemsize + 16)
        chosen = np.sort(order[: int(np.searchsorted(cost, room, side="right"))])
        out_ptr = np.zeros(len(chosen) + 1, np.int64)
        total = int((indptr[chosen + 1] - indptr[chosen]).sum())
        out = np.empty(total, indices.dtype)
        gather_lists(indptr, indices, chosen, out_ptr, out)
        slot = np.full(n, -1, np.int32)
        slot[chosen] = np.arange(len(chosen), dtype=np.int32)
        return cls(chosen.astype(np.int64), out_ptr, out, slot)
