"""Reading an on-disk dataset: :func:`open_dataset` validates, :class:`Dataset` gives the arrays.

What is held in RAM: the splits from the start; ``indptr`` and ``labels`` (O(N) each) from their
first access on (each is loaded once, its checksum checked again); ``indices`` from its first access
on when it fits (``indices_in_ram``; default: at most a quarter of the memory available then).
Otherwise ``indices``, and the features (also read with O_DIRECT by the extractors, see ``_layout``),
are memory-mapped; :meth:`Dataset.indptr_map` maps ``indptr`` too, for bounded-memory readers.

A memory map of a file that is truncated (or whose pages fail to read) under a running process kills
it with SIGBUS on the next touch, which no Python code can catch.  So ``indices`` is read into RAM
whenever it fits (then nothing can take it away), and every map this class makes holds its own fd:
:meth:`Dataset.check_mapped` compares the files' sizes with the manifest's and raises
:class:`DatasetCorruptError` if one shrank.  The samplers call it before every batch, ``SyncLoader``
before every gather, so a truncation between batches is a named error; a truncation *during* one
batch's kernel, or an EIO on a mapped page, remain fatal, which is why ``indices`` goes to RAM first.
Opening checks the manifest, every file's presence and exact size, the checksums of the small files,
``indptr`` monotonicity and the id ranges of splits and labels, scanning ``indptr`` and ``labels`` in
fixed-size blocks (so opening holds neither); :meth:`Dataset.verify` additionally scans ``indices``
and the features for NaN/inf (O(E + N·D), so it is not done on open).

A reordered dataset (``outre reorder``) also names ``original_ids`` and ``new_ids``, a permutation and
its inverse: their ranges are scanned on open (in blocks, like ``labels``), and on first use
(:meth:`Dataset.original_ids`, :meth:`Dataset.ids_of_original`) both are loaded and checked to be
inverse permutations before any id is mapped through them.

Changes under a reader: opening records a fingerprint (inode, size, mtime, ctime: ``_watch``) of every
file the manifest names, before anything is read; :meth:`Dataset.file_watch` compares files with
those, so a loader notices a file rewritten or replaced since (see ``_watch`` for what it cannot see).
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetCorruptError, DatasetNotFoundError
from .._units import available_memory
from ._feature_file import NODE_FEATURES, FeatureFile, FeatureKey
from ._dataset_summary import summarize
from ._file_reads import (
    blocks, check_disjoint, check_split, load_small, open_data_file, scan_features, scan_indptr, scan_labels, scan_node_ids,
)
from ._layout import RowLayout
from ._manifest import EDGE_SPLIT_NAMES, MANIFEST_NAME, SPLIT_NAMES, Manifest, read_manifest
from ._id_checks import node_id_array
from ._paths import confined
from ._row_format import RowFormat
from ._type_manifest import type_files
from ._typed_dataset import TypedDataset
from ._watch import WATCH_INTERVAL_S, Fingerprint, FileWatch


class Dataset(TypedDataset):
    """An opened, validated dataset directory.  Cheap to open; arrays are loaded lazily.  Its node
    and edge types (``node_types``, ``global_ids``, ``features_of``...) come from :class:`TypedDataset`."""

    def __init__(self, path: Path, manifest: Manifest, *, indices_in_ram: bool | None = None) -> None:
        self.path = path
        self.manifest = manifest
        self.indices_in_ram = indices_in_ram  # None: when it fits a quarter of the available memory
        self._mapped: list[tuple[int, Path, int]] = []  # (own fd, path, manifest size) of each map
        # before any scan: what the arrays read from now on must still be (``file_watch``)
        self._fingerprints = {path / name: Fingerprint.of(path / name) for name in _file_names(manifest)}
        scan_indptr(path, manifest.indptr, manifest.num_edges)
        if manifest.labels is not None:
            scan_labels(path, manifest.labels, manifest.num_classes)
        for entry in (manifest.original_ids, manifest.new_ids):
            if entry is not None:
                scan_node_ids(path, entry, manifest.num_nodes)
        self._splits = {name: load_small(path, e) for name, e in manifest.splits.items()}
        for name, ids in self._splits.items():
            check_split(path, name, ids, manifest.num_nodes)
        check_disjoint(path, self._splits)
        if manifest.features is not None and manifest.features.param_files:
            self.feature_files  # an int8 entry's scale and zero: read and checked on open  # noqa: B018
        if manifest.types is not None:
            self._check_split_types()

    # -- sizes -----------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self.manifest.num_nodes

    @property
    def num_edges(self) -> int:
        return self.manifest.num_edges

    @property
    def num_classes(self) -> int:
        return self.manifest.num_classes

    @property
    def feature_dim(self) -> int:
        return 0 if self.manifest.features is None else self.manifest.features.dim

    @property
    def feature_dtype(self) -> np.dtype:
        """The stored dtype of the node features (``row_format.stored``)."""
        return self.feature_file.dtype

    @property
    def row_layout(self) -> RowLayout:
        """Byte layout of ``features.bin`` (stride, row bytes): what O_DIRECT readers need."""
        return self.feature_file.layout

    @property
    def row_format(self) -> RowFormat:
        """How a node feature row is stored, held and delivered: the bytes every cache and plan counts."""
        return self.feature_file.format

    @property
    def features_path(self) -> Path:
        return self.feature_file.path

    @cached_property
    def feature_files(self) -> Mapping[FeatureKey, FeatureFile]:
        """Every feature matrix by :class:`FeatureKey` (read-only; empty for a topology-only dataset).

        A second name beside :attr:`features` rather than a new meaning of it: ``features`` stays the
        memmap ``[N, D]`` that PyG users and the in-RAM readers index; this is the typed view (path,
        row format, layout) the loader sizes from.  A homogeneous dataset has one key, ``NODE_FEATURES``;
        a typed one a key ``FeatureKey("node", T, "x")`` per node type ``T`` that has features (its
        ``num_rows`` is the type's node count, row ``i`` the type's local node ``i``)."""
        types = self.manifest.types
        if types is not None:
            return MappingProxyType({FeatureKey("node", t.name, "x"): self._feature_file(t.features, t.count)
                                     for t in types.node_types if t.features is not None})
        f = self.manifest.features
        if f is None:
            return MappingProxyType({})
        return MappingProxyType({NODE_FEATURES: self._feature_file(f, self.num_nodes)})

    def _feature_file(self, f: Any, num_rows: int) -> FeatureFile:
        layout = RowLayout(row_bytes=f.row_bytes, stride=f.stride, layout=f.layout)  # type: ignore[arg-type]
        try:
            fmt = RowFormat.of_entry(f, self.path)
        except ConfigError as exc:  # scale/zero files that pass their checksum but hold a bad value
            raise DatasetCorruptError(f"{self.path}: the feature entry does not decode ({exc}); re-create the "
                                      "dataset") from exc
        return FeatureFile(path=self.path / f.file, num_rows=num_rows, format=fmt, layout=layout)

    @property
    def feature_file(self) -> FeatureFile:
        """The node feature file (``feature_files[NODE_FEATURES]``); a :class:`ConfigError` without features."""
        self.require_homogeneous("one feature file for all nodes")
        file = self.feature_files.get(NODE_FEATURES)
        if file is None:
            raise ConfigError(f"dataset {self.path} has no features")
        return file

    # -- arrays ----------------------------------------------------------------------------------
    @cached_property
    def indptr(self) -> np.ndarray:
        """CSC offsets ``[N+1]`` (int64), loaded on first access."""
        return load_small(self.path, self.manifest.indptr)

    def indptr_map(self) -> np.ndarray:
        """``indptr`` memory-mapped read-only (validated on open): its pages are clean page cache the
        kernel can reclaim, for readers that must stay within a memory cap."""
        e = self.manifest.indptr
        return self._map(e.file, np.dtype(e.dtype), e.shape, random=False)

    def _map(self, name: str, dtype: np.dtype, shape: tuple[int, ...], *, random: bool = True) -> np.ndarray:
        """A read-only map of ``name`` whose size :meth:`check_mapped` can check through its own fd."""
        path = self.path / name
        size = int(np.prod(shape)) * dtype.itemsize
        fd = open_data_file(path, size)  # a regular file of the manifest's exact size: the fd that is mapped
        weakref.finalize(self, os.close, fd)
        self._mapped.append((fd, path, size))
        return _random_access_map(fd, dtype, shape, random=random)

    def check_mapped(self) -> None:
        """Raise :class:`DatasetCorruptError` if a file this dataset memory-maps is now shorter than
        the manifest says (truncated under a running reader): touching its tail would be a SIGBUS."""
        for fd, path, size in self._mapped:
            have = os.fstat(fd).st_size
            if have < size:
                raise DatasetCorruptError(f"{path} shrank to {have} bytes while in use (the manifest says {size}); "
                                          "something truncated it under this reader: re-create the dataset")

    @property
    def mapped_paths(self) -> list[Path]:
        """The files this dataset memory-maps (read on every touch, so watched by a loader)."""
        return [path for _, path, _ in self._mapped]

    def file_watch(self, paths: Iterable[Path], *, interval_s: float = WATCH_INTERVAL_S) -> FileWatch:
        """A :class:`FileWatch` of ``paths`` against their fingerprints when this dataset was opened
        (a path that is not one of its files: against its fingerprint now)."""
        return FileWatch({p: self._fingerprints[p] if p in self._fingerprints else Fingerprint.of(p) for p in paths},
                         interval_s=interval_s)

    @cached_property
    def labels(self) -> np.ndarray | None:
        """Class ids ``[N]`` (-1: unlabelled), loaded on first access; ``None`` without labels."""
        if self.manifest.labels is None:
            return None
        return load_small(self.path, self.manifest.labels)

    @cached_property
    def indices(self) -> np.ndarray:
        """In-neighbour ids (a plain ndarray, usable from numba): read into RAM when it fits
        (``indices_in_ram``), else memory-mapped read-only and advised ``MADV_RANDOM`` because samplers
        touch neighbour lists at random (see ``features``)."""
        e = self.manifest.indices
        if e.nbytes == 0:
            return np.empty(0, dtype=e.dtype)
        in_ram = self.indices_in_ram
        if in_ram is None:
            in_ram = e.nbytes <= available_memory() // 4
        if in_ram:
            return load_small(self.path, e)
        return self._map(e.file, np.dtype(e.dtype), e.shape)

    @cached_property
    def features(self) -> np.ndarray:
        """Feature matrix ``[N, D]`` as a read-only memmap view (strided when rows are padded).

        Like ``indices`` it is advised ``MADV_RANDOM``: a fault then reads its page, not the device's
        read-ahead window (megabytes on some disks), which would multiply a random gather's I/O by the
        window's size over a page's.
        """
        self.require_homogeneous("[N, D] feature matrix")
        f = self.manifest.features
        if f is None:
            raise ConfigError(f"dataset {self.path} has no features; it is topology-only")
        dtype = np.dtype(f.dtype)
        full = self._map(f.file, dtype, (self.num_nodes, f.stride // dtype.itemsize))
        return full[:, : f.dim]

    # -- relabelled datasets (``outre reorder``) ------------------------------------------------------
    @property
    def reordered(self) -> bool:
        """True for a relabelled dataset (``outre reorder``): node ids differ from the original's."""
        return self.manifest.original_ids is not None

    def original_ids(self, ids: Any) -> np.ndarray:
        """The original dataset's id of each node ``ids`` of this one (int64), e.g. of a batch's
        ``n_id``, to report predictions per original node; ``ids`` unchanged (as int64) when this
        dataset is not a reordered one.  Ids outside ``[0, num_nodes)`` are a :class:`ConfigError`."""
        ids = node_id_array(ids, self.num_nodes, "ids")
        return ids if self.manifest.original_ids is None else self._permutation[0][ids]

    def ids_of_original(self, original: Any) -> np.ndarray:
        """This dataset's id of each original node id in ``original`` (the inverse of
        :meth:`original_ids`), e.g. to pick the seeds of original nodes."""
        ids = node_id_array(original, self.num_nodes, "original ids")
        return ids if self.manifest.new_ids is None else self._permutation[1][ids]

    @cached_property
    def _permutation(self) -> tuple[np.ndarray, np.ndarray]:
        """``(original_ids, new_ids)`` loaded once (checksums checked) and checked to be inverse
        permutations of each other (their ranges were checked on open)."""
        m = self.manifest
        assert m.original_ids is not None and m.new_ids is not None  # callers check
        to_old, to_new = load_small(self.path, m.original_ids), load_small(self.path, m.new_ids)
        wrong = to_new[to_old] != np.arange(self.num_nodes, dtype=np.int64)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise DatasetCorruptError(f"{self.path}: {m.original_ids.file} and {m.new_ids.file} are not inverse "
                                      f"permutations (node {i}: original id {int(to_old[i])}, whose new id is "
                                      f"{int(to_new[to_old[i]])}); re-create the reordered dataset")
        return to_old, to_new

    def split(self, name: str) -> np.ndarray:
        """Node ids of split ``name`` (``train``, ``val``, ``test``)."""
        if name not in self._splits:
            have = sorted(self._splits) or "none"
            raise ConfigError(f"dataset {self.path} has no split {name!r}; it has: {have}")
        return self._splits[name]

    @property
    def split_names(self) -> list[str]:
        return [s for s in SPLIT_NAMES if s in self._splits]

    def edge_split(self, name: str) -> np.ndarray:
        """Supervision pairs ``[2, E]`` (int64, row 0 the source) of edge split ``name`` (``train``,
        ``val``, ``test``, ``val_neg``, ``test_neg``; written by ``oa.split_edges``), read whole and
        checked (checksum, ids in range) on each call: a link loader takes them once."""
        entry = self.manifest.edge_splits.get(name)
        if entry is None:
            have = self.edge_split_names or "none (make them with `outre split-edges`)"
            raise ConfigError(f"dataset {self.path} has no edge split {name!r}; it has: {have}")
        pairs = load_small(self.path, entry)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= self.num_nodes):
            bad = int(pairs.min()) if pairs.min() < 0 else int(pairs.max())
            raise DatasetCorruptError(f"{self.path}: edge split {name!r} holds node {bad}, outside "
                                      f"[0, {self.num_nodes}); re-create it with `outre split-edges`")
        return pairs

    @property
    def edge_split_names(self) -> list[str]:
        return [s for s in EDGE_SPLIT_NAMES if s in self.manifest.edge_splits]

    def in_degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def verify(self, chunk: int = 1 << 24) -> None:
        """Full O(E + N·D) scan: every neighbour id in range, every feature value finite (a NaN in
        ``features.bin`` would train to ``loss = nan``).  Raises :class:`DatasetCorruptError`.

        It reads the files in blocks (never through a map: a file truncated meanwhile is a short read
        and a named error here, not a SIGBUS), holding one block at a time."""
        e, start = self.manifest.indices, 0
        for part in blocks(self.path, e, items=chunk):
            if len(part) and (part.min() < 0 or part.max() >= self.num_nodes):
                raise DatasetCorruptError(
                    f"{self.path}: indices[{start}:{start + len(part)}] hold ids outside [0, {self.num_nodes}); re-convert"
                )
            if self.manifest.types is not None:
                self._verify_types(start, part)
            start += len(part)
        if start != self.num_edges:
            raise DatasetCorruptError(f"{self.path}: {e.file} ends after {start} ids, the manifest says "
                                      f"{self.num_edges} (truncated); re-create the dataset")
        if self.manifest.features is not None:
            scan_features(self.path, self.manifest.features, self.num_nodes, items=chunk)
        for t in () if self.manifest.types is None else self.manifest.types.node_types:
            if t.features is not None:
                scan_features(self.path, t.features, t.count, items=chunk)

    def summary(self) -> dict[str, Any]:
        """Counts, degree statistics, file sizes and split sizes (what ``outre info`` prints; the
        fields are assembled in ``_dataset_summary``)."""
        deg = self.in_degrees()
        fmt = None if self.manifest.features is None else self.row_format
        return summarize(self.path, self.manifest, deg, self._splits, fmt)

    def __repr__(self) -> str:
        if self.is_hetero:
            return (f"Dataset({str(self.path)!r}, node_types={self.num_nodes_by_type}, "
                    f"edge_types={len(self.edge_types)}, num_edges={self.num_edges}, num_classes={self.num_classes})")
        return (f"Dataset({str(self.path)!r}, num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"feature_dim={self.feature_dim}, num_classes={self.num_classes})")


