"""Opening ``partitions/<name>/``: validation against ``meta.json`` and the dataset, and access.

:func:`open_partitions` takes a partition *name* (a plain folder name under ``partitions/``, as
:func:`list_partitions` lists them; never a path) and checks the meta (format, version, the dataset
identity: partitions of another dataset, or of another version of this one, are refused with
:class:`PartitionMismatchError`), every file name (plain, inside the folder: no absolute path, ``..``
or symlink out), its dtype (an allow-list, see ``_checks``), its exact size against the counts the
dataset implies (so nothing larger is ever allocated), the checksums of the O(N) arrays it loads
and their invariants (``_checks``); anything else raises :class:`PartitionCorruptError`, and an
``OSError`` while reading :class:`PartitionReadError` with the file and byte offset.

Offsets and node ids are held as int32 where they fit (``part_nodes``, its inverse ``slot_of_node``
when ``N - 1 <= INT32_MAX``, ``adj_ptr`` when ``E <= INT32_MAX``), converted after the checks; the
files stay int64 (the format is unchanged).  Why: on an 8 M-node graph each is 61 MiB as int64, and
``OutreLoader(partitions=...)`` holds all three for its life (a part of its memory plan).  ``cross``
(the cut-edge counts that rank the neighbour cache) is needed only to build that cache:
:meth:`PartitionSet.release_cross` lets the loader drop it then.

``adj_indices`` (O(E)) is never loaded whole: :meth:`PartitionSet.read_adjacency` reads the
contiguous byte range of a set of partitions with one ``pread`` per run of adjacent ones, and
range-checks what it read before any kernel sees it.

A live reader is immune to the folder being replaced (``outre partition --overwrite``): every file
is opened through one descriptor of the folder taken at open, and ``adj_indices`` stays open for the
life of the :class:`PartitionSet`, so an open set keeps reading the files it validated (the old
inodes, kept alive by the descriptor) instead of mixing old offsets with new ids.  ``close()`` (or
garbage collection) releases it.
"""

from __future__ import annotations

import os
import weakref
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from outre_async.errors import (
    ConfigError,
    PartitionCorruptError,
    PartitionError,
    PartitionMismatchError,
    PartitionNotFoundError,
    PartitionReadError,
)
from outre_async.store._dataset import Dataset
from outre_async.store._identity import check_identity
from outre_async.store._paths import confined
from outre_async.store._safe_read import fd_exhausted, open_regular, read_json

from ._checks import ALLOWED_DTYPES, check_arrays, check_block
from ._format import FORMAT_NAME, FORMAT_VERSION, META_NAME, PARTITIONS_DIR, check_name

_LOADED = ("assignment", "part_ptr", "part_nodes", "train_ptr", "train_nodes", "adj_ptr", "cross")
_META_MAX_BYTES = 16 << 20  # a meta.json is a few KiB; a larger one is refused before it is read
INT32_MAX = int(np.iinfo(np.int32).max)  # the largest value held as int32 in RAM (tests lower it)


@dataclass(frozen=True, slots=True)
class AdjacencyBlock:
    """A small CSC over some partitions' nodes: ``nodes[i]``'s in-neighbours (global ids) are
    ``indices[indptr[i]:indptr[i+1]]``."""

    nodes: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.nodes.nbytes + self.indptr.nbytes + self.indices.nbytes)


