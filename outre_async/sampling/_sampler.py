"""Uniform neighbour sampling over the store's CSC: :class:`NeighborSampler` and its output type.

The semantics are PyG's ``NeighborSampler`` (directed, non-disjoint, without replacement): seeds
are local ids ``0..B-1`` in the given order, each hop's new nodes follow in discovery order, hop
``h+1`` expands only the nodes hop ``h`` discovered, and ``edge_index`` row 0 is the sampled
neighbour (source), row 1 the node it was sampled for (target).  The kernels are in
``_sampler_kernels`` (algorithm choices documented there); this module validates input, owns the
relabel scratch and turns kernel status codes into named errors.

Seeds must be unique: a repeated seed would need two local ids for one node (or a batch whose
``batch_size`` first rows are not the seeds), so it is rejected with :class:`ConfigError`.

A sample depends only on ``(seed, stream, seeds, fanouts)``: the pipeline passes the batch's
position in the epoch as ``stream``, so results do not depend on thread scheduling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetCorruptError, InvalidGraphError
from ._id_map_kernels import capacity_for, key_dtype, new_table, table_bytes
from .._rng import check_seed, stream_state
from ..store._csc_kernels import max_degree
from . import _sampler_kernels as K

__all__ = ["NeighborSampler", "SampledSubgraph", "sample_neighbors", "check_fanouts"]

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SampledSubgraph:
    """Topology of one sampled batch (sampler -> extractor contract; features are joined later).

    ``n_id`` int64 [n]: global ids, seeds first.  ``edge_index`` int64 [2, E]: local ids, row 0
    the source (sampled neighbour), row 1 the target, hop 1 edges first.  ``num_sampled_nodes``
    (hops + 1 entries, the seed count first) and ``num_sampled_edges`` (one per hop) are what PyG's
    ``trim_to_layer`` needs.  ``batch_size`` is the number of seeds.  ``e_id`` int64 [E]: each edge's
    position in the CSC's ``indices`` (PyG's ``e_id``); ``None`` only for subgraphs built by hand.
    """

    n_id: np.ndarray
    edge_index: np.ndarray
    num_sampled_nodes: tuple[int, ...]
    num_sampled_edges: tuple[int, ...]
    batch_size: int
    e_id: np.ndarray | None = None

    @staticmethod
    def planned_bytes(max_nodes: int, max_edges: int) -> int:
        """The most one subgraph holds: ``n_id`` (8 a node), ``edge_index`` and ``e_id`` (24 an edge)."""
        return 8 * max_nodes + 24 * max_edges

    @property
    def num_nodes(self) -> int:
        return len(self.n_id)

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])


class NeighborSampler:
    """Samples ``fanouts[h]`` in-neighbours per node and hop (``-1``: all of them) over a CSC.
    A fanout at or beyond the graph's maximum in-degree means all of them too (:func:`clamp_fanouts`).

    ``data`` is a :class:`~outre_async.Dataset` (its ``indptr`` and memory-mapped ``indices``) or an
    ``(indptr, indices)`` pair.  Thread-safe: each concurrent :meth:`sample` call takes its own
    relabel scratch from a small pool that grows to the highest concurrency seen, so two executor
    threads sampling at once hold two scratches.  The scratch (:meth:`relabel_bytes`) is a hash table
    sized by the most nodes the call can reach (the seeds plus the fanouts' edge bound) where that is
    smaller than an N-entry array (int32, int64 past 2**31 nodes), else the array: on a large graph a
    batch reaches a sliver of the nodes, and an array per sampler was bytes per node of every process.
    """

    @staticmethod
    def scratch_bytes(num_nodes: int, max_nodes: int, max_edges: int) -> int:
        """What one sampling call holds besides its result: the relabel scratch and the kernel's
        growth (three subgraphs of ``max_nodes`` / ``max_edges``)."""
        return (NeighborSampler.relabel_bytes(num_nodes, max_nodes)
                + 3 * SampledSubgraph.planned_bytes(max_nodes, max_edges))

    @staticmethod
    def relabel_bytes(num_nodes: int, max_nodes: int | None) -> int:
        """The relabel scratch of a call that reaches at most ``max_nodes`` nodes (None: no bound,
        a fanout of -1): the smaller of the N-entry array and a hash table of that many keys (int32 keys where ids fit)."""
        array = (4 if num_nodes <= INT32_MAX else 8) * num_nodes
        if max_nodes is None:
            return array
        return min(array, table_bytes(min(num_nodes, max_nodes), 1, num_nodes))

    def __init__(self, data: Any, fanouts: Sequence[int], *, seed: int = 0) -> None:
        self.indptr, self.indices = _csc_arrays(data)
        # a Dataset's maps are checked before each batch: a file truncated meanwhile is a named error
        self.check_mapped = getattr(data, "check_mapped", _nothing_mapped)
        self.fanouts: tuple[int, ...] = check_fanouts(fanouts)
        self.seed = check_seed(seed)
        self._fanouts = np.asarray(clamp_fanouts(self.fanouts, int(max_degree(self.indptr))), dtype=np.int64)
        self._scratch_dtype = np.int32 if self.num_nodes <= INT32_MAX else np.int64
        self._pool: list[np.ndarray | tuple[np.ndarray, np.ndarray]] = []

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    def sample(self, seeds: Any, stream: int = 0, prune: K.HistoryPrune | None = None) -> SampledSubgraph:
        """Sample the neighbourhood of ``seeds`` (unique node ids) with RNG stream ``stream``; hop-1
        nodes that ``prune`` marks are not expanded (the history cache's decision, see the kernels)."""
        seeds = _as_seeds(seeds)
        self.check_mapped()
        state = stream_state(self.seed, stream)
        scratch = self._take_scratch(len(seeds))
        status, where, n_id, edge_index, e_id, nodes, edges = K.sample_multihop(
            self.indptr, self.indices, seeds, self._fanouts, state, scratch, None, prune)
        self._pool.append(scratch)  # only on a normal return: the kernel left it all -1 again
        if status != K.OK:
            self._raise(status, int(where), seeds)
        return SampledSubgraph(n_id, edge_index, tuple(int(c) for c in nodes),
                               tuple(int(c) for c in edges), len(seeds), e_id)

    def sample_nodes(self, seeds: Any, stream: int = 0) -> np.ndarray:
        """The ``n_id`` that :meth:`sample` gives for ``(seeds, stream)`` (the loader's foresight keeps
        only that; ``loader._foresight``)."""
        return self.sample(seeds, stream).n_id

    def reach(self, num_seeds: int) -> int | None:
        """The most nodes a call with ``num_seeds`` seeds can reach, or None when a fanout of -1
        (or a bound past the kernel's cap) leaves it unbounded."""
        if not len(self._fanouts) or not num_seeds:
            return min(num_seeds, self.num_nodes)
        edges = int(K._edge_bound(num_seeds, self._fanouts))
        return min(self.num_nodes, num_seeds + edges) if edges else None

    def _take_scratch(self, num_seeds: int = 0) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """A relabel scratch for a call of ``num_seeds`` seeds: the array or a hash table large enough
        (:meth:`relabel_bytes`), from the pool when one there fits (else a new one; the misfit is dropped)."""
        reach = self.reach(num_seeds)
        direct = self.relabel_bytes(self.num_nodes, reach) == (4 if self.num_nodes <= INT32_MAX else 8) * self.num_nodes
        cap = 0 if direct or reach is None else capacity_for(reach)
        try:
            scratch = self._pool.pop()  # atomic: concurrent callers never share a scratch
        except IndexError:
            scratch = None
        if direct and isinstance(scratch, np.ndarray):
            return scratch
        if not direct and isinstance(scratch, tuple) and len(scratch[0]) >= cap:
            return scratch
        if direct:
            return np.full(self.num_nodes, -1, dtype=self._scratch_dtype)
        return new_table(cap, 1, -1, key_dtype(self.num_nodes))

    def _raise(self, status: int, where: int, seeds: np.ndarray) -> None:
        if status == K.SEED_OUT_OF_RANGE:
            raise ConfigError(f"seed node id {int(seeds[where])} (position {where}) is out of "
                              f"range [0, {self.num_nodes}); pass ids of this graph")
        if status == K.SEED_REPEATED:
            first = int(np.flatnonzero(seeds == seeds[where])[0])
            raise ConfigError(f"seeds must be unique: node {int(seeds[where])} is at positions "
                              f"{first} and {where}; deduplicate the seeds (e.g. np.unique)")
        raise DatasetCorruptError(f"indices[{where}] = {int(self.indices[where])} is not a node id "
                                  f"in [0, {self.num_nodes}); the graph is corrupt, re-convert it")

    def __repr__(self) -> str:
        return (f"NeighborSampler(num_nodes={self.num_nodes}, fanouts={list(self.fanouts)}, "
                f"seed={self.seed})")


def sample_neighbors(indptr: np.ndarray, indices: np.ndarray, seeds: Any, fanouts: Sequence[int], *,
                     seed: int, stream: int = 0) -> SampledSubgraph:
    """One-off :meth:`NeighborSampler.sample` (allocates the O(N) scratch each call: use a
    :class:`NeighborSampler` when sampling repeatedly)."""
    return NeighborSampler((indptr, indices), fanouts, seed=seed).sample(seeds, stream)


def check_fanouts(fanouts: Any) -> tuple[int, ...]:
    """Validate fanouts: a non-empty sequence of ints, each ``> 0`` or ``-1`` (all neighbours)."""
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence | np.ndarray):
        raise ConfigError(f"fanouts must be a non-empty list of ints (e.g. [15, 10, 5]), "
                          f"got {fanouts!r}")
    if len(fanouts) == 0:
        raise ConfigError(f"fanouts must list at least one hop, got {list(fanouts)!r}")
    for f in fanouts:
        if isinstance(f, bool) or not isinstance(f, int | np.integer) or not (f > 0 or f == -1):
            raise ConfigError(f"each fanout must be an int > 0 or -1 (all neighbours), got {f!r} "
                              f"in fanouts={list(fanouts)!r}")
    return tuple(int(f) for f in fanouts)


def clamp_fanouts(fanouts: Sequence[int], max_in_degree: int) -> tuple[int, ...]:
    """The fanouts the kernels get: one at or beyond the graph's maximum in-degree takes every
    neighbour of every node anyway, so it becomes ``-1`` ("all"), which draws the same sample (taking
    all draws no random numbers) and sizes the hop by its real edge count instead of
    ``frontier x fanout`` (``fanouts=[10**12, 5]`` is a sample, not a ``MemoryError``)."""
    return tuple(-1 if f >= max_in_degree else f for f in fanouts)


def _as_seeds(seeds: Any) -> np.ndarray:
    arr = np.asarray(seeds)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ConfigError(f"seeds must be a 1-D array of integer node ids, got {arr.dtype} "
                          f"{arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _nothing_mapped() -> None:
    """``check_mapped`` of caller-given arrays: nothing of ours is mapped."""


def _csc_arrays(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of a Dataset (already validated on open) or of a checked pair."""
    if hasattr(data, "indptr") and hasattr(data, "indices"):
        return data.indptr, data.indices
    if not (isinstance(data, tuple | list) and len(data) == 2):
        raise ConfigError(f"expected a Dataset or an (indptr, indices) pair, "
                          f"got {type(data).__name__}")
    return _checked_csc(np.asarray(data[0]), np.asarray(data[1]))


def _checked_csc(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the kernel needs to stay in bounds: indptr monotone from 0 to at most len(indices)."""
    if indptr.ndim != 1 or len(indptr) < 1 or not np.issubdtype(indptr.dtype, np.integer):
        raise InvalidGraphError(f"indptr must be a 1-D integer array of N+1 entries, "
                                f"got {indptr.dtype} {indptr.shape}")
    if indices.ndim != 1 or (indices.size and not np.issubdtype(indices.dtype, np.integer)):
        raise InvalidGraphError(f"indices must be a 1-D integer array, "
                                f"got {indices.dtype} {indices.shape}")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    if indptr[0] != 0 or indptr[-1] > len(indices) or (np.diff(indptr) < 0).any():
        raise InvalidGraphError(f"indptr must be non-decreasing from 0 to at most len(indices)="
                                f"{len(indices)}; got {indptr[0]}..{indptr[-1]}")
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    return indptr, indices
