"""The files a typed dataset adds, written into a :class:`DatasetWriter`'s temporary folder.

Kept apart from the writer so that it stays about the homogeneous layout; the writer's
:class:`~outre_async.store._typed_section.TypedSection` calls these and puts the returned entries into
the manifest's ``types`` section (``_type_manifest``).  Like the rest of
the writer they only ever write inside the temporary folder, which is renamed into place whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import InvalidGraphError
from ._layout import RowLayoutName, choose_row_layout
from ._manifest import FeatureEntry, FileEntry
from ._type_manifest import EdgeTypeEntry, NodeTypeEntry, TypesEntry, type_per_edge_dtype
from ._type_names import EdgeType, check_type_name


def feature_file_name(node_type: str) -> str:
    """``features__<type>.bin``: unambiguous, as a type name never holds ``__``."""
    return f"features__{node_type}.bin"


def write_type_features(tmp: Path, node_type: str, count: int, blocks: Iterable[np.ndarray], *, dim: int,
                        dtype: str, row_layout: RowLayoutName) -> FeatureEntry:
    """Write ``count`` rows of ``dim`` values (handed in as row blocks, in node order) as ``dtype``."""
    dt = np.dtype(dtype)
    layout = choose_row_layout(dim * dt.itemsize, row_layout)
    width, rows = layout.stride // dt.itemsize, 0
    with open(tmp / feature_file_name(node_type), "xb") as f:
        for block in blocks:
            block = np.asarray(block)
            if block.ndim != 2 or block.shape[1] != dim:
                raise InvalidGraphError(f"feature rows of node type {node_type!r} must have shape [k, {dim}], "
                                        f"got {list(block.shape)}")
            if rows + len(block) > count:
                raise InvalidGraphError(f"node type {node_type!r} has {count} nodes but more feature rows were given; "
                                        "pass one row per node of the type")
            if not np.isfinite(block).all():
                raise InvalidGraphError(f"feature rows {rows}..{rows + len(block)} of node type {node_type!r} "
                                        "hold NaN or inf; clean the features first")
            padded = np.zeros((len(block), width), dtype=dt)
            padded[:, :dim] = block
            f.write(padded.data)
            rows += len(block)
        f.flush()
        os.fsync(f.fileno())
    if rows != count:
        raise InvalidGraphError(f"node type {node_type!r} has {count} nodes but {rows} feature rows; "
                                "pass one row per node of the type")
    return FeatureEntry(file=feature_file_name(node_type), dtype=dt.name, dim=dim, row_bytes=layout.row_bytes,
                        stride=layout.stride, layout=layout.layout, nbytes=count * layout.stride)


def check_schema(node_types: Sequence[tuple[str, int]], edge_types: Sequence[EdgeType], num_nodes: int) -> None:
    """Names valid and distinct, counts summing to ``num_nodes``, edge types naming declared node types."""
    names = [check_type_name(name, "node type", InvalidGraphError) for name, _ in node_types]
    if len(set(names)) != len(names):
        raise InvalidGraphError(f"node types {names} list a name twice; name each type once")
    if sum(int(c) for _, c in node_types) != num_nodes or any(int(c) < 0 for _, c in node_types):
        raise InvalidGraphError(f"node type counts {[int(c) for _, c in node_types]} must be >= 0 and sum to "
                                f"num_nodes={num_nodes}")
    if not edge_types or len(set(edge_types)) != len(edge_types):
        raise InvalidGraphError(f"edge types {list(edge_types)} must be at least one, each listed once")
    for et in edge_types:
        for part, what in zip(et, ("edge source type", "relation", "edge destination type")):
            check_type_name(part, what, InvalidGraphError)
        if et[0] not in names or et[2] not in names:
            raise InvalidGraphError(f"edge type {et} names a node type not among {names}; declare it first")


def write_type_per_edge(tmp: Path, type_per_edge: np.ndarray, indptr: np.ndarray, num_edge_types: int) -> FileEntry:
    """Check ``type_per_edge`` (ids in range, each neighbour list sorted by it) and write it."""
    tpe = np.asarray(type_per_edge)
    num_edges = int(indptr[-1])
    if tpe.shape != (num_edges,) or (tpe.size and not np.issubdtype(tpe.dtype, np.integer)):
        raise InvalidGraphError(f"type_per_edge must be {num_edges} integer edge type ids, got {tpe.dtype} "
                                f"{list(tpe.shape)}")
    if tpe.size and (tpe.min() < 0 or tpe.max() >= num_edge_types):
        raise InvalidGraphError(f"type_per_edge holds {int(tpe.max())}, outside [0, {num_edge_types}) edge types")
    falls = np.flatnonzero(np.diff(tpe.astype(np.int64)) < 0) + 1  # positions where the type drops
    starts = np.zeros(num_edges + 1, bool)
    starts[indptr] = True
    if len(falls) and not starts[falls].all():
        at = int(falls[~starts[falls]][0])
        raise InvalidGraphError(f"type_per_edge is not sorted within a neighbour list (at edge {at}); sort each "
                                "list by edge type")
    data = np.ascontiguousarray(tpe, dtype=type_per_edge_dtype(num_edge_types))
    (tmp / "type_per_edge.bin").write_bytes(data.data)
    return FileEntry(file="type_per_edge.bin", dtype=data.dtype.name, shape=(num_edges,), nbytes=data.nbytes)


def types_entry(node_types: Sequence[tuple[str, int]], edge_types: Sequence[EdgeType], type_per_edge: FileEntry,
                edge_counts: np.ndarray, features: dict[str, FeatureEntry], target_types: Sequence[str]) -> TypesEntry:
    """The manifest section of what was written."""
    return TypesEntry(
        node_types=tuple(NodeTypeEntry(name=n, count=int(c), features=features.get(n)) for n, c in node_types),
        edge_types=tuple(EdgeTypeEntry(src=s, rel=r, dst=d, num_edges=int(k))
                         for (s, r, d), k in zip(edge_types, edge_counts)),
        type_per_edge=type_per_edge, target_types=tuple(target_types),
    )


def check_targets(names: list[str], counts: list[int], target_types: Sequence[str], labels: np.ndarray | None,
                  split_ids: dict[str, np.ndarray]) -> None:
    """Labels (>= 0) and split ids only on the target types, and target types only with labels."""
    if target_types and labels is None:
        raise InvalidGraphError(f"target types {list(target_types)} are named but no labels were written")
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    on_target = np.zeros(len(names), bool)
    on_target[[names.index(t) for t in target_types]] = True
    if labels is not None:
        labelled = np.flatnonzero(labels >= 0)
        kinds = np.searchsorted(offsets, labelled, side="right") - 1
        if len(labelled) and not on_target[kinds].all():
            bad = names[int(kinds[~on_target[kinds]][0])]
            raise InvalidGraphError(f"node type {bad!r} holds labels but is not a target type "
                                    f"({list(target_types)}); label only the target types")
    for split, ids in split_ids.items():
        kinds = np.searchsorted(offsets, ids, side="right") - 1
        if len(ids) and not on_target[kinds].all():
            bad = names[int(kinds[~on_target[kinds]][0])]
            raise InvalidGraphError(f"split {split!r} holds nodes of type {bad!r}, which has no labels; "
                                    f"splits name nodes of the target types {list(target_types)}")
