"""Streaming, atomic writer of the on-disk dataset format (design §3).

Memory stays bounded by the chunks handed in plus O(N) for ``indptr``: topology arrives as blocks of
consecutive destination nodes (``append_neighbors``), features as blocks of consecutive rows
(``append_features``).  Everything is written into a hidden temporary directory beside the target
and installed by :meth:`DatasetWriter.commit`, after the manifest (``_install``: fsync, rename, fsync
the parent), so a crash or an error never leaves a half-written dataset that opens; :meth:`abort`
(or leaving the ``with`` block on an exception) removes the temporary directory.  The temporary
directory carries this process's pid (``_tempdir``); a writer first collects the ones in its parent
whose writer died (``_litter``).  ``overwrite`` replaces only an empty folder or a dataset
(``_overwrite``), checked at construction and again right before the install.

Features are stored in ``feature_dtype`` (float32, float16, bfloat16 or int8; ``_row_codec``): each
appended block is checked (NaN, inf, or a value beyond the encoding's range: a
:class:`NonFiniteFeatureError` naming the row) and encoded as it arrives.  int8 needs each column's
range before the first row can be quantized, so unless ``feature_scale``/``feature_zero`` are given
the float32 rows go to a spill file in the temporary folder (disk, not RAM) while the columns' ranges
are gathered, and are quantized into ``features.bin`` chunk by chunk at :meth:`commit`.  A lossy
encoding's reconstruction error is recorded in ``meta["feature_cast"]``.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import ConfigError, DatasetExistsError, InvalidGraphError
from ._file_reads import not_finite
from ._id_checks import check_ids, check_labels, permutation_and_inverse
from ._install import install_directory
from ._layout import RowLayout, RowLayoutName, choose_row_layout
from ._litter import open_temp_dir
from ._manifest import EDGE_SPLIT_NAMES, SPLIT_NAMES, FeatureEntry, FileEntry, Manifest, check_classes
from ._masks import mask_hint
from ._overwrite import check_overwrite, dataset_names
from ._row_codec import QUANTIZER, CastError, ColumnRange, as_float32, decode_rows, encode_rows
from ._row_format import RowFormat, storage_dtype
from ._type_names import EdgeType
from ._typed_section import TypedSection

INT32_LIMIT = 2**31 - 1
SPILL_NAME = "features.f32.spill"  # int8 without scales: float32 rows until the columns' ranges are known
_SPILL_CHUNK_BYTES = 16 << 20      # float32 bytes quantized at a time at commit


class DatasetWriter:
    """Write one dataset; use as a context manager so errors clean up after themselves.

    >>> with DatasetWriter(out, num_nodes=n, feature_dim=d, num_classes=c) as w:
    ...     w.append_neighbors(in_degrees_block, neighbor_ids_block)   # repeat, in node order
    ...     w.append_features(rows_block)                              # repeat, in node order
    ...     w.write_labels(labels); w.write_split("train", train_ids)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        num_nodes: int,
        feature_dim: int = 0,
        feature_dtype: str = "float32",
        num_classes: int | None = None,
        row_layout: RowLayoutName = "auto",
        overwrite: bool = False,
        meta: dict[str, Any] | None = None,
        feature_scale: np.ndarray | None = None,
        feature_zero: np.ndarray | None = None,
    ) -> None:
        self.path = Path(path)
        if num_nodes <= 0:
            raise InvalidGraphError(f"empty graph: num_nodes must be >= 1, got {num_nodes}")
        if feature_dim < 0:
            raise ConfigError(f"feature_dim must be >= 0, got {feature_dim=}")
        stored = storage_dtype(feature_dtype)
        if (feature_scale is None) != (feature_zero is None) or (feature_scale is not None and feature_dtype != "int8"):
            raise ConfigError("feature_scale and feature_zero come together, and only with feature_dtype='int8'")
        if num_classes is not None and (num_classes < 0 or check_classes(num_classes, num_nodes)):
            raise InvalidGraphError(f"{check_classes(num_classes, num_nodes) or f'num_classes={num_classes} is negative'}"
                                    "; pass the number of classes the labels 0..C-1 use")
        if os.path.lexists(self.path) and not overwrite:
            raise DatasetExistsError(f"{self.path} already exists; choose another path or pass overwrite")
        if overwrite:
            check_overwrite(self.path, owned=dataset_names, what="dataset")
        self.num_nodes = int(num_nodes)
        self.num_classes = num_classes
        self.meta = dict(meta or {})
        self._overwrite = overwrite
        self._index_dtype = np.dtype(np.int32 if num_nodes <= INT32_LIMIT else np.int64)
        self._feature_dtype = stored
        self._feature_dim = int(feature_dim)
        self._layout = (
            choose_row_layout(feature_dim * self._feature_dtype.itemsize, row_layout) if feature_dim else None
        )
        self._encoding = str(feature_dtype)
        self._format: RowFormat | None = None  # None: int8 rows whose scales the spill pass finds
        if feature_dim and (feature_dtype != "int8" or feature_scale is not None):
            self._format = RowFormat.of_encoding(self._encoding, feature_dim, scale=feature_scale, zero=feature_zero)
        self._range = ColumnRange(dim=feature_dim) if feature_dim and self._format is None else None
        self._cast_error: CastError | None = None
        self._quantizer: str | None = None if feature_scale is None else QUANTIZER
        self._tmpdir = open_temp_dir(self.path.parent, self.path.name, "tmp")
        self._tmp = self._tmpdir.path
        self._indices_file: BinaryIO | None = None
        self._features_file: BinaryIO | None = None
        try:
            self._indptr = np.zeros(self.num_nodes + 1, dtype=np.int64)
            self._indices_file = open(self._tmp / "indices.bin", "wb")  # noqa: SIM115
            if self._layout:
                name = "features.bin" if self._range is None else SPILL_NAME
                self._features_file = open(self._tmp / name, "wb")  # noqa: SIM115
        except BaseException:
            self.abort()
            raise
        self._nodes_done = 0
        self._rows_done = 0
        self._labels: FileEntry | None = None
        self._label_values: np.ndarray | None = None
        self._splits: dict[str, FileEntry] = {}
        self._split_ids: dict[str, np.ndarray] = {}
        self._node_ids: tuple[FileEntry, FileEntry] | None = None
        self._edge_splits: dict[str, FileEntry] = {}
        self._types: TypedSection | None = None  # a typed dataset (``write_types``)
        self._row_layout_name = row_layout
        self._closed = False

    @property
    def tmp(self) -> Path:
        """The temporary folder being filled (renamed to ``path`` by :meth:`commit`)."""
        return self._tmp

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None and not self._closed:
            self.commit()
        else:
            self.abort()

    # -- topology --------------------------------------------------------------------------------
    def append_neighbors(self, in_degrees: np.ndarray, neighbors: np.ndarray) -> None:
        """Append the in-neighbour lists of the next ``len(in_degrees)`` nodes (CSC order)."""
        counts = np.asarray(in_degrees)
        nbrs = np.asarray(neighbors)
        start, stop = self._nodes_done, self._nodes_done + len(counts)
        if stop > self.num_nodes:
            raise InvalidGraphError(f"topology has more than num_nodes={self.num_nodes} destination nodes")
        if counts.ndim != 1 or nbrs.ndim != 1:
            raise InvalidGraphError("in_degrees and neighbors must be 1-D arrays")
        if len(counts) and counts.min() < 0:
            raise InvalidGraphError("in-degrees must be >= 0 (indptr must be non-decreasing)")
        if int(counts.sum()) != len(nbrs):
            raise InvalidGraphError(f"in-degrees sum to {int(counts.sum())} but {len(nbrs)} neighbours given")
        if len(nbrs):
            check_ids(nbrs, self.num_nodes, "edge endpoint")
        self._indptr[start + 1 : stop + 1] = self._indptr[start] + np.cumsum(counts, dtype=np.int64)
        self._nodes_done = stop
        assert self._indices_file is not None
        self._indices_file.write(np.ascontiguousarray(nbrs, dtype=self._index_dtype).data)

    def write_csc(self, indptr: np.ndarray, indices: np.ndarray, *, chunk_edges: int = 1 << 24) -> None:
        """Write a whole CSC in bounded chunks (``indptr`` [N+1], ``indices`` [E], may be a memmap)."""
        indptr = np.asarray(indptr, dtype=np.int64)
        if indptr.shape != (self.num_nodes + 1,):
            raise InvalidGraphError(f"indptr must have num_nodes + 1 = {self.num_nodes + 1} entries, got {indptr.shape}")
        if indptr[0] != 0 or indptr[-1] != len(indices):
            raise InvalidGraphError(f"indptr must start at 0 and end at len(indices)={len(indices)}")
        node = 0
        while node < self.num_nodes:
            stop = int(np.searchsorted(indptr, indptr[node] + chunk_edges, side="right")) - 1
            stop = min(max(stop, node + 1), self.num_nodes)
            self.append_neighbors(np.diff(indptr[node : stop + 1]), indices[indptr[node] : indptr[stop]])
            node = stop

    # -- features, labels, splits ----------------------------------------------------------------
    def append_features(self, rows: np.ndarray) -> None:
        """Append the feature rows of the next ``len(rows)`` nodes (floats, encoded here)."""
        rows = self._check_rows(rows)
        start = self._rows_done
        if self._range is not None:  # int8 without scales: float32 to the spill, ranges gathered
            x = as_float32(rows, start)
            self._range.update(x, start)
            self._write_rows(x, padded=False)
            return
        assert self._format is not None  # set whenever there is no spill
        words = encode_rows(rows, self._format, first_row=start)
        if self._format.lossy:
            self._cast_error = self._cast_error or CastError()
            self._cast_error.update(rows, decode_rows(words, self._format))
        self._write_rows(words)

    def append_stored_features(self, words: np.ndarray) -> None:
        """Append rows already encoded in this writer's format (a copy of a dataset's stored rows, e.g.
        int8 rows with the ``feature_scale``/``feature_zero`` they were quantized with): bits copied."""
        words = self._check_rows(words)
        if self._format is None or words.dtype != self._feature_dtype:
            raise ConfigError(f"stored rows must be {self._feature_dtype} words of a writer that knows its format "
                              f"(int8: pass feature_scale and feature_zero), got {words.dtype}")
        if self._encoding in ("float32", "float16", "bfloat16"):  # int8 words are finite by construction
            bad = not_finite(words)
            if bad.any():
                raise InvalidGraphError(f"stored feature row {self._rows_done + int(np.argwhere(bad)[0][0])} holds "
                                        "NaN or inf; verify the source dataset (`outre info --verify`)")
        self._write_rows(words)

    def _check_rows(self, rows: np.ndarray) -> np.ndarray:
        if self._layout is None or self._features_file is None:
            raise ConfigError("this dataset was opened with feature_dim=0; pass feature_dim to write features")
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape[1] != self._feature_dim:
            raise InvalidGraphError(f"feature rows must have shape [k, {self._feature_dim}], got {rows.shape}")
        if self._rows_done + len(rows) > self.num_nodes:
            raise InvalidGraphError(f"feature row count exceeds num_nodes={self.num_nodes}")
        return rows

    def _write_rows(self, words: np.ndarray, *, padded: bool = True) -> None:
        """Write ``words`` padded to the layout's stride (``padded=False``: as they are, the spill)."""
        assert self._features_file is not None and self._layout is not None  # _check_rows
        width = self._layout.stride // words.dtype.itemsize if padded else self._feature_dim
        if width == self._feature_dim:
            self._features_file.write(np.ascontiguousarray(words).data)
        else:
            block = np.zeros((len(words), width), dtype=words.dtype)
            block[:, : self._feature_dim] = words
            self._features_file.write(block.data)
        self._rows_done += len(words)

    def write_labels(self, labels: np.ndarray) -> None:
        """Write per-node class labels; ``-1`` marks an unlabelled node."""
        labels, self.num_classes = check_labels(labels, self.num_nodes, self.num_classes)
        self._labels = self._write_small("labels", labels)
        self._label_values = labels  # a typed dataset checks them against its target types (``_finish``)

    def write_split(self, name: str, ids: np.ndarray) -> None:
        """Write the node ids of split ``name`` ('train', 'val' or 'test'): unique, in range, disjoint."""
        if name not in SPLIT_NAMES:
            raise ConfigError(f"split name must be one of {SPLIT_NAMES}, got {name!r}")
        ids = np.asarray(ids)
        if ids.ndim != 1 or (len(ids) and not np.issubdtype(ids.dtype, np.integer)):
            raise InvalidGraphError(f"split {name!r} must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        given, ids = ids, ids.astype(np.int64, copy=False)
        if len(ids):
            check_ids(ids, self.num_nodes, f"split {name!r} node id")
        uniq = np.unique(ids)
        if len(uniq) != len(ids):
            raise InvalidGraphError(f"split {name!r} lists {len(ids) - len(uniq)} node ids more than once"
                                    f"{mask_hint(given, self.num_nodes)}")
        for other, other_ids in self._split_ids.items():
            overlap = np.intersect1d(uniq, other_ids, assume_unique=True)
            if len(overlap):
                raise InvalidGraphError(f"splits {name!r} and {other!r} share {len(overlap)} nodes (e.g. {int(overlap[0])})")
        self._split_ids[name] = uniq
        self._splits[name] = self._write_small(f"split_{name}", ids)

    def write_edge_split(self, name: str, pairs: np.ndarray) -> None:
        """Write the supervision pairs of edge split ``name`` (``EDGE_SPLIT_NAMES``): ``[2, E]`` integer
        node ids in range, row 0 the source (``oa.split_edges`` checks disjointness before it calls this)."""
        if name not in EDGE_SPLIT_NAMES:
            raise ConfigError(f"edge split name must be one of {EDGE_SPLIT_NAMES}, got {name!r}")
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[0] != 2 or (pairs.size and not np.issubdtype(pairs.dtype, np.integer)):
            raise InvalidGraphError(f"edge split {name!r} must be integer pairs of shape [2, E], got {pairs.dtype} {pairs.shape}")
        pairs = pairs.astype(np.int64, copy=False)
        if pairs.size:
            check_ids(pairs, self.num_nodes, f"edge split {name!r} node id")
        self._edge_splits[name] = self._write_small(f"edge_split_{name}", pairs)

    def write_node_ids(self, original_ids: np.ndarray) -> None:
        """Mark this dataset as a relabelled one: node ``i`` is node ``original_ids[i]`` of the original
        (a permutation of ``0..N-1``); its inverse is written beside it (``Dataset.original_ids``)."""
        perm, inverse = permutation_and_inverse(original_ids, self.num_nodes)
        self._node_ids = (self._write_small("original_ids", perm), self._write_small("new_ids", inverse))

    def adopt_features(self, name: str, *, format: RowFormat, layout: RowLayout) -> None:
        """Take ``tmp/name``, a feature file the caller wrote in this writer's temporary folder (rows
        out of order, e.g. the reorderer's regrouping), as the dataset's features, stored as ``format``
        (its encoding, and an int8 format's scale and zero, go to the manifest).  The writer must
        have been opened with ``feature_dim=0``; the file must hold ``num_nodes`` rows of ``layout``."""
        if self._features_file is not None or self._rows_done:
            raise ConfigError("adopt_features needs a writer opened with feature_dim=0 and no appended rows")
        if format.stored_row_bytes != layout.row_bytes:
            raise ConfigError(f"feature rows of {format.dim} {format.encoding} values do not match {layout}")
        if name != "features.bin":
            raise ConfigError(f"the feature file must be named features.bin, got {name!r}")
        size = (self._tmp / name).stat().st_size
        if size != self.num_nodes * layout.stride:
            raise InvalidGraphError(f"{self._tmp / name} has {size} bytes, {self.num_nodes} rows of stride "
                                    f"{layout.stride} are {self.num_nodes * layout.stride}")
        self._feature_dim, self._feature_dtype, self._layout = format.dim, format.stored, layout
        self._encoding, self._format = format.encoding, format
        self._quantizer = QUANTIZER if format.encoding == "int8" else None
        self._rows_done = self.num_nodes

    # -- node and edge types (a heterogeneous dataset, ``_type_manifest``) -----------------------------
    def write_types(self, node_types: list[tuple[str, int]], edge_types: list[EdgeType], type_per_edge: np.ndarray,
                    *, target_types: tuple[str, ...] = ()) -> None:
        """Make this a typed dataset: node types ``(name, count)`` in global id order, edge types
        ``(src, rel, dst)``, the edge type id of every CSC entry (after the whole topology; each list
        sorted by it), and the types that carry the labels.  Features go in per type
        (:meth:`write_type_features`), never through :meth:`append_features`."""
        if self._layout is not None or self._nodes_done != self.num_nodes:
            raise ConfigError("write_types needs the whole topology written first and a writer opened with feature_dim=0")
        self._types = TypedSection(self._tmp, self._indptr, self.num_nodes, node_types, edge_types, type_per_edge,
                                   target_types=tuple(target_types), row_layout=self._row_layout_name)

    def write_type_features(self, node_type: str, blocks: Any, *, dim: int, dtype: str = "float32") -> None:
        """Write the features of ``node_type`` (after :meth:`write_types`): row blocks in node order, one row
        per node of the type, ``dim`` values each, stored as ``dtype`` (float32 or float16)."""
        if self._types is None:
            raise ConfigError("write_type_features needs write_types first (it declares the node types)")
        self._types.write_features(node_type, blocks, dim=dim, dtype=dtype)

    def _write_small(self, stem: str, array: np.ndarray) -> FileEntry:
        data = np.ascontiguousarray(array)
        (self._tmp / f"{stem}.bin").write_bytes(data.data)
        return FileEntry(
            file=f"{stem}.bin", dtype=str(data.dtype), shape=tuple(data.shape),
            nbytes=data.nbytes, crc32=zlib.crc32(data.data),
        )

    # -- commit / abort --------------------------------------------------------------------------
    def commit(self, *, before_install: Callable[[Path], None] | None = None) -> Path:
        """Check completeness, write the manifest and move the dataset into place atomically.

        ``before_install(tmp)`` runs once the temporary folder is a complete dataset (manifest
        written) and before it is renamed into place: what must be derived from the finished dataset
        and live inside it (the reorderer's ``partitions/``) is written there."""
        try:
            manifest = self._finish()
            manifest.write(self._tmp)
            if before_install is not None:
                before_install(self._tmp)
            self._install()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Discard everything written so far."""
        for handle in (self._indices_file, self._features_file):
            if handle is not None and not handle.closed:
                handle.close()
        self._tmpdir.remove()
        self._closed = True

    def _finish(self) -> Manifest:
        if self._nodes_done != self.num_nodes:
            raise InvalidGraphError(f"topology covers {self._nodes_done} of num_nodes={self.num_nodes} nodes")
        if self._types is not None:
            self._types.check_targets(self._label_values, self._split_ids)
        num_edges = int(self._indptr[-1])
        if num_edges == 0:
            raise InvalidGraphError("empty graph: no edges; an outre-async dataset needs at least one edge")
        if self._layout is not None and self._rows_done != self.num_nodes:
            raise InvalidGraphError(f"feature row count {self._rows_done} != num_nodes {self.num_nodes}")
        for handle in (self._indices_file, self._features_file):
            if handle is not None:
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
        if self._range is not None:
            self._quantize_spill()
        if self._cast_error is not None:
            self.meta["feature_cast"] = {"encoding": self._encoding, **self._cast_error.report()}
        indices_entry = FileEntry(
            file="indices.bin", dtype=str(self._index_dtype), shape=(num_edges,),
            nbytes=num_edges * self._index_dtype.itemsize,
        )
        return Manifest(
            num_nodes=self.num_nodes,
            num_edges=num_edges,
            num_classes=int(self.num_classes or 0),
            indptr=self._write_small("indptr", self._indptr),
            indices=indices_entry,
            features=self._feature_entry(),
            labels=self._labels,
            splits=dict(self._splits),
            meta=self.meta,
            original_ids=None if self._node_ids is None else self._node_ids[0],
            new_ids=None if self._node_ids is None else self._node_ids[1],
            edge_splits=dict(self._edge_splits),
            types=None if self._types is None else self._types.entry(),
        )

    def _quantize_spill(self) -> None:
        """int8 without given scales: scales from the columns' ranges, then the spilled float32 rows
        quantized into ``features.bin`` chunk by chunk (the spill removed after)."""
        assert self._range is not None and self._layout is not None  # callers check
        scale, zero = self._range.params()
        fmt = RowFormat.of_encoding("int8", self._feature_dim, scale=scale, zero=zero)
        self._format, self._quantizer, self._cast_error = fmt, QUANTIZER, CastError()
        spill, step = self._tmp / SPILL_NAME, max(1, _SPILL_CHUNK_BYTES // RowFormat.float32(self._feature_dim).stored_row_bytes)
        with open(spill, "rb") as src, open(self._tmp / "features.bin", "wb") as dst:
            self._features_file, self._rows_done = dst, 0
            while len(x := np.fromfile(src, dtype=np.float32, count=step * self._feature_dim)):
                x = x.reshape(-1, self._feature_dim)
                words = encode_rows(x, fmt, first_row=self._rows_done)
                self._cast_error.update(x, decode_rows(words, fmt))
                self._write_rows(words)
            dst.flush()
            os.fsync(dst.fileno())
        spill.unlink()
        self._range = None

    def _feature_entry(self) -> FeatureEntry | None:
        if self._layout is None:
            return None
        fmt = self._format
        params: dict[str, Any] = {}
        if fmt is not None and fmt.scale is not None and fmt.zero is not None:
            params = {"quantizer": self._quantizer or QUANTIZER, "scale": self._write_small("feature_scale", fmt.scale),
                      "zero": self._write_small("feature_zero", fmt.zero)}
        return FeatureEntry(
            file="features.bin", dtype=str(self._feature_dtype), dim=self._feature_dim,
            row_bytes=self._layout.row_bytes, stride=self._layout.stride, layout=self._layout.layout,
            nbytes=self.num_nodes * self._layout.stride, encoding=self._encoding, **params,
        )

    def _install(self) -> None:
        if self._overwrite:
            check_overwrite(self.path, owned=dataset_names, what="dataset")
        install_directory(self._tmp, self.path, overwrite=self._overwrite, exists=DatasetExistsError(
            f"{self.path} appeared while writing; choose another path or pass overwrite"))
        self._tmpdir.release()

