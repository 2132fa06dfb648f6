"""PyG ``HeteroData`` → :class:`HeteroArrays` (written by ``_hetero.write_hetero``).

Per node type it reads ``num_nodes`` (set explicitly, else the rows of ``x``, else the length of ``y``
or of a split mask), ``x``, ``y`` and the splits (``{train,val,test}_{mask,idx}``, ``valid_idx``); per
edge type ``edge_index``.  Other per-edge data (``edge_attr``, ...) is refused by name unless
``drop_edge_features`` (as for homogeneous graphs, ``_edge_features``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidGraphError
from ._edge_features import check_edge_features
from ._hetero import HeteroArrays

SPLIT_KEYS = {"train": ("train_idx", "train_mask"), "val": ("val_idx", "valid_idx", "val_mask"),
              "test": ("test_idx", "test_mask")}


def is_hetero_data(data: Any) -> bool:
    return hasattr(data, "node_types") and hasattr(data, "edge_types") and not isinstance(data, dict)


def hetero_from_pyg(data: Any, description: str, *, drop_edge_features: bool = False) -> HeteroArrays:
    """Read ``data`` (a ``HeteroData``) into :class:`HeteroArrays`; ids stay local to their type."""
    counts, x, y, splits = {}, {}, {}, {}
    for t in data.node_types:
        store = data[t]
        counts[t] = _num_nodes(t, store, description)
        x[t], y[t] = store.get("x"), store.get("y")
        splits[t] = {name: next((store[k] for k in keys if store.get(k) is not None), None)
                     for name, keys in SPLIT_KEYS.items()}
    edges = {}
    for et in data.edge_types:
        store = data[et]
        if store.get("edge_index") is None:
            raise InvalidGraphError(f"{description}: edge type {et} has no edge_index; give every edge type one")
        check_edge_features(list(store.keys()), f"{description} (edge type {et})", drop=drop_edge_features)
        edges[tuple(et)] = store["edge_index"]
    return HeteroArrays(description=description, format="pyg-hetero", num_nodes=counts, edge_index=edges,
                        x=x, y=y, splits=splits)


def _num_nodes(t: str, store: Any, description: str) -> int:
    """The node count of type ``t``: set explicitly, else what ``x``, ``y`` or a mask imply (never PyG's
    inference from edge ids, which warns and undercounts isolated nodes)."""
    if "num_nodes" in store and store["num_nodes"] is not None:
        return int(store["num_nodes"])
    for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
        value = store.get(key)
        if value is not None and hasattr(value, "shape") and len(value.shape) >= 1:
            return int(value.shape[0])
    raise InvalidGraphError(f"{description}: node type {t!r} has no num_nodes, x or y to count its nodes; set "
                            f"data[{t!r}].num_nodes")