def open_dataset(path: str | os.PathLike[str], *, indices_in_ram: bool | None = None) -> Dataset:
    """Open and validate the dataset at ``path``; raise a :class:`DatasetError` subclass if unusable.

    ``indices_in_ram``: read ``indices`` into RAM (True), memory-map it (False), or decide by size on
    first access (None: RAM when it takes at most a quarter of the memory available then)."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetNotFoundError(f"no dataset at {root}: not a directory; create one with `outre convert` or `outre generate`")
    if not (root / MANIFEST_NAME).exists():  # anything else there (a FIFO, a folder) is read_manifest's named error
        raise DatasetNotFoundError(f"no dataset at {root}: {MANIFEST_NAME} is missing (incomplete write?); re-create it")
    manifest = read_manifest(root)
    _check_files(root, manifest)
    return Dataset(root, manifest, indices_in_ram=indices_in_ram)


def _check_files(root: Path, m: Manifest) -> None:
    """Names confined to ``root``, counts agreeing with the shapes, every file of the exact size (the
    manifest's own ``nbytes == prod(shape) * itemsize`` is the parser's), before anything is read."""
    if m.indptr.shape != (m.num_nodes + 1,):
        raise DatasetCorruptError(f"{root}: indptr shape {m.indptr.shape} != ({m.num_nodes + 1},)")
    if m.indices.shape != (m.num_edges,):
        raise DatasetCorruptError(f"{root}: indices shape {m.indices.shape} != ({m.num_edges},)")
    if m.labels is not None and m.labels.shape != (m.num_nodes,):
        raise DatasetCorruptError(f"{root}: labels shape {m.labels.shape} != ({m.num_nodes},)")
    entries: list[tuple[str, str, int]] = [("indptr", m.indptr.file, m.indptr.nbytes),
                                           ("indices", m.indices.file, m.indices.nbytes)]
    if m.features is not None:
        f = m.features
        if f.nbytes != m.num_nodes * f.stride:
            raise DatasetCorruptError(f"{root}: feature layout in the manifest is inconsistent (dim={f.dim}, stride={f.stride})")
        entries.append(("features", f.file, f.nbytes))
        entries += [(f"features {p.file}", p.file, p.nbytes) for p in f.param_files]
    if m.labels is not None:
        entries.append(("labels", m.labels.file, m.labels.nbytes))
    entries += [(f"split {name!r}", e.file, e.nbytes) for name, e in m.splits.items()]
    entries += [(f"edge split {name!r}", e.file, e.nbytes) for name, e in m.edge_splits.items()]
    for what, e in (("original_ids", m.original_ids), ("new_ids", m.new_ids)):
        if e is not None:
            if e.shape != (m.num_nodes,):
                raise DatasetCorruptError(f"{root}: {what} shape {e.shape} != ({m.num_nodes},); re-create the dataset")
            entries.append((what, e.file, e.nbytes))
    if m.types is not None:
        entries += type_files(m.types)
    for what, name, expected in entries:
        p = confined(root, name, DatasetCorruptError, what)
        os.close(open_data_file(p, expected))  # a regular file (no FIFO, device, folder) of the exact size


def _file_names(m: Manifest) -> list[str]:
    """Every data file the manifest names."""
    entries = [m.indptr, m.indices, m.features, m.labels, m.original_ids, m.new_ids, *m.splits.values(),
               *m.edge_splits.values(), *([] if m.features is None else m.features.param_files)]
    return [e.file for e in entries if e is not None] + ([] if m.types is None else [f for _, f, _ in type_files(m.types)])


def _random_access_map(fd: int, dtype: np.dtype, shape: tuple[int, ...], *, random: bool = True) -> np.ndarray:
    """A read-only ndarray over a map of ``fd`` (the inode whose size ``check_mapped`` watches),
    advised ``MADV_RANDOM`` (no read-around on faults) where supported and asked."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype=dtype)
    mm = mmap.mmap(fd, nbytes, access=mmap.ACCESS_READ)
    if random and hasattr(mmap, "MADV_RANDOM"):
        mm.madvise(mmap.MADV_RANDOM)
    return np.ndarray(shape, dtype=dtype, buffer=mm)
