"""What a :class:`DatasetWriter` holds for a typed dataset, from ``write_types`` to the manifest.

The writer keeps the homogeneous layout; once ``write_types`` declares node and edge types it hands
them here: this object checks the schema, writes ``type_per_edge`` and each type's feature file into
the writer's temporary folder (``_typed_writes``), checks at commit that labels and splits sit only
on the target types, and builds the manifest's ``types`` section (``_type_manifest``).  Like the
rest of the writer it only ever writes inside the temporary folder, which is renamed into place
whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidGraphError
from ._layout import RowLayoutName
from ._manifest_entries import FeatureEntry
from ._type_manifest import TypesEntry
from ._type_names import EdgeType
from ._typed_writes import check_schema, check_targets, types_entry, write_type_features, write_type_per_edge


class TypedSection:
    """The node types ``(name, count)`` in global id order, the edge types, the ``type_per_edge``
    entry and per-type edge counts, the target types, and each node type's feature entry."""

    def __init__(self, tmp: Path, indptr: np.ndarray, num_nodes: int, node_types: list[tuple[str, int]],
                 edge_types: list[EdgeType], type_per_edge: np.ndarray, *, target_types: tuple[str, ...],
                 row_layout: RowLayoutName) -> None:
        check_schema(node_types, edge_types, num_nodes)
        names = [n for n, _ in node_types]
        for t in target_types:
            if t not in names:
                raise InvalidGraphError(f"target type {t!r} is not among the node types {names}")
        self._tmp, self._row_layout = tmp, row_layout
        self._type_per_edge = write_type_per_edge(tmp, type_per_edge, indptr, len(edge_types))
        self._edge_counts = np.bincount(np.asarray(type_per_edge, np.int64), minlength=len(edge_types))
        self._node_types = [(n, int(c)) for n, c in node_types]
        self._edge_types = list(edge_types)
        self._target_types = tuple(target_types)
        self._features: dict[str, FeatureEntry] = {}

    def write_features(self, node_type: str, blocks: Any, *, dim: int, dtype: str) -> None:
        """Write the features of ``node_type`` once (see :meth:`DatasetWriter.write_type_features`)."""
        counts = dict(self._node_types)
        if node_type not in counts:
            raise InvalidGraphError(f"node type {node_type!r} is not among {list(counts)}")
        if node_type in self._features:
            raise ConfigError(f"the features of node type {node_type!r} were written already")
        if dtype not in ("float32", "float16") or dim <= 0:
            raise ConfigError(f"typed features need dim >= 1 and dtype float32 or float16, got {dim=} {dtype=}")
        self._features[node_type] = write_type_features(self._tmp, node_type, counts[node_type], blocks,
                                                        dim=dim, dtype=dtype, row_layout=self._row_layout)

    def check_targets(self, labels: np.ndarray | None, split_ids: dict[str, np.ndarray]) -> None:
        """Labels and split ids only on the target types (at commit, once both are written)."""
        check_targets([n for n, _ in self._node_types], [c for _, c in self._node_types], self._target_types,
                      labels, split_ids)

    def entry(self) -> TypesEntry:
        """The manifest's ``types`` section of what was written."""
        return types_entry(self._node_types, self._edge_types, self._type_per_edge, self._edge_counts,
                           self._features, self._target_types)
