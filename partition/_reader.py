"""Opening ``partitions/<name>/``: validation against ``meta.json`` and the dataset, and access.

:func:`open_partitions` checks the meta (format, version, the dataset identity: partitions of another
dataset, or of another version of this one, are refused with :class:`PartitionMismatchError`), every
file's presence and exact size, and the checksums of the O(N) arrays it loads; anything else raises
:class:`PartitionCorruptError`.  ``adj_indices`` (O(E)) is never loaded whole: :meth:`read_adjacency`
reads the contiguous byte range of a set of partitions with one ``pread`` per run of adjacent ones.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from outre_async._errors import PartitionCorruptError, PartitionMismatchError, PartitionNotFoundError
from outre_async.store._dataset import Dataset

from ._output import FORMAT_NAME, FORMAT_VERSION, META_NAME, PARTITIONS_DIR, dataset_identity

_LOADED = ("assignment", "part_ptr", "part_nodes", "train_ptr", "train_nodes", "adj_ptr", "cross")


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

    def __init__(self, ds: Dataset, path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.dataset, self.path, self.meta = ds, path, meta
        self.assignment: np.ndarray = arrays["assignment"]
        self.part_ptr: np.ndarray = arrays["part_ptr"]
        self.part_nodes: np.ndarray = arrays["part_nodes"]
        self.train_ptr: np.ndarray = arrays["train_ptr"]
        self.train_nodes_all: np.ndarray = arrays["train_nodes"]
        self.adj_ptr: np.ndarray = arrays["adj_ptr"]
        self.cross: np.ndarray = arrays["cross"]
        entry = meta["files"]["adj_indices"]
        self._adj_file = path / entry["file"]
        self._adj_dtype = np.dtype(entry["dtype"])

    @property
    def name(self) -> str:
        return self.path.name

    @cached_property
    def slot_of_node(self) -> np.ndarray:
        """Inverse of ``part_nodes``: the position of every node in the partition order."""
        slot = np.empty(len(self.part_nodes), self.part_nodes.dtype)
        slot[self.part_nodes] = np.arange(len(self.part_nodes), dtype=self.part_nodes.dtype)
        return slot

    @property
    def num_parts(self) -> int:
        return len(self.part_ptr) - 1

    def nodes(self, p: int) -> np.ndarray:
        return self.part_nodes[self.part_ptr[p] : self.part_ptr[p + 1]]

    def train_nodes(self, p: int) -> np.ndarray:
        return self.train_nodes_all[self.train_ptr[p] : self.train_ptr[p + 1]]

    def read_adjacency(self, parts: Any) -> AdjacencyBlock:
        """The partition-wise adjacency of ``parts`` (in the given order) with sequential reads."""
        parts = [int(p) for p in parts]
        nodes = np.concatenate([self.nodes(p) for p in parts]) if parts else np.empty(0, np.int64)
        lens = [int(self.adj_ptr[self.part_ptr[p + 1]] - self.adj_ptr[self.part_ptr[p]]) for p in parts]
        indices = np.empty(sum(lens), dtype=self._adj_dtype)
        indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        fd = os.open(self._adj_file, os.O_RDONLY)
        try:
            pos, slot = 0, 0
            for p, length in zip(parts, lens, strict=True):
                lo, hi = int(self.part_ptr[p]), int(self.part_ptr[p + 1])
                start = int(self.adj_ptr[lo])
                _pread(fd, indices[pos : pos + length], start * self._adj_dtype.itemsize, self._adj_file)
                indptr[slot + 1 : slot + 1 + hi - lo] = self.adj_ptr[lo + 1 : hi + 1] - start + pos
                pos += length
                slot += hi - lo
        finally:
            os.close(fd)
        return AdjacencyBlock(nodes.astype(np.int64, copy=False), indptr, indices)

    def __repr__(self) -> str:
        q = self.meta.get("quality", {})
        return (f"PartitionSet({self.name!r}, num_parts={self.num_parts}, "
                f"edge_cut_fraction={q.get('edge_cut_fraction', float('nan')):.4f})")


def _pread(fd: int, out: np.ndarray, offset: int, path: Path) -> None:
    view = memoryview(out).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
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
            meta = _read_meta(path)
            _check_identity(ds, path, meta)
            for stem in (*_LOADED, "adj_indices"):
                _check_size(path, meta, stem)
            q = meta.get("quality", {})
            row.update(status="ok", parts=meta.get("num_parts"), levels=meta.get("config", {}).get("levels"),
                       mode=meta.get("config", {}).get("mode"), passes=meta.get("config", {}).get("passes"),
                       edge_cut_fraction=q.get("edge_cut_fraction"), node_balance=q.get("node_balance"),
                       train_balance=q.get("train_balance"), seconds=meta.get("seconds"))
        except (PartitionCorruptError, PartitionMismatchError) as exc:
            row.update(status=str(exc))
        out.append(row)
    return out


def open_partitions(ds: Dataset, name: str) -> PartitionSet:
    """Open and validate ``ds``'s partitions ``name``."""
    path = partitions_dir(ds) / name
    if not path.is_dir():
        have = [p["name"] for p in list_partitions(ds)] or "none"
        raise PartitionNotFoundError(f"no partitions {name!r} under {ds.path}; it has: {have}; "
                                     f"create them with `outre partition {ds.path} --parts K --name {name}`")
    meta = _read_meta(path)
    _check_identity(ds, path, meta)
    arrays = {stem: _load(path, meta, stem) for stem in _LOADED}
    _check_size(path, meta, "adj_indices")
    _check_consistency(ds, path, meta, arrays)
    return PartitionSet(ds, path, meta, arrays)


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / META_NAME).read_text())
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{path}: {META_NAME} is missing (incomplete write?); re-partition") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PartitionCorruptError(f"{path}/{META_NAME} is not valid JSON ({exc}); re-partition") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise PartitionCorruptError(f"{path}/{META_NAME} is not an outre-async partition meta; re-partition")
    if meta.get("format_version") != FORMAT_VERSION:
        raise PartitionCorruptError(f"{path} has format_version {meta.get('format_version')!r}, this outre-async "
                                    f"reads {FORMAT_VERSION}; re-partition")
    if not isinstance(meta.get("files"), dict) or not isinstance(meta.get("dataset"), dict):
        raise PartitionCorruptError(f"{path}/{META_NAME} lacks its 'files' or 'dataset' entry; re-partition")
    return meta


