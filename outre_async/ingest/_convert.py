"""Importers (``outre convert``): arrays, PyG ``Data``, ``.npz``, OGB, edge lists → a dataset.

Every importer describes its input as a :class:`_Source` whose parts are produced lazily, and
:func:`_write` streams it into one atomic :class:`DatasetWriter`: edges through the external sort of
``_csc_builder`` (memory bounded by ``memory_budget`` plus O(N), whatever E is), then features in
row blocks, labels and splits.  Text and binary files are read in large blocks and parsed by
numba/numpy, never value by value in Python, so an edge list larger than RAM converts.

Edge direction: a pair ``(src, dst)`` (a column of ``edge_index``: row 0 source, row 1 target, as in
PyG; a line ``src dst`` of an edge list) is a message ``src → dst``; the store keeps it as ``src``
in the in-neighbour list of ``dst``.

Formats, as :func:`convert` detects them from the path (override with ``format=``):

=============  ==========================================================================
``ogb``        directory with ``raw/`` (``edge.csv``, optional ``node-feat``, ``node-label``,
               ``num-node-list`` .csv or .csv.gz) and optional ``split/<scheme>/{train,valid,test}``
``npz``        ``.npz`` in the schema of ``shared/data/README.md`` (dense ``x`` or CSR ``x_*``)
``pyg``        ``.pt``/``.pth``: a ``torch.save``-d PyG ``Data`` (or its ``to_dict()``).  Loaded
               with ``torch.load(weights_only=False)``, which unpickles and so can run code
               stored in the file: convert only files you trust (or re-save them as ``.npz``)
``edgelist``   text: ``.txt .csv .tsv .edges .el`` (optionally ``.gz``): two integer columns per
               line separated by blanks, tabs and/or a comma; ``#``/``%`` lines are comments;
               further columns (weights, timestamps) are ignored
``binary``     ``.i32``/``.i64``/``.bin``: little-endian int32/int64 pairs ``src dst`` back to back
=============  ==========================================================================

OGB notes: without the ``ogb`` package we do not read ``master.csv``, so for datasets that OGB
makes undirected on load (``add_inverse_edge``: ogbn-products, ogbn-proteins) pass
``undirected=True``.
OGB's ``valid`` split is our ``val``; NaN (or empty) labels become ``-1`` (unlabelled).  Only
single-graph, single-task (``ogbn-*``) CSV folders are supported.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import pickle
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np
from tqdm import tqdm

from .._errors import ConfigError, DatasetExistsError, InputFormatError, InvalidGraphError
from .._units import parse_bytes
from ..store._layout import RowLayoutName
from ..store._writer import DatasetWriter
from ._convert_kernels import parse_int_column, parse_int_pairs
from ._csc_builder import DEFAULT_MEMORY_BUDGET, MIN_MEMORY_BUDGET, CSCBuilder

__all__ = [
    "ConvertOptions",
    "convert",
    "from_edge_list",
    "from_npz",
    "from_ogb",
    "from_pyg",
    "write_dataset",
]

FORMATS = ("ogb", "npz", "pyg", "edgelist", "binary")
TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".edges", ".el")
BINARY_SUFFIXES = {".i32": "int32", ".i64": "int64", ".bin": None}
TEXT_BLOCK = 16 << 20  # bytes of text parsed per block
FEATURE_BLOCK = 32 << 20  # bytes of feature rows handed to the writer per block
EDGE_BLOCK = 1 << 22  # pairs per block for in-memory and binary edges
PathLike = str | os.PathLike[str]
EdgeChunks = Iterator[tuple[np.ndarray, np.ndarray]]


# -- options ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvertOptions:
    """The ``**opts`` every importer takes; validated here so a typo fails before any work."""

    undirected: bool = False  # add the reverse of every edge (self loops are not doubled)
    drop_self_loops: bool = False
    dedupe: bool = False  # keep one copy of repeated (src, dst) pairs
    overwrite: bool = False
    progress: bool = False  # tqdm bars on stderr
    memory_budget: int | str = DEFAULT_MEMORY_BUDGET  # bytes for the edge sort ("512MiB" accepted)
    feature_dtype: str = "float32"
    row_layout: RowLayoutName = "auto"
    name: str | None = None  # recorded in the manifest meta (default: the output directory name)
    meta: dict[str, Any] | None = None  # extra JSON-serialisable manifest meta
    tmp_dir: PathLike | None = None  # where sort spill files go (default: beside the output)

    def __post_init__(self) -> None:
        object.__setattr__(self, "memory_budget", parse_bytes(self.memory_budget))
        if int(self.memory_budget) < MIN_MEMORY_BUDGET:
            raise ConfigError(
                f"memory_budget must be >= {MIN_MEMORY_BUDGET} bytes, got {self.memory_budget}"
            )
        if self.feature_dtype not in ("float32", "float16"):
            raise ConfigError(
                f"feature_dtype must be 'float32' or 'float16', got {self.feature_dtype=}"
            )
        if self.row_layout not in ("auto", "padded", "packed"):
            raise ConfigError(
                f"row_layout must be 'auto', 'padded' or 'packed', got {self.row_layout=}"
            )
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"meta must be JSON-serialisable: {exc}") from exc


def _options(opts: dict[str, Any]) -> ConvertOptions:
    known = sorted(f.name for f in fields(ConvertOptions))
    unknown = sorted(set(opts) - set(known))
    if unknown:
        raise ConfigError(f"option(s) {unknown} do not apply here; the options are {known}")
    return ConvertOptions(**opts)


# -- the common write path -------------------------------------------------------------------------


@dataclass(kw_only=True)
class _Source:
    """An importer's input, produced lazily so that large inputs stream.

    ``features``, ``labels`` and ``splits`` are called with the final node count (which is only
    known after the edges when it comes from the largest id)."""

    description: str
    format: str
    edges: Callable[[], EdgeChunks]
    num_nodes: int | None = None  # None: max edge id + 1
    feature_dim: int = 0
    features: Callable[[int], Iterator[np.ndarray]] | None = None
    labels: Callable[[int], np.ndarray] | None = None
    splits: Callable[[int], dict[str, np.ndarray]] = field(default=lambda n: {})
    num_classes: int | None = None


def _write(out: PathLike, src: _Source, o: ConvertOptions) -> Path:
    """Sort the edges, then write topology, features, labels and splits into one atomic dataset."""
    out = Path(out)
    if out.exists() and not o.overwrite:
        raise DatasetExistsError(f"{out} already exists; choose another path or pass overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)
    with CSCBuilder(
        num_nodes=src.num_nodes,
        undirected=o.undirected,
        drop_self_loops=o.drop_self_loops,
        dedupe=o.dedupe,
        memory_budget=int(o.memory_budget),
        progress=o.progress,
        tmp_dir=Path(o.tmp_dir) if o.tmp_dir is not None else out.parent,
    ) as builder:
        for s, d in src.edges():
            builder.add(s, d)
        if builder.num_edges == 0:
            left = " left after dropping self loops" if o.drop_self_loops else ""
            raise InvalidGraphError(f"empty graph: {src.description} has no edges{left}")
        with DatasetWriter(
            out,
            num_nodes=builder.num_nodes,
            feature_dim=src.feature_dim,
            feature_dtype=o.feature_dtype,
            num_classes=src.num_classes,
            row_layout=o.row_layout,
            overwrite=o.overwrite,
            meta=_meta(src, o, out),
        ) as writer:
            builder.write_to(writer)
            _write_nodes(writer, src, o)
    return out


def _write_nodes(writer: DatasetWriter, src: _Source, o: ConvertOptions) -> None:
    n = writer.num_nodes
    if src.features is not None:
        rows = 0
        for block in src.features(n):
            if rows + len(block) > n:
                raise InvalidGraphError(f"{src.description}: more feature rows than the {n} nodes")
            writer.append_features(np.asarray(block).astype(o.feature_dtype, copy=False))
            rows += len(block)
        if rows != n:
            raise InvalidGraphError(f"{src.description}: {rows} feature rows but {n} nodes")
    if src.labels is not None:
        writer.write_labels(src.labels(n))
    for name, ids in src.splits(n).items():
        writer.write_split(name, ids)


def _meta(src: _Source, o: ConvertOptions, out: Path) -> dict[str, Any]:
    meta = {
        "name": o.name or out.name,
        "source": src.description,
        "format": src.format,
        "undirected": o.undirected,
        "drop_self_loops": o.drop_self_loops,
        "dedupe": o.dedupe,
    }
    return {**meta, **(o.meta or {})}


# -- in-memory arrays ------------------------------------------------------------------------------


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
    o = _options(opts)
    splits = {"train": train_idx, "val": val_idx, "test": test_idx}
    return _write(
        out, _array_source(edge_index, num_nodes, x, y, splits, num_classes, "arrays", "arrays"), o
    )


def _array_source(
    edge_index: Any,
    num_nodes: int | None,
    x: Any,
    y: Any,
    splits: dict[str, Any],
    num_classes: int | None,
    description: str,
    fmt: str,
) -> _Source:
    """Validate shapes and dtypes up front (before the sort) and wrap the arrays as a source."""
    ei = _edge_index(edge_index, description)
    feats = None if x is None else (x if isinstance(x, _CSRFeatures) else _dense(x, description))
    given = {k: _numpy(v) for k, v in splits.items() if v is not None}
    n = _resolve_num_nodes(num_nodes, feats, y, given, description)
    labels = None if y is None or n is None else _labels(y, n, description)
    ids = {k: _split_ids(v, n, k, description) for k, v in given.items()}
    return _Source(
        description=description,
        format=fmt,
        num_nodes=n,
        num_classes=num_classes,
        edges=lambda: _edge_chunks(ei),
        feature_dim=0 if feats is None else int(feats.shape[1]),
        features=None if feats is None else lambda n: _feature_blocks(feats, n),
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


def _feature_blocks(feats: Any, n: int) -> Iterator[np.ndarray]:
    """Row blocks of ~FEATURE_BLOCK bytes of a dense array or a :class:`_CSRFeatures`."""
    if feats.shape[0] != n:
        raise InvalidGraphError(f"feature row count {feats.shape[0]} != node count {n}")
    step = max(1, FEATURE_BLOCK // (4 * int(feats.shape[1])))
    for start in range(0, n, step):
        yield feats[start : start + step]


@dataclass(frozen=True, slots=True)
class _CSRFeatures:
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


# -- PyG -------------------------------------------------------------------------------------------


def from_pyg(
    data: Any,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write a homogeneous PyG ``Data``: ``edge_index``, ``x``, ``y``, and the splits as
    ``{train,val,test}_{mask,idx}`` (``valid_idx`` too).  ``num_nodes`` defaults to
    ``data.num_nodes`` where it was set explicitly, else as in :func:`write_dataset`."""
    o = _options(opts)
    return _write(out, _pyg_source(data, num_nodes, num_classes, "PyG Data", "pyg"), o)


