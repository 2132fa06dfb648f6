"""Writing ``<dataset>/partitions/<name>/`` atomically (temp dir + rename), and the dataset identity.

Files (raw little-endian arrays, no header; dtypes and sizes recorded in ``meta.json``):

=================  ==========  =====================================================================
``assignment``     int32 [N]   partition of every node
``part_ptr``       int64 [K+1] ``part_nodes[part_ptr[p]:part_ptr[p+1]]`` are partition p's nodes
``part_nodes``     ids [N]     nodes grouped by partition, storage order inside a partition
``train_ptr``      int64 [K+1] the same for the training nodes
``train_nodes``    ids [T]
``adj_ptr``        int64 [N+1] partition-wise adjacency: a CSC over the ``part_nodes`` order, so
``adj_indices``    ids [E]     partition p's is the contiguous byte range of slots
                               ``part_ptr[p]..part_ptr[p+1]``; lists hold *global* in-neighbour
                               ids, in the dataset's CSC order (the sampler sees the same lists)
``cross``          int32 [N]   in-neighbours of each node that sit in another partition
=================  ==========  =====================================================================

``adj_indices`` is written through a file-backed memory map: each partition's slots are filled in
increasing order, so the page cache sees K sequential write streams and can write back under
memory pressure; every other array is O(N) or smaller.  ``meta.json`` is written last, into the
temporary directory, which is then renamed into place: a crash never leaves a folder that opens.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import secrets
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from outre_async._dataset import Dataset
from outre_async._errors import ConfigError, PartitionExistsError

from . import _kernels as K
from ._fennel import Assignment
from ._stream import CscStream

FORMAT_NAME = "outre-async-partitions"
FORMAT_VERSION = 1
META_NAME = "meta.json"
PARTITIONS_DIR = "partitions"
LARGE_FILES = ("adj_indices",)  # size-checked only; every other file is checksummed


def dataset_identity(ds: Dataset) -> dict[str, Any]:
    """What ties partitions to one version of one dataset: counts, the manifest's hash (it holds the
    checksums of indptr, labels and splits) and a checksum of the first and last MiB of ``indices``."""
    manifest = (ds.path / "manifest.json").read_bytes()
    return {"num_nodes": ds.num_nodes, "num_edges": ds.num_edges,
            "manifest_sha256": hashlib.sha256(manifest).hexdigest(), "indices_probe_crc32": _probe(ds)}


def _probe(ds: Dataset) -> int:
    path = ds.path / ds.manifest.indices.file
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(1 << 20)
        f.seek(max(0, size - (1 << 20)))
        tail = f.read(1 << 20)
    return zlib.crc32(tail, zlib.crc32(head))


def check_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip():
        raise ConfigError(f"partition name {name!r} must be a plain folder name (no '/', not starting with '.')")
    return name


class PartitionWriter:
    """Write the outputs of one :class:`~._fennel.Assignment` into ``partitions/<name>/``."""

    def __init__(self, ds: Dataset, name: str, *, overwrite: bool = False) -> None:
        self.ds = ds
        self.path = ds.path / PARTITIONS_DIR / check_name(name)
        if self.path.exists() and not overwrite:
            raise PartitionExistsError(f"partitions {name!r} already exist at {self.path}; pass overwrite "
                                       "(--overwrite) or choose another --name")
        self.overwrite = overwrite
        self.path.parent.mkdir(exist_ok=True)
        self.tmp = self.path.parent / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        self.tmp.mkdir()
        self.files: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, result: Assignment, stream: CscStream, meta: dict[str, Any], *, started: float) -> dict[str, Any]:
        """Write every file and the meta, rename into place; returns the final meta.  ``seconds`` in
        the meta is the wall time since ``started`` (a ``time.perf_counter()`` value)."""
        ds, k, assign = self.ds, result.parts, result.assign
        ids = np.int32 if ds.num_nodes < 2**31 else np.int64
        self._array("assignment", assign.astype(np.int32, copy=False))
        part_ptr, part_nodes = K.group_by_part(assign, np.arange(ds.num_nodes, dtype=ids), k)
        self._array("part_ptr", part_ptr)
        self._array("part_nodes", part_nodes)
        train = ds.split("train").astype(ids) if "train" in ds.split_names else np.empty(0, ids)
        train_ptr, train_nodes = K.group_by_part(assign, train, k)
        self._array("train_ptr", train_ptr)
        self._array("train_nodes", train_nodes)
        quality = self._adjacency(stream, assign, part_nodes, k)
        sizes, tsizes = np.diff(part_ptr), np.diff(train_ptr)
        quality["node_balance"] = float(sizes.max() * k / ds.num_nodes)
        quality["train_balance"] = float(tsizes.max() * k / len(train)) if len(train) else None
        quality["size_min_max"] = [int(sizes.min()), int(sizes.max())]
        quality["train_min_max"] = [int(tsizes.min()), int(tsizes.max())]
        meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": self.path.name,
                "dataset": dataset_identity(ds), "num_parts": k, **meta, "quality": quality,
                "peak_rss_bytes": peak_rss_bytes(), "files": self.files,
                "seconds": time.perf_counter() - started}
        (self.tmp / META_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self._install()
        return meta

    def _adjacency(self, stream: CscStream, assign: np.ndarray, part_nodes: np.ndarray, k: int) -> dict[str, Any]:
        ds = self.ds
        slot = np.empty(ds.num_nodes, part_nodes.dtype)
        slot[part_nodes] = np.arange(ds.num_nodes, dtype=part_nodes.dtype)
        adj_ptr = np.zeros(ds.num_nodes + 1, np.int64)
        np.cumsum(np.diff(ds.indptr)[part_nodes], out=adj_ptr[1:])
        self._array("adj_ptr", adj_ptr)
        dtype = ds.manifest.indices.dtype
        out = np.memmap(self.tmp / "adj_indices.bin", mode="w+", dtype=dtype, shape=(max(ds.num_edges, 1),))
        cross = np.zeros(ds.num_nodes, np.int32)
        internal = np.zeros(k, np.int64)
        cut = 0
        for nodes, ptr, buf in stream:
            cut += int(K.cut_chunk(nodes, ptr, buf, assign, cross, internal))
            K.scatter_chunk(nodes, ptr, buf, assign, slot, adj_ptr, out, 0)
        out.flush()
        del out, slot
        self.files["adj_indices"] = {"file": "adj_indices.bin", "dtype": str(np.dtype(dtype)), "shape": [ds.num_edges],
                                     "nbytes": ds.num_edges * np.dtype(dtype).itemsize, "crc32": None}
        self._array("cross", cross)
        return {"edges_cut": cut, "edge_cut_fraction": cut / max(ds.num_edges, 1),
                "internal_edges_min_max": [int(internal.min()), int(internal.max())]}

    def _array(self, stem: str, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array)
        (self.tmp / f"{stem}.bin").write_bytes(data.data)
        self.files[stem] = {"file": f"{stem}.bin", "dtype": str(data.dtype), "shape": list(data.shape),
                            "nbytes": int(data.nbytes), "crc32": zlib.crc32(data.data)}

    def _install(self) -> None:
        _fsync_dir(self.tmp)
        if self.path.exists():
            if not self.overwrite:
                raise PartitionExistsError(f"{self.path} appeared while writing; pass overwrite or choose another name")
            old = self.path.parent / f".{self.path.name}.old-{secrets.token_hex(4)}"
            os.rename(self.path, old)
            os.rename(self.tmp, self.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        _fsync_dir(self.path.parent)


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
