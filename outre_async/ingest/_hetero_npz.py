"""The hetero ``.npz`` schema of ``shared/data/README.md`` → :class:`HeteroArrays`.

An archive is heterogeneous when it holds ``node_types``: fixed-width unicode arrays ``node_types``
and ``edge_types`` (``src__rel__dst``), per node type ``T`` ``num_nodes__T``, optional features
``x__T`` (dense) or ``x__T_indptr/_indices/_data/_shape`` (CSR), labels ``y__T`` and splits
``{train,val,test}_idx__T``; per edge type ``edge_index__src__rel__dst``.  :func:`from_npz` routes such
an archive here, so ``outre convert graph.npz`` takes both schemas.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputFormatError
from ..store._type_names import edge_type_str, parse_edge_type
from ._hetero import HeteroArrays
from ._npz_members import csr_features, scalar_int


def is_hetero(arrays: dict[str, np.ndarray]) -> bool:
    return "node_types" in arrays


def hetero_arrays(arrays: dict[str, np.ndarray], path: Path) -> HeteroArrays:
    """Read the typed schema out of the members of one archive (each key checked present)."""
    node_types = [str(t) for t in _names(arrays, "node_types", path)]
    edge_types = [parse_edge_type(str(e), InputFormatError) for e in _names(arrays, "edge_types", path)]
    counts = {t: scalar_int(_member(arrays, f"num_nodes__{t}", path), f"num_nodes__{t}", path) for t in node_types}
    x = {}
    for t in node_types:
        csr = [f"x__{t}_{part}" for part in ("indptr", "indices", "data", "shape")]
        if f"x__{t}" in arrays:
            x[t] = arrays[f"x__{t}"]
        elif any(k in arrays for k in csr):
            x[t] = csr_features(*(_member(arrays, k, path) for k in csr), path)
    return HeteroArrays(
        description=str(path), format="npz-hetero", num_nodes=counts,
        edge_index={et: _member(arrays, f"edge_index__{edge_type_str(et)}", path) for et in edge_types},
        x=x,
        y={t: arrays[f"y__{t}"] for t in node_types if f"y__{t}" in arrays},
        splits={t: {s: arrays.get(f"{s}_idx__{t}") for s in ("train", "val", "test")} for t in node_types},
    )


def _names(arrays: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    value = _member(arrays, key, path)
    if value.ndim != 1 or value.dtype.kind != "U":
        raise InputFormatError(f"{key} must be a 1-D unicode array of names, got {value.dtype} {list(value.shape)}",
                               path=path)
    return value


def _member(arrays: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    if key not in arrays:
        raise InputFormatError(f"the hetero schema needs a member {key!r}, which is missing (have "
                               f"{sorted(arrays)[:12]}...)", path=path)
    return arrays[key]