def _pyg_source(
    data: Any, num_nodes: int | None, num_classes: int | None, description: str, fmt: str
) -> _Source:
    if hasattr(data, "node_types") and hasattr(data, "edge_types"):
        raise ConfigError(
            f"{description} is heterogeneous (HeteroData); convert one homogeneous Data"
        )
    get = data.get if isinstance(data, dict) else (lambda key: getattr(data, key, None))
    if get("edge_index") is None:
        raise InvalidGraphError(
            f"{description} has no edge_index; only edge_index graphs are supported"
        )
    if num_nodes is None and _has_key(data, "num_nodes"):
        num_nodes = int(get("num_nodes"))  # type: ignore[arg-type]  # _has_key checked it
    splits = {}
    for name, keys in (
        ("train", ("train_idx", "train_mask")),
        ("val", ("val_idx", "valid_idx", "val_mask")),
        ("test", ("test_idx", "test_mask")),
    ):
        splits[name] = next((get(k) for k in keys if get(k) is not None), None)
    return _array_source(
        get("edge_index"), num_nodes, get("x"), get("y"), splits, num_classes, description, fmt
    )


def _has_key(data: Any, key: str) -> bool:
    """Whether ``key`` was set explicitly (PyG infers ``num_nodes`` with a warning otherwise)."""
    try:
        return key in data and data[key] is not None
    except (TypeError, KeyError, AttributeError):
        return getattr(data, key, None) is not None


