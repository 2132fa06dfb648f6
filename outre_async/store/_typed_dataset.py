"""The node and edge types of an opened dataset: the accessors :class:`Dataset` gets from
:class:`TypedDataset`, and the checks a typed dataset adds on open and in ``verify``.

Apart from ``_dataset`` so that the reader stays about files, maps and their checks; a homogeneous
dataset answers every accessor here as the one-type case (``"_N"``, one edge type), so callers need
not branch.  :class:`Dataset` is the only subclass: it provides the manifest, the path, the splits
read on open, the arrays and ``_map`` these accessors build on.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, DatasetCorruptError, NotSupportedError
from ._file_reads import load_small
from ._id_checks import node_id_array
from ._manifest import Manifest
from ._type_names import DEFAULT_EDGE_TYPE, DEFAULT_NODE_TYPE, EdgeType


class TypedDataset:
    """Node and edge types, per-type counts and ids, and per-type features (mixed into :class:`Dataset`)."""

    path: Path
    manifest: Manifest
    _splits: dict[str, np.ndarray]

    if TYPE_CHECKING:  # what :class:`Dataset` defines
        num_nodes: int
        num_edges: int
        features: np.ndarray
        indptr: np.ndarray

        def _map(self, name: str, dtype: np.dtype, shape: tuple[int, ...], *, random: bool = True) -> np.ndarray: ...

    def require_homogeneous(self, what: str) -> None:
        """A :class:`NotSupportedError` naming ``what`` (a typed dataset lacks it) when this dataset is typed."""
        if self.manifest.types is not None:
            raise NotSupportedError(
                f"dataset {self.path} is heterogeneous ({len(self.node_types)} node types), so it has no {what}; "
                "read a type's features with features_of(type) or feature_files[FeatureKey('node', type, 'x')], "
                "sample it with HeteroNeighborSampler (OutreLoader takes homogeneous datasets only, for now)")

    # -- node and edge types ---------------------------------------------------------------------
    @property
    def is_hetero(self) -> bool:
        """True for a typed dataset (node and edge types in the manifest)."""
        return self.manifest.types is not None

    @property
    def node_types(self) -> tuple[str, ...]:
        """Node type names in global id order (``("_N",)`` for a homogeneous dataset: the one-type case)."""
        types = self.manifest.types
        return (DEFAULT_NODE_TYPE,) if types is None else tuple(t.name for t in types.node_types)

    @property
    def edge_types(self) -> tuple[EdgeType, ...]:
        """``(src, rel, dst)`` triples; position ``i`` is edge type id ``i`` of :attr:`type_per_edge`."""
        types = self.manifest.types
        return (DEFAULT_EDGE_TYPE,) if types is None else tuple(e.key for e in types.edge_types)

    def metadata(self) -> tuple[list[str], list[EdgeType]]:
        """``(node_types, edge_types)`` as lists: what PyG's ``HeteroData.metadata()`` gives ``to_hetero``."""
        return list(self.node_types), list(self.edge_types)

    @property
    def num_nodes_by_type(self) -> dict[str, int]:
        types = self.manifest.types
        if types is None:
            return {DEFAULT_NODE_TYPE: self.num_nodes}
        return {t.name: t.count for t in types.node_types}

    @property
    def num_edges_by_type(self) -> dict[EdgeType, int]:
        types = self.manifest.types
        if types is None:
            return {DEFAULT_EDGE_TYPE: self.num_edges}
        return {e.key: e.num_edges for e in types.edge_types}

    @property
    def target_types(self) -> tuple[str, ...]:
        """The node types that carry labels (a homogeneous dataset with labels: its one type)."""
        types = self.manifest.types
        if types is None:
            return () if self.manifest.labels is None else (DEFAULT_NODE_TYPE,)
        return types.target_types

    @cached_property
    def node_type_offsets(self) -> np.ndarray:
        """int64 ``[T + 1]``: node type ``node_types[t]`` owns global ids ``offsets[t]:offsets[t + 1]``."""
        types = self.manifest.types
        return np.array([0, self.num_nodes], np.int64) if types is None else types.offsets

    @cached_property
    def type_per_edge(self) -> np.ndarray:
        """The edge type id of every CSC entry (uint8/uint16, beside ``indices``; all 0 when homogeneous),
        read into RAM on first use (one or two bytes an edge).  Ranges are checked by the samplers'
        kernels as they read it, and whole by :meth:`verify`."""
        types = self.manifest.types
        if types is None:
            return np.zeros(self.num_edges, np.uint8)
        return load_small(self.path, types.type_per_edge)

    def type_index(self, node_type: str) -> int:
        """The position of ``node_type`` in :attr:`node_types`; a :class:`ConfigError` naming the types."""
        if node_type not in self.node_types:
            raise ConfigError(f"dataset {self.path} has no node type {node_type!r}; it has {list(self.node_types)}")
        return self.node_types.index(node_type)

    def global_ids(self, node_type: str, local: Any) -> np.ndarray:
        """Global ids of the nodes ``local`` (ids within ``node_type``, checked in range)."""
        t = self.type_index(node_type)
        lo, hi = self.node_type_offsets[t], self.node_type_offsets[t + 1]
        return node_id_array(local, int(hi - lo), f"{node_type!r} node ids") + lo

    def local_ids(self, node_type: str, ids: Any) -> np.ndarray:
        """Ids within ``node_type`` of the global ids ``ids`` (each must be a node of that type)."""
        t = self.type_index(node_type)
        lo, hi = int(self.node_type_offsets[t]), int(self.node_type_offsets[t + 1])
        arr = node_id_array(ids, self.num_nodes, "ids")
        if arr.size and (arr.min() < lo or arr.max() >= hi):
            bad = int(arr.min()) if arr.min() < lo else int(arr.max())
            raise ConfigError(f"node {bad} is not of type {node_type!r} (ids [{lo}, {hi})); pass ids of that type")
        return arr - lo

    def features_of(self, node_type: str) -> np.ndarray | None:
        """Node type ``node_type``'s feature matrix ``[count, dim]`` as a read-only memmap view (rows are
        the type's local ids); None for a featureless type.  ``"_N"`` on a homogeneous dataset: :attr:`features`."""
        t = self.type_index(node_type)
        types = self.manifest.types
        if types is None:
            return None if self.manifest.features is None else self.features
        f = types.node_types[t].features
        if f is None:
            return None
        dtype = np.dtype(f.dtype)
        return self._map(f.file, dtype, (types.node_types[t].count, f.stride // dtype.itemsize))[:, : f.dim]

    def _check_split_types(self) -> None:
        """Split ids of a typed dataset lie in its target types' id ranges."""
        offsets, targets = self.node_type_offsets, set(self.target_types)
        for name, ids in self._splits.items():
            kinds = np.searchsorted(offsets, ids, side="right") - 1
            bad = [self.node_types[k] for k in np.unique(kinds) if self.node_types[k] not in targets]
            if bad:
                raise DatasetCorruptError(f"{self.path}: split {name!r} holds nodes of type {bad[0]!r}, which is not a "
                                          f"target type ({sorted(targets)}); re-create the dataset")

    def _verify_types(self, start: int, sources: np.ndarray) -> None:
        """Edges ``start...`` (their ``sources``): each edge type id in range, its source and target of
        the edge type's node types, each neighbour list sorted by edge type."""
        tpe = self.type_per_edge[start : start + len(sources)].astype(np.int64)
        fail = f"{self.path}: type_per_edge[{start}:{start + len(sources)}]"
        if len(tpe) and tpe.max() >= len(self.edge_types):
            raise DatasetCorruptError(f"{fail} holds edge type {int(tpe.max())} of {len(self.edge_types)}; re-convert")
        offsets, kinds = self.node_type_offsets, {t: i for i, t in enumerate(self.node_types)}
        src_of = np.array([kinds[s] for s, _, _ in self.edge_types], np.int64)
        dst_of = np.array([kinds[d] for _, _, d in self.edge_types], np.int64)
        targets = np.searchsorted(self.indptr, np.arange(start, start + len(sources)), side="right") - 1
        src_kind = np.searchsorted(offsets, sources, side="right") - 1
        dst_kind = np.searchsorted(offsets, targets, side="right") - 1
        if not ((src_of[tpe] == src_kind) & (dst_of[tpe] == dst_kind)).all():
            raise DatasetCorruptError(f"{fail} names an edge type whose node types disagree with the edge's ends; "
                                      "re-convert")
        drops = np.flatnonzero(np.diff(tpe) < 0) + 1
        if len(drops) and (self.indptr[targets[drops]] != start + drops).any():
            raise DatasetCorruptError(f"{fail}: a neighbour list is not sorted by edge type; re-convert")
