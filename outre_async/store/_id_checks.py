"""Checks of per-node integer arrays: those a :class:`DatasetWriter` records (ids in range, labels
dense from 0, a relabelling that is a permutation) and the node ids a :class:`Dataset` is asked about.

Apart from the writer and the reader because they are pure functions of the arrays and the node
count: the writer calls them before anything is written, so a bad id never reaches a file a kernel
later indexes, and the reader before any id is mapped through a permutation or a type's range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidGraphError
from ._manifest import check_classes


def check_ids(ids: np.ndarray, num_nodes: int, what: str) -> None:
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= num_nodes:
        bad = lo if lo < 0 else hi
        raise InvalidGraphError(f"{what} {bad} is out of range [0, {num_nodes}); check num_nodes or the input ids")


def check_labels(labels: np.ndarray, num_nodes: int, num_classes: int | None) -> tuple[np.ndarray, int]:
    """``labels`` as int64 (``-1``: unlabelled) and the number of classes: the one given, or the one
    the labels imply, which must be dense (a stray label would size the model's output layer)."""
    labels = np.asarray(labels)
    if labels.shape != (num_nodes,) or not np.issubdtype(labels.dtype, np.integer):
        raise InvalidGraphError(f"labels must be integers of shape [{num_nodes}], got {labels.dtype} {labels.shape}")
    labels = labels.astype(np.int64, copy=False)
    if labels.min() < -1:
        raise InvalidGraphError(f"labels must be >= -1 (-1 = unlabelled), found {int(labels.min())}")
    if num_classes is None:
        problem = check_classes(int(labels.max()) + 1, num_nodes)
        if problem is not None:  # a stray label (10**12) would size the model's output layer
            raise InvalidGraphError(f"label {int(labels.max())} makes {problem}; class ids must be dense 0..C-1: "
                                    "renumber the labels (np.unique(y, return_inverse=True)) or fix the stray one")
        num_classes = int(labels.max()) + 1
    elif labels.max() >= num_classes:
        raise InvalidGraphError(
            f"label {int(labels.max())} is outside the class range [0, {num_classes}); fix num_classes or the labels"
        )
    return labels, num_classes


def permutation_and_inverse(original_ids: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``original_ids`` as int64, checked to be a permutation of ``0..N-1``, and its inverse."""
    perm = np.asarray(original_ids)
    if perm.shape != (num_nodes,) or not np.issubdtype(perm.dtype, np.integer):
        raise InvalidGraphError(f"original_ids must be integers of shape [{num_nodes}], got {perm.dtype} {perm.shape}")
    perm = perm.astype(np.int64, copy=False)
    check_ids(perm, num_nodes, "original id")
    inverse = np.full(num_nodes, -1, np.int64)
    inverse[perm] = np.arange(num_nodes, dtype=np.int64)
    if (inverse < 0).any():
        raise InvalidGraphError(f"original_ids is not a permutation: original node {int(np.argmax(inverse < 0))} "
                                "is missing (and another is listed twice)")
    return perm, inverse


def node_id_array(ids: Any, num_nodes: int, what: str) -> np.ndarray:
    """``ids`` a reader is asked about (``Dataset.original_ids``, ``global_ids``...) as a fresh int64
    array, checked to be integers in ``[0, num_nodes)``: a :class:`ConfigError` naming the first bad one."""
    arr = np.asarray(ids)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"{what} must be integer node ids, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=True)
    if arr.size and (arr.min() < 0 or arr.max() >= num_nodes):
        bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
        raise ConfigError(f"{what} hold {bad}, outside [0, {num_nodes}); pass node ids of this dataset")
    return arr
