"""PyG ``Data`` or ``HeteroData`` → a dataset, in memory (:func:`from_pyg`) or from a ``torch.save``-d file.

Loading a ``.pt`` file unpickles it (``torch.load(weights_only=False)``), which can run code stored
in the file: convert only files you trust, or re-save them as ``.npz``."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputFormatError, InvalidGraphError
from ._arrays import array_source
from ._edge_features import EDGE_KEYS, check_edge_features
from ._pyg_hetero import hetero_from_pyg, is_hetero_data
from ._source import ConvertOptions, PathLike, Source, existing_path, parse_options, write_source


def from_pyg(
    data: Any,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write a PyG ``Data``: ``edge_index``, ``x``, ``y``, and the splits as
    ``{train,val,test}_{mask,idx}`` (``valid_idx`` too).  ``num_nodes`` defaults to
    ``data.num_nodes`` where it was set explicitly, else as in :func:`write_dataset`.

    A ``HeteroData`` becomes a typed dataset (``Dataset.node_types``, per-type features, labels and
    splits on the types that have them; see ``_pyg_hetero``); ``num_nodes`` does not apply to it."""
    o = parse_options(opts)
    if is_hetero_data(data):
        return _write_hetero(data, out, num_nodes, num_classes, "PyG HeteroData", o)
    return write_source(out, _pyg_source(data, num_nodes, num_classes, "PyG Data", "pyg", o.drop_edge_features), o)


def _pyg_source(
    data: Any, num_nodes: int | None, num_classes: int | None, description: str, fmt: str,
    drop_edge_features: bool = False,
) -> Source:
    get = data.get if isinstance(data, dict) else (lambda key: getattr(data, key, None))
    if get("edge_index") is None:
        raise InvalidGraphError(
            f"{description} has no edge_index; only edge_index graphs are supported"
        )
    check_edge_features(_edge_keys(data), description, drop=drop_edge_features)
    if num_nodes is None and _has_key(data, "num_nodes"):
        num_nodes = int(get("num_nodes"))  # type: ignore[arg-type]  # _has_key checked it
    splits = {}
    for name, keys in (
        ("train", ("train_idx", "train_mask")),
        ("val", ("val_idx", "valid_idx", "val_mask")),
        ("test", ("test_idx", "test_mask")),
    ):
        splits[name] = next((get(k) for k in keys if get(k) is not None), None)
    return array_source(
        get("edge_index"), num_nodes, get("x"), get("y"), splits, num_classes, description, fmt
    )


def _edge_keys(data: Any) -> list[str]:
    """Keys holding per-edge data: the known names, and whatever PyG itself counts as an edge attribute."""
    keys = list(data.keys()) if callable(getattr(data, "keys", None)) else []
    found = [k for k in EDGE_KEYS if _has_key(data, k)]
    is_edge_attr = getattr(data, "is_edge_attr", None)
    if callable(is_edge_attr):
        found += [k for k in keys if k not in found and k != "edge_index" and _safe(is_edge_attr, k)]
    return found


def _safe(is_edge_attr: Any, key: str) -> bool:
    try:
        return bool(is_edge_attr(key))
    except Exception:  # PyG's heuristic on odd values: not an edge attribute we can name
        return False


def _has_key(data: Any, key: str) -> bool:
    """Whether ``key`` was set explicitly (PyG infers ``num_nodes`` with a warning otherwise)."""
    try:
        return key in data and data[key] is not None
    except (TypeError, KeyError, AttributeError):
        return getattr(data, key, None) is not None


def from_pt(
    path: PathLike,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """A torch-saved PyG ``Data``; see the module docstring for the trust caveat of unpickling."""
    o = parse_options(opts)
    path = existing_path(path)
    data = _load_pt(path)
    if is_hetero_data(data):
        return _write_hetero(data, out, num_nodes, num_classes, str(path), o)
    src = _pyg_source(data, num_nodes, num_classes, str(path), "pyg", o.drop_edge_features)
    return write_source(out, src, o)


def _write_hetero(data: Any, out: PathLike, num_nodes: int | None, num_classes: int | None, description: str,
                  o: ConvertOptions) -> Path:
    if num_nodes is not None:
        raise ConfigError(f"{description} is heterogeneous: num_nodes={num_nodes} does not apply (each node type "
                          "has its own count, data[type].num_nodes); drop it")
    from ._hetero import write_hetero

    return write_hetero(out, hetero_from_pyg(data, description, drop_edge_features=o.drop_edge_features), o,
                        num_classes)


def _load_pt(path: Path) -> Any:
    import torch

    try:  # weights_only=False unpickles, i.e. may run code from the file: trusted input only
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except (
        OSError,
        RuntimeError,
        EOFError,
        pickle.UnpicklingError,
        ImportError,
        AttributeError,
        ValueError,
    ) as exc:
        raise InputFormatError(f"cannot load as a torch-saved PyG Data: {exc}", path=path) from exc
    if isinstance(obj, dict) or hasattr(obj, "edge_index") or is_hetero_data(obj):
        return obj
    raise InputFormatError(
        f"holds a {type(obj).__name__}, expected a torch_geometric.data.Data", path=path
    )