class PartitionSet:
    """An opened, validated partition folder (O(N) arrays in RAM, the adjacency on disk)."""

    def __init__(self, ds: Dataset, path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray],
                 adj_fd: int) -> None:
        self.dataset, self.path, self.meta = ds, path, meta
        self.assignment: np.ndarray = arrays["assignment"]
        self.part_ptr: np.ndarray = arrays["part_ptr"]
        self.part_nodes: np.ndarray = arrays["part_nodes"]
        self.train_ptr: np.ndarray = arrays["train_ptr"]
        self.train_nodes_all: np.ndarray = arrays["train_nodes"]
        self.adj_ptr: np.ndarray = arrays["adj_ptr"]
        self._cross: np.ndarray | None = arrays["cross"]
        entry = meta["files"]["adj_indices"]
        self._adj_file = path / entry["file"]
        self._adj_dtype = np.dtype(entry["dtype"])
        self._adj_fd = adj_fd
        self._closer = weakref.finalize(self, os.close, adj_fd)

    def close(self) -> None:
        """Release the descriptor of ``adj_indices`` (idempotent; garbage collection does it too)."""
        self._closer()

    def __enter__(self) -> PartitionSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def cross(self) -> np.ndarray:
        """int32 [N]: every node's in-edges from other partitions (what ranks the neighbour cache)."""
        if self._cross is None:
            raise PartitionError(f"partitions {self.name!r}: cross was released once the neighbour cache was "
                                 "built (release_cross); open the partitions again to read it")
        return self._cross

    def release_cross(self) -> None:
        """Drop ``cross`` (4 N bytes): its one reader, the neighbour cache's build, is done."""
        self._cross = None

    @property
    def held_bytes(self) -> int:
        """Bytes of the O(N) arrays this set holds: ``cross`` until released, and ``slot_of_node``
        whether or not a sampler has made it yet (the same length and dtype as ``part_nodes``)."""
        arrays = [self.assignment, self.part_ptr, self.part_nodes, self.train_ptr, self.train_nodes_all, self.adj_ptr]
        arrays += [self._cross] if self._cross is not None else []
        return sum(int(a.nbytes) for a in arrays) + int(self.part_nodes.nbytes)

    @cached_property
    def slot_of_node(self) -> np.ndarray:
        """Inverse of ``part_nodes``: the position of every node in the partition order (its dtype:
        positions are below N too)."""
        slot = np.empty(len(self.part_nodes), self.part_nodes.dtype)
        slot[self.part_nodes] = np.arange(len(self.part_nodes), dtype=self.part_nodes.dtype)
        return slot

    @property
    def adj_dtype(self) -> np.dtype:
        """The dtype of ``adj_indices`` (the dataset's ``indices``): what a loaded block's lists hold."""
        return self._adj_dtype

    @property
    def adj_itemsize(self) -> int:
        """Bytes of one neighbour id in ``adj_indices`` (what a loaded adjacency block holds per edge)."""
        return int(self._adj_dtype.itemsize)

    @property
    def num_parts(self) -> int:
        return len(self.part_ptr) - 1

    def nodes(self, p: int) -> np.ndarray:
        return self.part_nodes[self.part_ptr[p] : self.part_ptr[p + 1]]

    def train_nodes(self, p: int) -> np.ndarray:
        return self.train_nodes_all[self.train_ptr[p] : self.train_ptr[p + 1]]

    def read_adjacency(self, parts: Any) -> AdjacencyBlock:
        """The partition-wise adjacency of ``parts`` (in the given order) with sequential reads from
        the descriptor opened at :func:`open_partitions`, range-checked before it is returned."""
        if not self._closer.alive:
            raise PartitionError(f"partitions {self.name!r} were closed; open them again")
        parts = [int(p) for p in parts]
        nodes = np.concatenate([self.nodes(p) for p in parts]) if parts else np.empty(0, np.int64)
        lens = [int(self.adj_ptr[self.part_ptr[p + 1]] - self.adj_ptr[self.part_ptr[p]]) for p in parts]
        indices = np.empty(sum(lens), dtype=self._adj_dtype)
        indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        file_pos = np.empty(len(parts), np.int64)
        block_pos = np.empty(len(parts), np.int64)
        pos, slot = 0, 0
        for r, (p, length) in enumerate(zip(parts, lens, strict=True)):
            lo, hi = int(self.part_ptr[p]), int(self.part_ptr[p + 1])
            start = int(self.adj_ptr[lo])
            _pread(self._adj_fd, indices[pos : pos + length], start * self._adj_dtype.itemsize, self._adj_file)
            indptr[slot + 1 : slot + 1 + hi - lo] = self.adj_ptr[lo + 1 : hi + 1] - start + pos
            file_pos[r], block_pos[r] = start, pos
            pos += length
            slot += hi - lo
        check_block(self._adj_file, indices, self.dataset.num_nodes, file_pos, block_pos)
        return AdjacencyBlock(nodes.astype(np.int64, copy=False), indptr, indices)

    def read_slots(self, lo: int, hi: int, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lists of partition-order slots ``lo..hi`` (nodes ``part_nodes[lo:hi]``) with one
        sequential read into ``out`` (large enough: the caller sizes it from ``adj_ptr``):
        ``(ptr [hi-lo+1], ids)``, range-checked before they are returned (the reorderer's stream)."""
        if not self._closer.alive:
            raise PartitionError(f"partitions {self.name!r} were closed; open them again")
        start, stop = int(self.adj_ptr[lo]), int(self.adj_ptr[hi])
        ids = out[: stop - start]
        _pread(self._adj_fd, ids, start * self._adj_dtype.itemsize, self._adj_file)
        check_block(self._adj_file, ids, self.dataset.num_nodes, np.array([start]), np.array([0]))
        return self.adj_ptr[lo : hi + 1] - start, ids

    def __repr__(self) -> str:
        q = self.meta.get("quality", {})
        return (f"PartitionSet({self.name!r}, num_parts={self.num_parts}, "
                f"edge_cut_fraction={q.get('edge_cut_fraction', float('nan')):.4f})")


def _pread(fd: int, out: np.ndarray, offset: int, path: Path) -> None:
    view = out.data.cast("B")  # ndarray.data: the array's memoryview
    done = 0
    while done < len(view):
        try:
            got = os.preadv(fd, [view[done:]], offset + done)
        except OSError as exc:
            raise PartitionReadError(f"read failed ({exc.strerror}); check the disk, then re-partition",
                                     path=path, offset=offset + done, errno=exc.errno) from exc
        if got <= 0:
            raise PartitionCorruptError(f"{path} ends at byte {offset + done}, expected more; re-partition")
        done += got


def partitions_dir(ds: Dataset) -> Path:
    return ds.path / PARTITIONS_DIR


def list_partitions(ds: Dataset) -> list[dict[str, Any]]:
    """One summary per folder under ``partitions/`` (``status``: ok, or why it cannot be used)."""
    root = partitions_dir(ds)
    out: list[dict[str, Any]] = []
    if not root.is_dir():
        return out
    for path in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        row: dict[str, Any] = {"name": path.name}
        try:
            _folder(ds, path.name)
            meta = _read_meta(path)
            _check_identity(ds, path, meta)
            for stem, count in _counts(ds, path, meta).items():
                _check_size(path, _entry(ds, path, meta, stem, count))
            q = meta.get("quality", {})
            row.update(status="ok", parts=meta.get("num_parts"), levels=meta.get("config", {}).get("levels"),
                       mode=meta.get("config", {}).get("mode"), passes=meta.get("config", {}).get("passes"),
                       edge_cut_fraction=q.get("edge_cut_fraction"), node_balance=q.get("node_balance"),
                       train_balance=q.get("train_balance"), seconds=meta.get("seconds"))
        except (ConfigError, PartitionCorruptError, PartitionMismatchError, PartitionReadError) as exc:
            row.update(status=str(exc))
        out.append(row)
    return out


def open_partitions(ds: Dataset, name: str) -> PartitionSet:
    """Open and validate ``ds``'s partitions ``name`` (a folder name under ``partitions/``)."""
    path = partitions_folder(ds, name)
    dir_fd = _open(path, os.open, path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        meta = _read_meta(path, dir_fd)
        _check_identity(ds, path, meta)
        counts = _counts(ds, path, meta)
        entries = {stem: _entry(ds, path, meta, stem, count) for stem, count in counts.items()}
        arrays = {stem: _load(entries[stem], dir_fd) for stem in _LOADED}
        adj_fd = _open_checked(entries["adj_indices"], dir_fd)
    finally:
        os.close(dir_fd)
    try:
        check_arrays(path, ds.indptr, counts["part_ptr"] - 1, arrays,
                     {stem: e.file.name for stem, e in entries.items()})
    except BaseException:
        os.close(adj_fd)
        raise
    return PartitionSet(ds, path, meta, _narrowed(arrays, ds.num_nodes, ds.num_edges), adj_fd)


def _narrowed(arrays: dict[str, np.ndarray], num_nodes: int, num_edges: int) -> dict[str, np.ndarray]:
    """``part_nodes`` (ids below N) and ``adj_ptr`` (offsets up to E) as int32 where their range fits
    (the module docstring); checked arrays only, so the range is the counts'."""
    out = dict(arrays)
    for stem, top in (("part_nodes", num_nodes - 1), ("adj_ptr", num_edges)):
        if top <= INT32_MAX and out[stem].dtype != np.int32:
            out[stem] = out[stem].astype(np.int32)
    return out


def partitions_folder(ds: Dataset, name: Any) -> Path:
    """The folder of ``ds``'s partitions ``name``, or a :class:`PartitionNotFoundError` naming the ones it
    has: cheap (nothing read), so ``outre train`` checks it before its set-up."""
    path = _folder(ds, name)
    if not path.is_dir():
        have = [p["name"] for p in list_partitions(ds)] or "none"
        raise PartitionNotFoundError(f"no partitions {name!r} under {ds.path}; it has: {have}; "
                                     f"create them with `outre partition {ds.path} --parts K --name {name}`")
    return path


def _folder(ds: Dataset, name: Any) -> Path:
    """``partitions/<name>`` for a plain ``name``, inside the dataset folder (symlinks resolved)."""
    if not isinstance(name, str):
        raise TypeError(f"partitions must be a partition name (str), got {type(name).__name__}")
    check_name(name)
    root = confined(ds.path, PARTITIONS_DIR, PartitionCorruptError, "the partitions folder")
    return confined(root, name, PartitionCorruptError, f"partition folder {name!r}")


@dataclass(frozen=True, slots=True)
class _Entry:
    file: Path
    dtype: np.dtype
    nbytes: int
    crc32: int | None


def _open(path: Path, opener: Any, *args: Any, **kwargs: Any) -> int:
    try:
        return int(opener(*args, **kwargs))
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{path} is missing (incomplete write, or replaced while opening); "
                                    "re-partition or retry") from exc
    except OSError as exc:
        raise fd_exhausted(exc, path) or PartitionReadError(f"cannot open ({exc.strerror})", path=path, offset=0,
                                                            errno=exc.errno) from exc


def _read_meta(path: Path, dir_fd: int | None = None) -> dict[str, Any]:
    file = path / META_NAME
    try:  # a regular file of at most 16 MiB, bounded JSON (``store._safe_read``)
        meta = read_json(file, error=PartitionCorruptError, fix="re-partition", max_bytes=_META_MAX_BYTES, dir_fd=dir_fd)
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{file} is missing (incomplete write, or replaced while opening); "
                                    "re-partition or retry") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise PartitionCorruptError(f"{file} is not an outre-async partition meta; re-partition")
    if meta.get("format_version") != FORMAT_VERSION:
        raise PartitionCorruptError(f"{path} has format_version {meta.get('format_version')!r}, this outre-async "
                                    f"reads {FORMAT_VERSION}; re-partition")
    if not isinstance(meta.get("files"), dict) or not isinstance(meta.get("dataset"), dict):
        raise PartitionCorruptError(f"{file} lacks its 'files' or 'dataset' entry; re-partition")
    return meta


def _check_identity(ds: Dataset, path: Path, meta: dict[str, Any]) -> None:
    check_identity(ds, path, meta["dataset"], error=PartitionMismatchError, made="computed for",
                   redo="re-partition this dataset")


def _counts(ds: Dataset, path: Path, meta: dict[str, Any]) -> dict[str, int]:
    """How many items each file must hold, from the dataset and ``num_parts`` alone."""
    n, k = ds.num_nodes, meta.get("num_parts")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= max(n, 1):
        raise PartitionCorruptError(f"{path}/{META_NAME}: num_parts must be an integer in [1, {max(n, 1)}], "
                                    f"got {k!r}; re-partition")
    train = len(ds.split("train")) if "train" in ds.split_names else 0
    return {"assignment": n, "part_ptr": k + 1, "part_nodes": n, "train_ptr": k + 1, "train_nodes": train,
            "adj_ptr": n + 1, "cross": n, "adj_indices": ds.num_edges}


def _entry(ds: Dataset, path: Path, meta: dict[str, Any], stem: str, count: int) -> _Entry:
    e = meta["files"].get(stem)
    if not isinstance(e, dict):
        raise PartitionCorruptError(f"{path}/{META_NAME} has no entry for {stem!r}; re-partition")
    file = confined(path, e.get("file"), PartitionCorruptError, stem)
    allowed = (str(ds.manifest.indices.dtype),) if stem == "adj_indices" else ALLOWED_DTYPES[stem]
    if e.get("dtype") not in allowed:
        raise PartitionCorruptError(f"{path}/{META_NAME}: {stem} dtype must be one of {allowed}, "
                                    f"got {e.get('dtype')!r}; re-partition")
    dtype = np.dtype(e["dtype"])
    nbytes, crc = e.get("nbytes"), e.get("crc32")
    if nbytes != count * dtype.itemsize or not (crc is None or (isinstance(crc, int) and not isinstance(crc, bool))):
        raise PartitionCorruptError(f"{path}/{META_NAME}: {stem} must hold {count} {dtype} items "
                                    f"({count * dtype.itemsize} bytes), the meta says nbytes={nbytes!r} "
                                    f"crc32={crc!r}; re-partition")
    return _Entry(file, dtype, int(nbytes), crc)


def _open_checked(e: _Entry, dir_fd: int) -> int:
    """A descriptor of ``e``'s file (opened in the folder ``dir_fd``) whose size matches the meta."""
    try:  # a regular file (no FIFO or device: nothing blocks or streams forever) of the meta's size
        return open_regular(e.file, error=PartitionCorruptError, fix="re-partition", exact_bytes=e.nbytes, dir_fd=dir_fd)
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{e.file} is missing (incomplete write, or replaced while opening); "
                                    "re-partition or retry") from exc


def _load(e: _Entry, dir_fd: int) -> np.ndarray:
    fd = _open_checked(e, dir_fd)
    try:
        out = np.empty(e.nbytes // e.dtype.itemsize, dtype=e.dtype)  # read in place: no second copy
        _pread(fd, out, 0, e.file)
    finally:
        os.close(fd)
    if e.crc32 is not None and zlib.crc32(out.data.cast("B")) != e.crc32:
        raise PartitionCorruptError(f"{e.file} fails its checksum; re-partition")
    return out


def _check_size(path: Path, e: _Entry) -> None:
    try:
        os.close(open_regular(e.file, error=PartitionCorruptError, fix="re-partition", exact_bytes=e.nbytes))
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{path}: {e.file.name} is missing; re-partition") from exc