def _check_identity(ds: Dataset, path: Path, meta: dict[str, Any]) -> None:
    want = dataset_identity(ds)
    have = meta["dataset"]
    diff = [key for key in want if have.get(key) != want[key]]
    if diff:
        raise PartitionMismatchError(f"{path} was computed for another dataset or another version of {ds.path} "
                                     f"(differs in {', '.join(diff)}); re-partition this dataset")


def _entry(path: Path, meta: dict[str, Any], stem: str) -> tuple[Path, np.dtype, int, int | None]:
    try:
        e = meta["files"][stem]
        return path / str(e["file"]), np.dtype(e["dtype"]), int(e["nbytes"]), e.get("crc32")
    except (KeyError, TypeError, ValueError) as exc:
        raise PartitionCorruptError(f"{path}/{META_NAME} has no valid entry for {stem!r}; re-partition") from exc


def _load(path: Path, meta: dict[str, Any], stem: str) -> np.ndarray:
    file, dtype, nbytes, crc = _entry(path, meta, stem)
    try:
        size = file.stat().st_size
    except FileNotFoundError as exc:
        raise PartitionCorruptError(f"{path}: file {file.name} is missing; re-partition") from exc
    if size != nbytes or nbytes % dtype.itemsize:
        raise PartitionCorruptError(f"{path}: {file.name} has {size} bytes, meta.json says {nbytes}; re-partition")
    out = np.empty(nbytes // dtype.itemsize, dtype=dtype)  # read in place: no second copy
    with open(file, "rb") as f:
        got = f.readinto(memoryview(out).cast("B"))
    if got != nbytes:
        raise PartitionCorruptError(f"{path}: {file.name} has {got} bytes, meta.json says {nbytes}; re-partition")
    if crc is not None and zlib.crc32(memoryview(out).cast("B")) != crc:
        raise PartitionCorruptError(f"{path}: {file.name} fails its checksum; re-partition")
    return out


def _check_size(path: Path, meta: dict[str, Any], stem: str) -> None:
    file, _, nbytes, _ = _entry(path, meta, stem)
    if not file.is_file() or file.stat().st_size != nbytes:
        size = file.stat().st_size if file.is_file() else "no"
        raise PartitionCorruptError(f"{path}: {file.name} has {size} bytes, meta.json says {nbytes}; re-partition")


def _check_consistency(ds: Dataset, path: Path, meta: dict[str, Any], a: dict[str, np.ndarray]) -> None:
    n, k = ds.num_nodes, int(meta.get("num_parts", -1))
    train = len(ds.split("train")) if "train" in ds.split_names else 0
    ok = (len(a["assignment"]) == n and len(a["part_ptr"]) == k + 1 and len(a["part_nodes"]) == n
          and len(a["train_ptr"]) == k + 1 and len(a["train_nodes"]) == train and len(a["adj_ptr"]) == n + 1
          and len(a["cross"]) == n and a["part_ptr"][-1] == n and a["train_ptr"][-1] == train
          and a["adj_ptr"][-1] == ds.num_edges)
    if ok and n:
        ok = bool(a["assignment"].min() >= 0 and a["assignment"].max() < k)
    if not ok:
        raise PartitionCorruptError(f"{path}: array lengths disagree with num_parts={k} and the dataset "
                                    f"({n} nodes); re-partition")
