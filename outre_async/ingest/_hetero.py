"""Heterogeneous graphs (node and edge types) → a typed dataset: checks, the typed CSC, the write.

Every importer of a typed graph (the hetero npz schema, PyG ``HeteroData``) describes it as
:class:`HeteroArrays`, with ids *local to their type* as the inputs hold them.  :func:`write_hetero`
checks all of it before anything is written (type names, edge types naming declared node types, ids in
range for their type, feature rows and labels agreeing with the type's count, splits only on labelled
types), then lays the types out as contiguous global id ranges in the order given and writes one CSC
over global ids with ``type_per_edge`` beside it, each neighbour list sorted by edge type, then by
source id (``store._type_manifest``).

The typed CSC is sorted in memory (``np.lexsort``, about 40 bytes an edge): the inputs these importers
read are in memory already.  A graph whose edges do not fit needs the external sort of ``_csc_builder``
to carry an edge type; it does not yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidGraphError, NotSupportedError
from ..store._type_names import EdgeType, check_type_name
from ..store._writer import DatasetWriter
from ._arrays import CSRFeatures, _dense, _feature_blocks, _labels, _numpy, _split_ids
from ._source import ConvertOptions, PathLike


@dataclass(frozen=True, kw_only=True, slots=True)
class HeteroArrays:
    """A typed graph as an importer read it: per node type its count, features (None: featureless),
    labels and splits (ids or boolean masks, local to the type); per edge type its ``[2, E]`` pairs,
    row 0 ids of the source type, row 1 of the destination type."""

    description: str
    format: str
    num_nodes: dict[str, int]
    edge_index: dict[EdgeType, Any]
    x: dict[str, Any] = field(default_factory=dict)
    y: dict[str, Any] = field(default_factory=dict)
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Checked:
    """What :func:`_check` hands to the write: numpy arrays, validated."""

    edges: dict[EdgeType, np.ndarray]
    x: dict[str, np.ndarray | CSRFeatures]
    y: dict[str, np.ndarray]
    splits: dict[str, dict[str, np.ndarray]]


def write_hetero(out: PathLike, g: HeteroArrays, o: ConvertOptions, num_classes: int | None = None) -> Path:
    """Check ``g`` whole, then write it as one typed dataset at ``out`` (atomically)."""
    if o.undirected:
        raise NotSupportedError(f"{g.description}: undirected=True has no meaning per edge type; add the reverse "
                                "edge types instead (PyG: T.ToUndirected()), then convert")
    c = _check(g)
    names = list(g.num_nodes)
    offsets = np.concatenate([[0], np.cumsum([g.num_nodes[t] for t in names])]).astype(np.int64)
    total = int(offsets[-1])
    indptr, indices, tpe = _typed_csc(c.edges, names, offsets, total, o)
    if len(indices) == 0:
        raise InvalidGraphError(f"empty graph: {g.description} has no edges")
    labels, targets = _global_labels(c.y, names, offsets, total)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with DatasetWriter(out, num_nodes=total, num_classes=num_classes, row_layout=o.row_layout,
                       overwrite=o.overwrite, meta=_meta(g, o, Path(out))) as writer:
        writer.write_csc(indptr, indices)
        writer.write_types([(t, g.num_nodes[t]) for t in names], list(c.edges), tpe, target_types=targets)
        for t, x in c.x.items():
            dtype = o.feature_dtype or ("float16" if getattr(x, "dtype", None) == np.float16 else "float32")
            writer.write_type_features(t, (b.astype(dtype, copy=False) for b in _feature_blocks(x, g.num_nodes[t])),
                                       dim=int(x.shape[1]), dtype=dtype)
        if labels is not None:
            writer.write_labels(labels)
        for split in ("train", "val", "test"):
            ids = [offsets[names.index(t)] + s[split] for t, s in c.splits.items() if split in s]
            if ids:
                writer.write_split(split, np.concatenate(ids))
    return Path(out)


def _check(g: HeteroArrays) -> _Checked:
    if not g.num_nodes:
        raise InvalidGraphError(f"{g.description}: no node types; a typed graph needs at least one")
    for t, n in g.num_nodes.items():
        check_type_name(t, "node type", InvalidGraphError)
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidGraphError(f"{g.description}: node type {t!r} has count {n!r}; expected an integer >= 0")
    edges = {et: _edges(et, ei, g) for et, ei in g.edge_index.items()}
    if not edges:
        raise InvalidGraphError(f"{g.description}: no edge types; a typed graph needs at least one")
    x = {t: _type_features(t, v, g) for t, v in g.x.items() if v is not None}
    y = {t: _labels(v, g.num_nodes[_known(t, "labels", g)], f"{g.description}: node type {t!r}")
         for t, v in g.y.items() if v is not None}
    splits = {t: _type_splits(t, s, y, g) for t, s in g.splits.items() if any(v is not None for v in s.values())}
    return _Checked(edges, x, y, splits)


def _known(t: str, what: str, g: HeteroArrays) -> str:
    if t not in g.num_nodes:
        raise InvalidGraphError(f"{g.description}: {what} of node type {t!r}, which is not among the node types "
                                f"{list(g.num_nodes)}; declare it or fix the name")
    return t


def _edges(et: EdgeType, ei: Any, g: HeteroArrays) -> np.ndarray:
    src, rel, dst = et
    for part, what in ((src, "edge source type"), (rel, "relation"), (dst, "edge destination type")):
        check_type_name(part, what, InvalidGraphError)
    for t in (src, dst):
        if t not in g.num_nodes:
            raise InvalidGraphError(f"{g.description}: edge type {et} names node type {t!r}, which is not among "
                                    f"{list(g.num_nodes)}; declare it (with its node count) or fix the edge type")
    arr = _numpy(ei)
    if arr.ndim != 2 or arr.shape[0] != 2 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise InvalidGraphError(f"{g.description}: edge_index of {et} must be integers of shape [2, E], got "
                                f"{arr.dtype} {list(arr.shape)}")
    for row, t in ((0, src), (1, dst)):
        n = g.num_nodes[t]
        if arr.shape[1] and (arr[row].min() < 0 or arr[row].max() >= n):
            bad = int(arr[row].min()) if arr[row].min() < 0 else int(arr[row].max())
            raise InvalidGraphError(f"{g.description}: edge type {et} row {row} holds id {bad}, outside "
                                    f"[0, {n}) of node type {t!r}; ids are local to their type")
    return arr.astype(np.int64, copy=False)


def _type_features(t: str, v: Any, g: HeteroArrays) -> np.ndarray | CSRFeatures:
    n = g.num_nodes[_known(t, "features", g)]
    x = v if isinstance(v, CSRFeatures) else _dense(v, f"{g.description}: node type {t!r}")
    if x.shape[0] != n:
        raise InvalidGraphError(f"{g.description}: the features of node type {t!r} have {x.shape[0]} rows, the "
                                f"type has {n} nodes; pass one row per node")
    return x


def _type_splits(t: str, splits: dict[str, Any], y: dict[str, np.ndarray], g: HeteroArrays) -> dict[str, np.ndarray]:
    n = g.num_nodes[_known(t, "splits", g)]
    if t not in y:
        raise InvalidGraphError(f"{g.description}: node type {t!r} has splits but no labels; put the splits on the "
                                f"labelled type ({sorted(y) or 'none has labels'})")
    out = {}
    for name, v in splits.items():
        if v is None:
            continue
        ids = _split_ids(_numpy(v), n, name, f"{g.description}: node type {t!r}")
        if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
            raise InvalidGraphError(f"{g.description}: split {name!r} of {t!r} must be 1-D node ids or a mask")
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            raise InvalidGraphError(f"{g.description}: split {name!r} of node type {t!r} holds ids outside [0, {n})")
        out[name] = ids.astype(np.int64, copy=False)
    return out


def _typed_csc(edges: dict[EdgeType, np.ndarray], names: list[str], offsets: np.ndarray, total: int,
               o: ConvertOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, type_per_edge)`` over global ids: lists by target, sorted by edge type, then source."""
    base = {t: offsets[i] for i, t in enumerate(names)}
    src = np.concatenate([ei[0] + base[s] for (s, _, _), ei in edges.items()])
    dst = np.concatenate([ei[1] + base[d] for (_, _, d), ei in edges.items()])
    kind = np.concatenate([np.full(ei.shape[1], i, np.int64) for i, ei in enumerate(edges.values())])
    keep = src != dst if o.drop_self_loops else np.ones(len(src), bool)
    src, dst, kind = src[keep], dst[keep], kind[keep]
    order = np.lexsort((src, kind, dst))
    src, dst, kind = src[order], dst[order], kind[order]
    if o.dedupe and len(src):
        new = np.ones(len(src), bool)
        new[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1]) | (kind[1:] != kind[:-1])
        src, dst, kind = src[new], dst[new], kind[new]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=total))]).astype(np.int64)
    return indptr, src, kind


def _global_labels(y: dict[str, np.ndarray], names: list[str], offsets: np.ndarray,
                   total: int) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """One label per global node, -1 outside the labelled (target) types."""
    if not y:
        return None, ()
    labels = np.full(total, -1, np.int64)
    for t, v in y.items():
        i = names.index(t)
        labels[offsets[i] : offsets[i + 1]] = v
    return labels, tuple(t for t in names if t in y)


def _meta(g: HeteroArrays, o: ConvertOptions, out: Path) -> dict[str, Any]:
    meta = {"name": o.name or out.name, "source": g.description, "format": g.format, "undirected": False,
            "drop_self_loops": o.drop_self_loops, "dedupe": o.dedupe}
    return {**meta, **(o.meta or {})}
