"""Per-edge-type neighbour sampling of a typed dataset: :class:`HeteroNeighborSampler` and its output.

``num_neighbors`` takes PyG's two forms: a list (the same fanouts for every edge type) or a dict keyed
by edge type (``(src, rel, dst)`` or ``"src__rel__dst"``) with a list per edge type, every edge type of
the graph present and all lists of one length, as PyG's ``NumNeighbors`` requires.  Each fanout is an
int ``> 0``, ``-1`` (all neighbours) or ``0`` (none through that edge type in that hop).

The output, :class:`HeteroSampledSubgraph`, is PyG's hetero sampler output in numpy: per node type the
sampled nodes as ids *local to their type* (the input type's seeds first, then by hop and discovery),
per edge type the edges as ``[2, E]`` indices into the source and destination types' node arrays, hop
by hop, and the per-hop counts ``trim_to_layer`` needs.  The kernel is ``_hetero_kernels``; this
module validates the input, owns the relabel scratch, splits the kernel's global relabelling by type
and turns status codes into named errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetCorruptError
from .._rng import check_seed, stream_state
from ..store._csc_kernels import max_degree
from ..store._type_names import EdgeType
from . import _hetero_kernels as HK
from . import _sampler_kernels as K
from ._sampler import INT32_MAX

__all__ = ["HeteroNeighborSampler", "HeteroSampledSubgraph", "hetero_fanouts"]


@dataclass(frozen=True, slots=True)
class HeteroSampledSubgraph:
    """Topology of one typed batch (features are joined later, per type, by these local ids).

    ``node[T]`` int64: type-local ids of the sampled nodes of type ``T`` (the seeds first on
    ``input_type``); ``num_sampled_nodes[T]``: per hop (seeds' hop first).  ``edge_index[R]`` int64
    ``[2, E]``: row 0 indexes ``node[src]``, row 1 ``node[dst]``; ``e_id[R]``: each edge's CSC position;
    ``num_sampled_edges[R]``: per hop.  Every node and edge type of the graph has an entry (maybe empty).
    """

    node: dict[str, np.ndarray]
    num_sampled_nodes: dict[str, tuple[int, ...]]
    edge_index: dict[EdgeType, np.ndarray]
    e_id: dict[EdgeType, np.ndarray]
    num_sampled_edges: dict[EdgeType, tuple[int, ...]]
    input_type: str
    batch_size: int


class HeteroNeighborSampler:
    """Samples ``num_neighbors`` per edge type and hop over a typed dataset's CSC (see the module).

    ``dataset`` is an opened typed :class:`~outre_async.Dataset` (a homogeneous one works too: one
    node type ``"_N"``, one edge type).  Not shared between threads: one scratch per sampler.
    """

    def __init__(self, dataset: Any, num_neighbors: Sequence[int] | Mapping[Any, Sequence[int]], *,
                 seed: int = 0) -> None:
        self.dataset = dataset
        self.node_types: tuple[str, ...] = tuple(dataset.node_types)
        self.edge_types: tuple[EdgeType, ...] = tuple(dataset.edge_types)
        self.num_neighbors = hetero_fanouts(num_neighbors, self.edge_types)
        self.seed = check_seed(seed)
        self.indptr, self.indices, self.type_per_edge = dataset.indptr, dataset.indices, dataset.type_per_edge
        self.offsets = np.asarray(dataset.node_type_offsets, np.int64)
        top = int(max_degree(self.indptr))  # a fanout at or past every list's length takes them all anyway
        table = np.array([self.num_neighbors[et] for et in self.edge_types], np.int64)
        self._fanouts = np.where(table >= max(top, 1), -1, table)
        self._scratch = np.full(len(self.indptr) - 1, -1, np.int32 if len(self.indptr) - 1 <= INT32_MAX else np.int64)

    @property
    def num_hops(self) -> int:
        return int(self._fanouts.shape[1])

    def sample(self, input_type: str, seeds: Any, stream: int = 0) -> HeteroSampledSubgraph:
        """Sample around ``seeds`` (unique ids local to ``input_type``) with RNG stream ``stream``."""
        glob = self.dataset.global_ids(input_type, _as_ids(seeds))
        self.dataset.check_mapped()
        status, where, n_id, rows, cols, kinds, e_id, nodes, edges = HK.sample_hetero(
            self.indptr, self.indices, self.type_per_edge, glob, self._fanouts, stream_state(self.seed, stream),
            self._scratch)
        if status != K.OK:
            self._raise(int(status), int(where), input_type, glob)
        return self._split(input_type, len(glob), n_id, rows, cols, kinds, e_id, nodes, edges)

    def _split(self, input_type: str, batch: int, n_id: np.ndarray, rows: np.ndarray, cols: np.ndarray,
               kinds: np.ndarray, e_id: np.ndarray, nodes: np.ndarray, edges: np.ndarray) -> HeteroSampledSubgraph:
        """The kernel's global relabelling, split into per-type node arrays and per-edge-type edges."""
        node_kind = np.searchsorted(self.offsets, n_id, side="right") - 1
        hop_of_node = np.repeat(np.arange(len(nodes)), nodes)
        pos = np.empty(len(n_id), np.int64)  # a node's index within its type's array
        node, per_hop_nodes = {}, {}
        for i, t in enumerate(self.node_types):
            sel = np.flatnonzero(node_kind == i)
            pos[sel] = np.arange(len(sel))
            node[t] = n_id[sel] - self.offsets[i]
            per_hop_nodes[t] = tuple(int(c) for c in np.bincount(hop_of_node[sel], minlength=len(nodes)))
        hop_of_edge = np.repeat(np.arange(len(edges)), edges)
        edge_index, eids, per_hop_edges = {}, {}, {}
        for r, et in enumerate(self.edge_types):
            sel = np.flatnonzero(kinds == r)
            edge_index[et] = np.stack([pos[rows[sel]], pos[cols[sel]]]) if len(sel) else np.empty((2, 0), np.int64)
            eids[et] = e_id[sel]
            per_hop_edges[et] = tuple(int(c) for c in np.bincount(hop_of_edge[sel], minlength=len(edges)))
        return HeteroSampledSubgraph(node, per_hop_nodes, edge_index, eids, per_hop_edges, input_type, batch)

    def _raise(self, status: int, where: int, input_type: str, glob: np.ndarray) -> None:
        if status == K.SEED_REPEATED:
            first = int(np.flatnonzero(glob == glob[where])[0])
            local = int(glob[where] - self.offsets[self.node_types.index(input_type)])
            raise ConfigError(f"seeds must be unique: {input_type!r} node {local} is at positions {first} and "
                              f"{where}; deduplicate the seeds (e.g. np.unique)")
        what = {K.NEIGHBOR_OUT_OF_RANGE: "holds a neighbour id outside the graph",
                HK.EDGE_TYPE_OUT_OF_RANGE: f"has an edge type id past the {len(self.edge_types)} edge types",
                HK.TYPES_UNSORTED: "starts a neighbour list whose edge types are not sorted"}.get(status, f"status {status}")
        raise DatasetCorruptError(f"{self.dataset.path}: CSC position {where} {what}; the dataset is corrupt, "
                                  "re-convert it (outre info --verify names the first bad entry)")

    def __repr__(self) -> str:
        return (f"HeteroNeighborSampler(node_types={list(self.node_types)}, edge_types={len(self.edge_types)}, "
                f"hops={self.num_hops}, seed={self.seed})")


def hetero_fanouts(num_neighbors: Any, edge_types: Sequence[EdgeType]) -> dict[EdgeType, tuple[int, ...]]:
    """PyG's ``num_neighbors`` (a list, or a dict by edge type) as one fanout tuple per edge type."""
    if isinstance(num_neighbors, Mapping):
        by_name = {"__".join(et): et for et in edge_types}
        given: dict[EdgeType, Any] = {}
        for key, value in num_neighbors.items():
            et = by_name.get(key) if isinstance(key, str) else (tuple(key) if isinstance(key, tuple | list) else None)
            if et not in edge_types:
                raise ConfigError(f"num_neighbors names edge type {key!r}, which the graph lacks; its edge types "
                                  f"are {list(edge_types)}")
            given[et] = value
        missing = [et for et in edge_types if et not in given]
        if missing:
            raise ConfigError(f"num_neighbors has no entry for edge type {missing[0]}; give every edge type a list "
                              "(0 to skip it), or pass one list for all")
        out = {et: _hops(given[et], f"num_neighbors[{et}]") for et in edge_types}
        if len({len(v) for v in out.values()}) > 1:
            raise ConfigError(f"num_neighbors lists {sorted({len(v) for v in out.values()})} hop counts; every edge "
                              "type needs the same number of hops")
        return out
    hops = _hops(num_neighbors, "num_neighbors")
    return dict.fromkeys(edge_types, hops)


def _hops(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray) or len(value) == 0:
        raise ConfigError(f"{what} must be a non-empty list of ints (e.g. [15, 10]), got {value!r}")
    for f in value:
        if isinstance(f, bool) or not isinstance(f, int | np.integer) or f < -1:
            raise ConfigError(f"each fanout must be an int > 0, 0 (none) or -1 (all neighbours), got {f!r} in "
                              f"{what}={list(value)!r}")
    return tuple(int(f) for f in value)


def _as_ids(seeds: Any) -> np.ndarray:
    arr = np.asarray(seeds.detach().cpu().numpy() if hasattr(seeds, "detach") else seeds)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ConfigError(f"seeds must be a 1-D array of integer node ids, got {arr.dtype} {arr.shape}")
    return arr