def _from_pt(
    path: PathLike,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """A torch-saved PyG ``Data``; see the module docstring for the trust caveat of unpickling."""
    o = _options(opts)
    path = _existing(path)
    return _write(out, _pyg_source(_load_pt(path), num_nodes, num_classes, str(path), "pyg"), o)


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
    if isinstance(obj, dict) or hasattr(obj, "edge_index"):
        return obj
    raise InputFormatError(
        f"holds a {type(obj).__name__}, expected a torch_geometric.data.Data", path=path
    )


# -- npz -------------------------------------------------------------------------------------------


def from_npz(
    path: PathLike,
    out: PathLike,
    *,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an ``.npz`` in the shared schema: ``edge_index`` [2, E], ``num_nodes``, dense ``x`` or
    CSR ``x_indptr/x_indices/x_data/x_shape``, ``y``, ``{train,val,test}_idx``.  Arrays are loaded
    whole (npz members do not stream); the edge sort is still bounded by ``memory_budget``."""
    o = _options(opts)
    path = _existing(path)
    arrays = _load_npz(path)
    if "edge_index" not in arrays:
        raise InputFormatError(
            f"no 'edge_index' array (have {sorted(arrays)}); expected int64 [2, E]", path=path
        )
    if num_nodes is None and "num_nodes" in arrays:
        num_nodes = _scalar_int(arrays["num_nodes"], "num_nodes", path)
    splits = {name: arrays.get(f"{name}_idx") for name in ("train", "val", "test")}
    x = _npz_features(arrays, path)
    src = _array_source(
        arrays["edge_index"], num_nodes, x, arrays.get("y"), splits, num_classes, str(path), "npz"
    )
    return _write(out, src, o)


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not hasattr(archive, "files"):
                raise InputFormatError("is a single .npy array, not an .npz archive", path=path)
            return {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise InputFormatError(f"cannot read as .npz ({exc})", path=path) from exc


def _scalar_int(value: np.ndarray, key: str, path: Path) -> int:
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        raise InvalidGraphError(
            f"{path}: {key} must be an integer scalar, got {value.dtype} {list(value.shape)}"
        )
    return int(value)


def _npz_features(arrays: dict[str, np.ndarray], path: Path) -> np.ndarray | _CSRFeatures | None:
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
    return _csr(arrays["x_indptr"], arrays["x_indices"], arrays["x_data"], arrays["x_shape"], path)


def _csr(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape: np.ndarray, path: Path
) -> _CSRFeatures:
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
    return _CSRFeatures(indptr, indices, data, (rows, cols))


# -- edge lists ------------------------------------------------------------------------------------


def from_edge_list(
    path: PathLike,
    out: PathLike,
    *,
    binary_dtype: str | None = None,
    num_nodes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an edge list: binary pairs when ``binary_dtype`` is given or the name ends in
    ``.i32``/``.i64``/``.bin``, else text (see the module docstring).  ``num_nodes`` defaults to
    max id + 1."""
    if binary_dtype is not None or _suffix(Path(path)) in BINARY_SUFFIXES:
        return _from_binary_edges(path, out, binary_dtype=binary_dtype, num_nodes=num_nodes, **opts)
    return _from_text_edges(path, out, num_nodes=num_nodes, **opts)


def _from_text_edges(
    path: PathLike, out: PathLike, *, num_nodes: int | None = None, **opts: Any
) -> Path:
    o = _options(opts)
    path = _existing(path)
    src = _Source(
        description=str(path),
        format="edgelist",
        num_nodes=num_nodes,
        edges=lambda: _text_edges(path, o.progress),
    )
    return _write(out, src, o)


def _from_binary_edges(
    path: PathLike,
    out: PathLike,
    *,
    binary_dtype: str | None = None,
    num_nodes: int | None = None,
    **opts: Any,
) -> Path:
    o = _options(opts)
    path = _existing(path)
    dtype = _binary_dtype(path, binary_dtype)
    size = path.stat().st_size
    if size % (2 * dtype.itemsize):
        raise InputFormatError(
            f"{size} bytes is not a whole number of {dtype} pairs ({2 * dtype.itemsize} B "
            "each): truncated, or the wrong binary_dtype",
            path=path,
        )
    src = _Source(
        description=str(path),
        format="binary",
        num_nodes=num_nodes,
        edges=lambda: _binary_edges(path, dtype, o.progress),
    )
    return _write(out, src, o)


def _binary_dtype(path: Path, binary_dtype: str | None) -> np.dtype:
    name = binary_dtype if binary_dtype is not None else BINARY_SUFFIXES.get(_suffix(path))
    if name not in ("int32", "int64"):
        raise ConfigError(
            f"binary edge list {path} needs binary_dtype='int32' or 'int64', got {name!r}"
        )
    return np.dtype(name).newbyteorder("<")


def _binary_edges(path: Path, dtype: np.dtype, progress: bool) -> EdgeChunks:
    with (
        open(path, "rb") as f,
        tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"read {path.name}",
            disable=not progress,
        ) as bar,
    ):
        while len(block := np.fromfile(f, dtype=dtype, count=2 * EDGE_BLOCK)):
            bar.update(block.nbytes)
            yield block[0::2], block[1::2]


def _text_edges(path: Path, progress: bool) -> EdgeChunks:
    line = 1
    for block in _line_blocks(path, progress):
        pairs, lines = _parse_ints(block, 2, path, line)
        line += lines
        yield pairs[:, 0], pairs[:, 1]


# -- text reading ----------------------------------------------------------------------------------


def _open_binary(path: Path) -> BinaryIO:
    """The file, or its decompressed stream when it starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return cast(BinaryIO, gzip.open(path, "rb") if gz else open(path, "rb"))  # noqa: SIM115


def _read(f: BinaryIO, size: int, path: Path) -> bytes:
    try:
        return f.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFormatError(
            f"cannot read ({exc}); is the file truncated or not gzip?", path=path
        ) from exc


def _line_blocks(path: Path, progress: bool) -> Iterator[bytes]:
    """Blocks of whole lines, each ending with a newline (added to a last line lacking one)."""
    block_size = TEXT_BLOCK  # read at call time so that tests can shrink it
    with (
        _open_binary(path) as f,
        tqdm(unit="B", unit_scale=True, desc=f"read {path.name}", disable=not progress) as bar,
    ):
        carry = b""
        while chunk := _read(f, block_size, path):
            bar.update(len(chunk))
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                yield data[:cut]
        if carry:
            yield carry + b"\n"


def _parse_ints(block: bytes, ncols: int, path: Path, first_line: int) -> tuple[np.ndarray, int]:
    """(``[rows, 2]`` or ``[rows]`` int64, lines in the block); a bad line raises with its line."""
    buf = np.frombuffer(block, dtype=np.uint8)
    out: np.ndarray
    if ncols == 2:
        out = np.empty((len(block) // 4 + 1, 2), dtype=np.int64)  # untouched pages cost no RAM
        rows, bad, lines = parse_int_pairs(buf, out)
    else:
        out = np.empty(len(block) // 2 + 1, dtype=np.int64)
        rows, bad, lines = parse_int_column(buf, out)
    if bad >= 0:
        what = "two integer node ids" if ncols == 2 else "one integer"
        raise InputFormatError(
            f"expected {what} per line, found {_line_of(block, bad)!r} "
            "(comment lines start with # or %)",
            path=path,
            line=first_line + bad,
        )
    return out[:rows], lines


def _line_of(block: bytes, index: int) -> str:
    """Text of line ``index`` of ``block`` (for messages; only on the error path)."""
    line = block.split(b"\n")[index]
    return line[:80].decode("utf-8", "replace").rstrip("\r")


def _read_ids(path: Path, progress: bool = False) -> np.ndarray:
    """A file of one integer per line (OGB splits and node counts)."""
    parts, line = [], 1
    for block in _line_blocks(path, progress):
        ids, lines = _parse_ints(block, 1, path, line)
        parts.append(ids)
        line += lines
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _csv_width(path: Path) -> int:
    with _open_binary(path) as f:
        try:
            first = f.readline()
        except (OSError, EOFError, zlib.error) as exc:
            raise InputFormatError(f"cannot read ({exc})", path=path) from exc
    if not first.strip():
        raise InputFormatError("is empty; expected comma-separated feature rows", path=path, line=1)
    return len(first.split(b","))


def _float_rows(path: Path, dim: int, progress: bool) -> Iterator[np.ndarray]:
    """Feature rows of a CSV, block by block (numpy's C parser; exact float64, cast later)."""
    line = 1
    for block in _line_blocks(path, progress):
        rows = _parse_floats(block, dim, path, line)
        line += len(rows)
        yield rows


def _parse_floats(block: bytes, dim: int, path: Path, first_line: int) -> np.ndarray:
    try:
        rows = np.loadtxt(
            io.BytesIO(block), delimiter=",", dtype=np.float64, ndmin=2, comments=None
        )
    except ValueError:
        rows = None
    if rows is None or rows.shape != (block.count(b"\n"), dim):  # loadtxt skips blank lines
        bad = _bad_float_line(block, dim)
        raise InputFormatError(
            f"expected {dim} comma-separated numbers, found {_line_of(block, bad)!r}",
            path=path,
            line=first_line + bad,
        )
    return rows


def _bad_float_line(block: bytes, dim: int) -> int:
    """Index of the first line that is not ``dim`` numbers (re-scan of a failed block only)."""
    for index, line in enumerate(block.split(b"\n")[:-1]):
        values = line.split(b",")
        if len(values) != dim or not all(_is_number(v) for v in values):
            return index
    return 0


def _read_labels(path: Path, progress: bool) -> np.ndarray:
    """One label per line; empty or NaN → -1 (OGB marks unlabelled nodes so)."""
    parts, line = [], 1
    for block in _line_blocks(path, progress):
        parts.append(_parse_labels(block, path, line))
        line += len(parts[-1])
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _parse_labels(block: bytes, path: Path, first_line: int) -> np.ndarray:
    fields = np.char.strip(np.array(block[:-1].split(b"\n")))
    fields = np.where((fields == b"") | (np.char.lower(fields) == b"nan"), b"-1", fields)
    try:
        values = fields.astype(np.float64)
    except ValueError:
        values = None
    if values is None or not np.isfinite(values).all() or (values != np.round(values)).any():
        bad = next(i for i, v in enumerate(fields) if not _is_integral(v))
        raise InputFormatError(
            f"expected one integer class id (or NaN) per line, found {_line_of(block, bad)!r}"
            " (multi-task labels are not supported)",
            path=path,
            line=first_line + bad,
        )
    return values.astype(np.int64)


def _is_number(value: bytes) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _is_integral(value: bytes) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and number == round(number)


# -- OGB -------------------------------------------------------------------------------------------


def from_ogb(
    path: PathLike,
    out: PathLike,
    *,
    split_scheme: str | None = None,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an OGB node-property folder (``raw/*.csv[.gz]``, ``split/<scheme>/``) without ``ogb``.

    ``split_scheme`` picks ``split/<scheme>`` (default: the only one present).  ``num_nodes`` comes
    from ``num-node-list``, else the label or feature rows, else max edge id + 1."""
    o = _options(opts)
    root = _existing(path)
    raw = root / "raw"
    if not raw.is_dir():
        raise InputFormatError("is not an OGB dataset folder: raw/ is missing", path=root)
    edge = _ogb_file(raw, "edge")
    if edge is None:
        raise InputFormatError("raw/edge.csv(.gz) is missing; an OGB folder needs it", path=root)
    feat, label = _ogb_file(raw, "node-feat"), _ogb_file(raw, "node-label")
    split_files = _ogb_split_files(root, split_scheme)
    labels = None if label is None else _read_labels(label, o.progress)
    n = _ogb_num_nodes(num_nodes, _ogb_file(raw, "num-node-list"), labels, feat, o.progress)
    dim = 0 if feat is None else _csv_width(feat)
    src = _Source(
        description=str(root),
        format="ogb",
        num_nodes=n,
        num_classes=num_classes,
        edges=lambda: _text_edges(edge, o.progress),
        feature_dim=dim,
        features=None if feat is None else lambda n: _float_rows(feat, dim, o.progress),
        labels=None if labels is None else lambda n: _sized(labels, n, label),
        splits=lambda n: {name: _read_ids(p) for name, p in split_files.items()},
    )
    return _write(out, src, o)


def _ogb_file(directory: Path, stem: str) -> Path | None:
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (directory / name).is_file():
            return directory / name
    return None


def _ogb_num_nodes(
    given: int | None,
    node_list: Path | None,
    labels: np.ndarray | None,
    feat: Path | None,
    progress: bool,
) -> int | None:
    if given is not None:
        return given
    if node_list is not None:
        counts = _read_ids(node_list)
        if len(counts) != 1:
            raise InputFormatError(
                f"lists {len(counts)} graphs; only single-graph (ogbn) folders are supported",
                path=node_list,
            )
        return int(counts[0])
    if labels is not None:
        return len(labels)
    if feat is not None:
        return sum(block.count(b"\n") for block in _line_blocks(feat, progress))
    return None


def _sized(labels: np.ndarray, n: int, path: Path | None) -> np.ndarray:
    if len(labels) != n:
        raise InvalidGraphError(f"{path}: {len(labels)} labels but {n} nodes")
    return labels


def _ogb_split_files(root: Path, scheme: str | None) -> dict[str, Path]:
    """``{'train': .., 'val': .., 'test': ..}`` files in ``split/<scheme>``; OGB 'valid' = 'val'."""
    split_dir = root / "split"
    schemes = (
        sorted(p.name for p in split_dir.iterdir() if p.is_dir()) if split_dir.is_dir() else []
    )
    if scheme is None:
        if len(schemes) > 1:
            raise ConfigError(
                f"{split_dir} holds several split schemes {schemes}; pass split_scheme="
            )
        if not schemes:
            return {}
        scheme = schemes[0]
    if scheme not in schemes:
        raise ConfigError(f"split scheme {scheme!r} not found under {split_dir}; found {schemes}")
    files = {
        ours: _ogb_file(split_dir / scheme, theirs)
        for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test"))
    }
    found = {k: v for k, v in files.items() if v is not None}
    if not found:
        raise InputFormatError("holds no train/valid/test.csv(.gz)", path=split_dir / scheme)
    return found


# -- detection -------------------------------------------------------------------------------------


def convert(src: PathLike, out: PathLike, *, format: str | None = None, **opts: Any) -> Path:
    """Import ``src`` into the dataset directory ``out``; the format is detected from ``src``
    (module docstring) unless ``format`` is one of ``ogb, npz, pyg, edgelist, binary``."""
    path = Path(src)
    fmt = detect_format(path) if format is None else format
    if fmt not in _IMPORTERS:
        raise ConfigError(f"unknown input format {fmt!r}; the formats are {', '.join(FORMATS)}")
    return _IMPORTERS[fmt](path, out, **opts)


def detect_format(path: PathLike) -> str:
    """The format name for ``path``: an OGB folder, else by file name (see the module docstring)."""
    path = _existing(path)
    if path.is_dir():
        if (path / "raw").is_dir():
            return "ogb"
        raise InputFormatError("is a directory but not an OGB folder (no raw/ inside)", path=path)
    return _format_from_name(path)


def _format_from_name(path: Path) -> str:
    name = path.name.lower()
    gz = name.endswith(".gz")
    suffix = Path(name[:-3] if gz else name).suffix
    by_suffix = {
        **dict.fromkeys(TEXT_SUFFIXES, "edgelist"),
        **dict.fromkeys(BINARY_SUFFIXES, "binary"),
        ".npz": "npz",
        ".pt": "pyg",
        ".pth": "pyg",
    }
    fmt = by_suffix.get(suffix)
    if fmt is None or (gz and fmt != "edgelist"):
        raise ConfigError(
            f"cannot tell the format of {path} from its name; "
            f"pass format= one of {', '.join(FORMATS)}"
        )
    return fmt


def _suffix(path: Path) -> str:
    return path.suffix.lower()


def _existing(path: PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputFormatError("no such file or directory", path=path)
    return path


_IMPORTERS: dict[str, Callable[..., Path]] = {
    "ogb": from_ogb,
    "npz": from_npz,
    "pyg": _from_pt,
    "edgelist": _from_text_edges,
    "binary": _from_binary_edges,
}
