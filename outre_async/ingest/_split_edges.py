"""``oa.split_edges``: a copy of a dataset whose message-passing graph lacks held-out edges, with the
train/val/test *supervision* pairs stored beside it (link prediction; PyG ``RandomLinkSplit`` semantics).

* Candidates are the distinct node pairs of the graph, self loops left out (they stay in message
  passing); in an undirected graph (every edge has its reverse) a pair is ``u < v`` and both of its
  directions (and every parallel copy) leave message passing together.
* ``val`` and ``test`` shares of the candidates are drawn with ``seed`` and removed from message
  passing; the rest are training pairs.  With ``disjoint_train_ratio`` that share of the training
  pairs is supervision only (out of message passing, PyG's meaning) and the ``train`` split holds
  only them; otherwise ``train`` holds every training pair (all still in message passing).
* ``val_neg`` / ``test_neg``: fixed evaluation negatives, ``eval_negatives`` per positive, drawn
  uniformly over all node pairs (like PyG's loader, they may contain a true edge).

The splits are disjoint by construction and the output is written atomically by
:class:`DatasetWriter` (features copied block by block).  This first version holds O(E) int64 pair
keys in memory (about 40 bytes per edge): a streaming split is later work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidGraphError
from ..store import Dataset, DatasetWriter, open_dataset

_ROW_BLOCK = 1 << 16  # feature rows copied per block


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeSplit:
    """What :func:`split_edges` drew: pair keys (``u * N + v``) of each split and the edges kept."""

    train: np.ndarray          # supervision pairs of the train split, as keys
    val: np.ndarray
    test: np.ndarray
    keep: np.ndarray           # bool per CSC edge: stays in message passing
    undirected: bool


def split_edges(ds_path: str | os.PathLike[str] | Dataset, out_path: str | os.PathLike[str], *, val: float = 0.05,
                test: float = 0.1, seed: int = 0, undirected: bool | None = None, disjoint_train_ratio: float = 0.0,
                eval_negatives: int = 1, overwrite: bool = False) -> Path:
    """Write ``out_path``: ``ds_path`` without its held-out edges, with edge splits (module docstring).
    ``undirected=None``: detected (every edge has its reverse); True on a graph that is not is an error."""
    _check_fractions(val, test, disjoint_train_ratio)
    if isinstance(eval_negatives, bool) or not isinstance(eval_negatives, int) or eval_negatives < 0:
        raise ConfigError(f"eval_negatives={eval_negatives!r} must be an int >= 0 (negatives per val/test positive)")
    ds = ds_path if isinstance(ds_path, Dataset) else open_dataset(ds_path)
    drawn = draw_split(ds.indptr, ds.indices, ds.num_nodes, val=val, test=test, seed=seed, undirected=undirected,
                       disjoint_train_ratio=disjoint_train_ratio)
    rng = np.random.default_rng([seed, 1])  # the negatives' own stream: the positives do not shift them
    n = ds.num_nodes
    meta = {**ds.manifest.meta, "edge_split": {"val": val, "test": test, "seed": seed, "undirected": drawn.undirected,
                                               "disjoint_train_ratio": disjoint_train_ratio,
                                               "eval_negatives": eval_negatives, "source": str(ds.path)}}
    fmt = ds.row_format if ds.feature_dim else None  # rows copied as stored: the encoding and scales kept
    with DatasetWriter(out_path, num_nodes=n, feature_dim=ds.feature_dim,
                       feature_dtype=fmt.encoding if fmt else "float32",
                       feature_scale=fmt.scale if fmt else None, feature_zero=fmt.zero if fmt else None,
                       num_classes=ds.num_classes if ds.labels is not None else None,
                       row_layout=ds.row_layout.layout if ds.feature_dim else "auto",  # type: ignore[arg-type]
                       overwrite=overwrite, meta=meta) as w:
        _write_topology(w, ds, drawn.keep)
        _copy_node_data(w, ds)
        for name, keys in (("train", drawn.train), ("val", drawn.val), ("test", drawn.test)):
            w.write_edge_split(name, _pairs(keys, n))
        if eval_negatives:
            w.write_edge_split("val_neg", rng.integers(0, n, size=(2, len(drawn.val) * eval_negatives)))
            w.write_edge_split("test_neg", rng.integers(0, n, size=(2, len(drawn.test) * eval_negatives)))
    return Path(out_path)


def draw_split(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, *, val: float, test: float, seed: int,
               undirected: bool | None, disjoint_train_ratio: float) -> EdgeSplit:
    """Draw the split of a CSC graph (pure: arrays in, keys and the kept-edge mask out)."""
    n = np.int64(num_nodes)
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
    src = np.asarray(indices, dtype=np.int64)
    keys = src * n + dst
    symmetric = bool(np.isin(dst * n + src, keys).all())
    if undirected is None:
        undirected = symmetric
    elif undirected and not symmetric:
        missing = int(np.argmin(np.isin(dst * n + src, keys)))
        raise InvalidGraphError(f"undirected=True, but edge {int(src[missing])} -> {int(dst[missing])} has no reverse; "
                                "pass undirected=False (or None to detect it)")
    # each edge's pair key: an undirected pair is named by (min, max), so both directions share it
    pair = np.minimum(src, dst) * n + np.maximum(src, dst) if undirected else keys
    candidates = np.unique(pair[src != dst])
    rng = np.random.default_rng([seed, 0])
    order = rng.permutation(candidates)
    n_val, n_test = int(val * len(order)), int(test * len(order))
    val_keys, test_keys, train_keys = order[:n_val], order[n_val:n_val + n_test], order[n_val + n_test:]
    n_sup = int(disjoint_train_ratio * len(train_keys))
    supervision_only = train_keys[:n_sup]
    held = np.concatenate([val_keys, test_keys, supervision_only])
    keep = ~np.isin(pair, held)
    if not keep.any():
        raise InvalidGraphError("the split leaves no edge for message passing; hold out smaller val/test shares")
    return EdgeSplit(train=supervision_only if n_sup else train_keys, val=val_keys, test=test_keys, keep=keep,
                     undirected=undirected)


def _check_fractions(val: float, test: float, disjoint_train_ratio: float) -> None:
    for name, value in (("val", val), ("test", test), ("disjoint_train_ratio", disjoint_train_ratio)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise ConfigError(f"{name}={value!r} must be a fraction in [0, 1)")
    if val + test >= 1:
        raise ConfigError(f"val + test = {val + test} leaves no training edges; pass shares that sum below 1")


def _pairs(keys: np.ndarray, num_nodes: int) -> np.ndarray:
    """``[2, k]`` (source, target) from ``u * N + v`` keys."""
    return np.stack([keys // num_nodes, keys % num_nodes]).astype(np.int64)


def _write_topology(w: DatasetWriter, ds: Dataset, keep: np.ndarray) -> None:
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])  # kept edges before each CSC position
    w.write_csc(kept_before[np.asarray(ds.indptr)], np.asarray(ds.indices)[keep])


def _copy_node_data(w: DatasetWriter, ds: Dataset) -> None:
    """Features (block by block), labels, node splits and a reordered dataset's ids, as they are."""
    if ds.feature_dim:
        for start in range(0, ds.num_nodes, _ROW_BLOCK):
            w.append_stored_features(np.asarray(ds.features[start:start + _ROW_BLOCK]))
    if ds.labels is not None:
        w.write_labels(ds.labels)
    for name in ds.split_names:
        w.write_split(name, ds.split(name))
    if ds.reordered:
        w.write_node_ids(ds.original_ids(np.arange(ds.num_nodes)))


def split_summary(path: Path) -> dict[str, Any]:
    """What the CLI prints: the new dataset's edges and the size of each edge split."""
    ds = open_dataset(path)
    return {"path": str(path), "num_edges": ds.num_edges,
            "edge_splits": {name: int(ds.manifest.edge_splits[name].shape[1]) for name in ds.edge_split_names}}
