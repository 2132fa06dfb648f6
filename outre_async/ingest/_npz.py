"""``.npz`` archives in the shared schema (``shared/data/README.md``) → a dataset; dense ``x`` or
CSR ``x_*`` features, checked whole before any row is densified.

Sizes before allocation: every member's ``.npy`` header is read first and its ``shape × itemsize``
must match the member's inflated size (``ZipInfo.file_size``, known before inflating), and the
members together must fit in the memory available now, so a small archive cannot make ``np.load``
allocate gigabytes (a lying header, or a zip bomb)."""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputFormatError
from ._arrays import CSRFeatures, array_source
from ._edge_features import EDGE_KEYS, check_edge_features
from ._hetero_npz import hetero_arrays, is_hetero
from ._npz_members import csr_features, scalar_int
from ._source import PathLike, existing_path, parse_options, write_source


def from_npz(
    path: PathLike,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an ``.npz`` in the shared schema: ``edge_index`` [2, E], ``num_nodes``, dense ``x`` or
    CSR ``x_indptr/x_indices/x_data/x_shape``, ``y``, ``{train,val,test}_idx``; an archive holding
    ``node_types`` is the hetero schema (``_hetero_npz``) and becomes a typed dataset.  Arrays are loaded
    whole (npz members do not stream); the edge sort is still bounded by ``memory_budget``."""
    o = parse_options(opts)
    path = existing_path(path)
    arrays = _load_npz(path)
    if is_hetero(arrays):
        from ._hetero import write_hetero

        return write_hetero(out, hetero_arrays(arrays, path), o, num_classes)
    if "edge_index" not in arrays:
        raise InputFormatError(
            f"no 'edge_index' array (have {sorted(arrays)}); expected int64 [2, E]", path=path
        )
    if num_nodes is None and "num_nodes" in arrays:
        num_nodes = scalar_int(arrays["num_nodes"], "num_nodes", path)
    check_edge_features([k for k in EDGE_KEYS if k in arrays], str(path), drop=o.drop_edge_features)
    splits = {name: arrays.get(f"{name}_idx") for name in ("train", "val", "test")}
    x = _npz_features(arrays, path)
    src = array_source(
        arrays["edge_index"], num_nodes, x, arrays.get("y"), splits, num_classes, str(path), "npz"
    )
    return write_source(out, src, o)


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    if zipfile.is_zipfile(path):
        _check_members(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not hasattr(archive, "files"):
                raise InputFormatError("is a single .npy array, not an .npz archive", path=path)
            return {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise InputFormatError(f"cannot read as .npz ({exc})", path=path) from exc


def _check_members(path: Path) -> None:
    """Each member's header against its inflated size, and their total against available memory."""
    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".npy"):
                    with zf.open(info) as f:
                        fmt = np.lib.format
                        version = fmt.read_magic(f)
                        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                        shape, _, dtype = read(f)
                        header = f.tell() if f.seekable() else None
                    want = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if header is not None and not dtype.hasobject and want != info.file_size - header:
                        raise InputFormatError(
                            f"member {info.filename} declares {list(shape)} {dtype} ({want} bytes) but "
                            f"holds {info.file_size - header}; the archive is damaged", path=path)
                total += info.file_size
    except (OSError, ValueError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise InputFormatError(f"cannot read as .npz ({exc})", path=path) from exc
    avail = _available_memory()
    if avail is not None and total > avail:
        raise InputFormatError(f"members inflate to {total} bytes, more than the {avail} bytes of memory "
                               "available; convert from a format that streams (edge list, OGB)", path=path)


def _available_memory() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _npz_features(arrays: dict[str, np.ndarray], path: Path) -> np.ndarray | CSRFeatures | None:
    csr_keys = ("x_indptr", "x_indices", "x_data", "x_shape")
    present = [k for k in csr_keys if k in arrays]
    if "x" in arrays:
        return arrays["x"]
    if not present:
        return None
    if len(present) != len(csr_keys):
        raise InputFormatError(
            f"sparse features need all of {list(csr_keys)}, found only {present}", path=path
        )
    return csr_features(arrays["x_indptr"], arrays["x_indices"], arrays["x_data"], arrays["x_shape"], path)
