"""The manifest's optional ``types`` section: what makes a dataset heterogeneous, and its strict parser.

A typed dataset keeps one CSC over *global* node ids (so the partitioner, the reorderer and the
buffer's slot map work on it unchanged); node type ``t`` owns the contiguous id range
``[offset[t], offset[t] + count[t])``, offsets being the running sum of the counts in the order listed.
``type_per_edge`` (beside ``indices``, one small integer per edge: the edge type's position in
``edge_types``) says which relation each CSC entry belongs to, and every neighbour list is sorted by it
(GraphBolt's ``type_per_edge``), so a sampler finds one relation's neighbours as one run.  Each node
type has its own feature file (or none: featureless types are allowed) with its own width and dtype;
``target_types`` are the types that carry labels (the global ``labels`` file holds -1 elsewhere).

The section is additive: a manifest without it is a homogeneous dataset, read as before.  The parser
checks the section against itself and the manifest's counts (names valid and unique, edge types naming
known node types, counts summing to ``num_nodes`` and ``num_edges``, feature sizes agreeing with the
type's count) and raises :class:`ManifestError`; file sizes are the reader's, as for every entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ManifestError
from ._manifest_entries import FeatureEntry, FileEntry, _dict, _feature_entry, _file_entry, _int, _str
from ._type_names import EdgeType, type_name_problem


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeTypeEntry:
    """One node type: its name, its node count, and its feature file (None: featureless)."""

    name: str
    count: int
    features: FeatureEntry | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeTypeEntry:
    """One edge type ``(src, rel, dst)`` and how many of the dataset's edges are of it."""

    src: str
    rel: str
    dst: str
    num_edges: int

    @property
    def key(self) -> EdgeType:
        return (self.src, self.rel, self.dst)


@dataclass(frozen=True, kw_only=True, slots=True)
class TypesEntry:
    """The ``types`` section (module docstring)."""

    node_types: tuple[NodeTypeEntry, ...]
    edge_types: tuple[EdgeTypeEntry, ...]
    type_per_edge: FileEntry
    target_types: tuple[str, ...] = ()

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``[T + 1]``: node type ``t`` owns global ids ``offsets[t]:offsets[t + 1]``."""
        return np.concatenate([[0], np.cumsum([t.count for t in self.node_types])]).astype(np.int64)


def type_per_edge_dtype(num_edge_types: int) -> str:
    """The narrowest stored dtype for ``num_edge_types`` edge type ids."""
    return "uint8" if num_edge_types <= 1 << 8 else "uint16"


def parse_types(doc: Any, path: Path, *, num_nodes: int, num_edges: int, version: int) -> TypesEntry:
    """The ``types`` section of the manifest at ``path``; :class:`ManifestError` on anything wrong."""
    doc = _dict(doc, "types", path)
    node_types = tuple(_node_type(d, path, version) for d in _list(doc["node_types"], "types.node_types", path))
    names = [t.name for t in node_types]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}: types.node_types lists a name twice ({names}); re-create the dataset")
    edge_types = tuple(_edge_type(d, set(names), path) for d in _list(doc["edge_types"], "types.edge_types", path))
    if len({e.key for e in edge_types}) != len(edge_types):
        raise ManifestError(f"{path}: types.edge_types lists an edge type twice; re-create the dataset")
    entry = TypesEntry(
        node_types=node_types, edge_types=edge_types,
        type_per_edge=_file_entry(doc["type_per_edge"], "type_per_edge", path),
        target_types=tuple(_known(_str(t, "types.target_types", path), set(names), path)
                           for t in _list(doc.get("target_types", []), "types.target_types", path, empty=True)),
    )
    _check_totals(entry, path, num_nodes, num_edges)
    return entry


def _check_totals(entry: TypesEntry, path: Path, num_nodes: int, num_edges: int) -> None:
    nodes, edges = sum(t.count for t in entry.node_types), sum(e.num_edges for e in entry.edge_types)
    if nodes != num_nodes or edges != num_edges:
        raise ManifestError(f"{path}: the node types count {nodes} nodes and the edge types {edges} edges, the "
                            f"manifest says {num_nodes} and {num_edges}; re-create the dataset")
    if entry.type_per_edge.shape != (num_edges,):
        raise ManifestError(f"{path}: type_per_edge has shape {list(entry.type_per_edge.shape)}, expected "
                            f"[{num_edges}] (one type per edge); re-create the dataset")
    if len(entry.edge_types) > np.iinfo(entry.type_per_edge.dtype).max + 1:
        raise ManifestError(f"{path}: {len(entry.edge_types)} edge types do not fit type_per_edge's "
                            f"{entry.type_per_edge.dtype}; re-create the dataset")
    for t in entry.node_types:
        f = t.features
        if f is not None and f.nbytes != t.count * f.stride:
            raise ManifestError(f"{path}: node type {t.name!r} has {t.count} nodes but its feature file is "
                                f"{f.nbytes} bytes of stride {f.stride}; re-create the dataset")


def _list(value: Any, key: str, path: Path, *, empty: bool = False) -> list[Any]:
    if not isinstance(value, list) or (not value and not empty):
        raise ManifestError(f"{path}: {key} must be a {'' if empty else 'non-empty '}list, got {value!r}")
    return value


def _name(value: Any, key: str, path: Path) -> str:
    problem = type_name_problem(value)
    if problem is not None:
        raise ManifestError(f"{path}: {key} {value!r} {problem}; re-create the dataset")
    return str(value)


def _known(name: str, names: set[str], path: Path) -> str:
    if name not in names:
        raise ManifestError(f"{path}: the types section names node type {name!r}, which is not among "
                            f"{sorted(names)}; re-create the dataset")
    return name


def _node_type(doc: Any, path: Path, version: int) -> NodeTypeEntry:
    doc = _dict(doc, "types.node_types[]", path)
    features = doc.get("features")
    return NodeTypeEntry(name=_name(doc["name"], "node type", path), count=_int(doc["count"], "count", path),
                         features=None if features is None else _feature_entry(features, path, version))


def _edge_type(doc: Any, names: set[str], path: Path) -> EdgeTypeEntry:
    doc = _dict(doc, "types.edge_types[]", path)
    return EdgeTypeEntry(src=_known(_name(doc["src"], "edge source type", path), names, path),
                         rel=_name(doc["rel"], "relation", path),
                         dst=_known(_name(doc["dst"], "edge destination type", path), names, path),
                         num_edges=_int(doc["num_edges"], "num_edges", path))


def type_files(entry: TypesEntry) -> list[tuple[str, str, int]]:
    """``(what, file name, bytes)`` of every file the section names: ``type_per_edge`` and the features."""
    files = [("type_per_edge", entry.type_per_edge.file, entry.type_per_edge.nbytes)]
    files += [(f"features of node type {t.name!r}", t.features.file, t.features.nbytes)
              for t in entry.node_types if t.features is not None]
    return files
