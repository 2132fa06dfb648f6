"""Checks of ``.npz`` members shared by both schemas: an integer scalar, and a CSR feature matrix
checked whole before any row is densified.

Apart from ``_npz`` because the homogeneous reader and the hetero one (``_hetero_npz``, which
``_npz`` routes typed archives to) both check members this way: each imports this module, neither
the other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InvalidGraphError
from ._arrays import CSRFeatures


def scalar_int(value: np.ndarray, key: str, path: Path) -> int:
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        raise InvalidGraphError(
            f"{path}: {key} must be an integer scalar, got {value.dtype} {list(value.shape)}"
        )
    return int(value)


def csr_features(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape: np.ndarray, path: Path
) -> CSRFeatures:
    """Check a CSR matrix completely before any of it is densified."""
    if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer) or shape.min() <= 0:
        raise InvalidGraphError(
            f"{path}: x_shape must be two positive integers, got {shape.tolist()}"
        )
    rows, cols = int(shape[0]), int(shape[1])
    ok = indptr.shape == (rows + 1,) and np.issubdtype(indptr.dtype, np.integer) and indptr[0] == 0
    ok = ok and indices.ndim == 1 and data.shape == indices.shape and indptr[-1] == len(indices)
    ok = ok and bool((np.diff(indptr) >= 0).all()) and np.issubdtype(indices.dtype, np.integer)
    if not ok:
        raise InvalidGraphError(
            f"{path}: x_indptr/x_indices/x_data do not form a CSR matrix of shape {[rows, cols]}"
        )
    if len(indices) and (indices.min() < 0 or indices.max() >= cols):
        raise InvalidGraphError(f"{path}: x_indices hold column ids outside [0, {cols})")
    if not np.issubdtype(data.dtype, np.number):
        raise InvalidGraphError(f"{path}: x_data must be numeric, got {data.dtype}")
    return CSRFeatures(indptr, indices, data, (rows, cols))
