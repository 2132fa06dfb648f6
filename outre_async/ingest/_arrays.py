"""In-memory arrays (numpy or torch) → a dataset: :func:`write_dataset` and the checks that PyG
and npz inputs share, run on shapes and dtypes before the edge sort starts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ._source import EDGE_BLOCK, EdgeChunks, PathLike, Source, parse_options, write_source

FEATURE_BLOCK = 32 << 20  # bytes of feature rows handed to the writer per block


def write_dataset(
    out: PathLike,
    *,
    edge_index: Any,
    num_nodes: int | None = None,
    x: Any = None,
    y: Any = None,
    train_idx: Any = None,
    val_idx: Any = None,
    test_idx: Any = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write numpy/torch arrays as a dataset: ``edge_index`` [2, E] (row 0 source), ``x`` [N, D],
    ``y`` [N] (-1 = unlabelled; NaN in float labels too), splits as node ids or boolean masks [N].

    ``num_nodes`` defaults to the rows of ``x``, else ``len(y)``, else max edge id + 1.
    """
    o = parse_options(opts)
    splits = {"train": train_idx, "val": val_idx, "test": test_idx}
    return write_source(
        out, array_source(edge_index, num_nodes, x, y, splits, num_classes, "arrays", "arrays"), o
    )


def array_source(
    edge_index: Any,
    num_nodes: int | None,
    x: Any,
    y: Any,
    splits: dict[str, Any],
    num_classes: int | None,
    description: str,
    fmt: str,
) -> Source:
    """Validate shapes and dtypes up front (before the sort) and wrap the arrays as a source."""
    ei = _edge_index(edge_index, description)
    feats = None if x is None else (x if isinstance(x, CSRFeatures) else _dense(x, description))
    given = {k: _numpy(v) for k, v in splits.items() if v is not None}
    n = _resolve_num_nodes(num_nodes, feats, y, given, description)
    labels = None if y is None or n is None else _labels(y, n, description)
    ids = {k: _split_ids(v, n, k, description) for k, v in given.items()}
    return Source(
        description=description,
        format=fmt,
        num_nodes=n,
        num_classes=num_classes,
        edges=lambda: _edge_chunks(ei),
        feature_dim=0 if feats is None else int(feats.shape[1]),
        features=None if feats is None else lambda n: _feature_blocks(feats, n),
        feature_dtype=str(getattr(feats, "dtype", "")) or None,  # sparse (CSR) features have none: densified float32
        labels=None if labels is None else lambda n: labels,
        splits=lambda n: ids,
    )


def _numpy(value: Any) -> np.ndarray:
    """numpy view of a numpy array, torch tensor or sequence (torch tensors are moved to CPU)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _edge_index(value: Any, description: str) -> np.ndarray:
    ei = _numpy(value)
    if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
        hint = "; transpose it" if ei.ndim == 2 and ei.shape[1] == 2 else ""
        raise InvalidGraphError(
            f"{description}: edge_index must be an integer array of shape [2, E], "
            f"got {ei.dtype} {list(ei.shape)}{hint}"
        )
    return ei


def _edge_chunks(ei: np.ndarray) -> EdgeChunks:
    for start in range(0, ei.shape[1], EDGE_BLOCK):
        yield ei[0, start : start + EDGE_BLOCK], ei[1, start : start + EDGE_BLOCK]


def _dense(x: Any, description: str) -> np.ndarray:
    if str(getattr(x, "dtype", "")) == "torch.bfloat16":  # numpy has no bfloat16: .numpy() would raise a TypeError
        if getattr(x, "ndim", 0) != 2 or x.shape[1] == 0:
            raise InvalidGraphError(f"{description}: x must be a real [num_nodes, dim] array, got bfloat16 {list(x.shape)}")
        return BFloat16Rows(x)
    arr = _numpy(x)
    if (
        arr.ndim != 2
        or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_)
        or np.issubdtype(arr.dtype, np.complexfloating)
    ):
        raise InvalidGraphError(
            f"{description}: x must be a real [num_nodes, dim] array, "
            f"got {arr.dtype} {list(arr.shape)}"
        )
    if arr.shape[1] == 0:
        raise InvalidGraphError(
            f"{description}: x has 0 columns; leave x out for a topology-only dataset"
        )
    return arr


def _resolve_num_nodes(
    num_nodes: int | None, feats: Any, y: Any, splits: dict[str, np.ndarray], description: str
) -> int | None:
    """The given count, else the rows of x, of y or of a boolean mask; x must agree with it."""
    rows = None if feats is None else int(feats.shape[0])
    if num_nodes is not None and rows is not None and rows != num_nodes:
        raise InvalidGraphError(f"{description}: x has {rows} rows but num_nodes is {num_nodes}")
    masks = [len(v) for v in splits.values() if v.dtype == np.bool_ and v.ndim == 1]
    for candidate in (num_nodes, rows, None if y is None else len(_numpy(y)), *masks):
        if candidate is not None:
            return int(candidate)
    return None


def _labels(y: Any, n: int, description: str) -> np.ndarray:
    """Class ids [n] as int64; float labels may use NaN for unlabelled (→ -1), like OGB's."""
    arr = _numpy(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise InvalidGraphError(
            f"{description}: y has shape {list(arr.shape)}, expected [{n}] "
            "(one class id per node; multi-label targets are not supported)"
        )
    if np.issubdtype(arr.dtype, np.floating):
        arr = np.where(np.isnan(arr), -1.0, arr)
        if (arr != np.round(arr)).any():
            raise InvalidGraphError(
                f"{description}: y holds non-integer values; labels are class ids"
            )
    elif not np.issubdtype(arr.dtype, np.integer):
        raise InvalidGraphError(f"{description}: y must hold integer class ids, got {arr.dtype}")
    return arr.astype(np.int64)


def _split_ids(value: np.ndarray, n: int | None, name: str, description: str) -> np.ndarray:
    """Node ids of a split given as ids or as a boolean mask over the nodes."""
    if value.dtype != np.bool_:
        return value
    if value.shape != (n,):
        raise InvalidGraphError(
            f"{description}: {name} mask has shape {list(value.shape)}, expected [{n}]"
        )
    return np.flatnonzero(value)


class BFloat16Rows:
    """A torch bfloat16 matrix as numpy sees it: its 16-bit words, widened exactly to float32 row
    blocks on slicing (stored bfloat16 again by default: no precision to gain, twice the bytes)."""

    dtype = "bfloat16"

    def __init__(self, x: Any) -> None:
        import torch

        self.words = x.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16)
        self.shape = self.words.shape

    def __getitem__(self, rows: slice) -> np.ndarray:
        return (self.words[rows].astype(np.uint32) << np.uint32(16)).view(np.float32)


def _feature_blocks(feats: Any, n: int) -> Iterator[np.ndarray]:
    """Row blocks of ~FEATURE_BLOCK bytes of a dense array or a :class:`CSRFeatures`."""
    if feats.shape[0] != n:
        raise InvalidGraphError(f"feature row count {feats.shape[0]} != node count {n}")
    step = max(1, FEATURE_BLOCK // (4 * int(feats.shape[1])))
    for start in range(0, n, step):
        yield feats[start : start + step]


@dataclass(frozen=True, slots=True)
class CSRFeatures:
    """Sparse CSR features densified block by block (``x[a:b]`` returns a dense float32 block)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(self.shape[0])
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        block = np.zeros((stop - start, self.shape[1]), dtype=np.float32)
        row = np.repeat(np.arange(stop - start), np.diff(self.indptr[start : stop + 1]))
        # add.at, not assignment: duplicate (row, col) entries sum, as scipy's todense() does
        np.add.at(block, (row, self.indices[lo:hi]), self.data[lo:hi])
        return block
