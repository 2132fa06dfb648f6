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

Memory: the writer holds ``assignment`` (int32, N) and per-chunk arrays; ``indptr`` is read through
its memory map.  ``part_nodes``, ``adj_ptr`` and ``adj_indices`` are produced in one storage-order
pass over the CSC and regrouped into partition order on disk by :class:`~._buckets.Buckets`
(``buffer_bytes`` of rows in all); ``cross`` is written in node order as it is computed.  Every file
goes through an :class:`~._outfile.OutFile` (bounded dirty page cache, synced before the rename).
``meta.json`` is written last, into the temporary directory, which is then renamed into place: a
crash never leaves a folder that opens.  The temporary directory is one of ``store._tempdir``'s
(pid in its name; the next writer into ``partitions/`` collects a dead one), and ``overwrite``
replaces only an empty folder or a partition folder holding just the files its ``meta.json`` names
(:func:`partition_names`), checked before the work and again right before the swap.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from outre_async.errors import ConfigError, PartitionExistsError
from outre_async.store._dataset import Dataset
from outre_async.store._identity import dataset_identity
from outre_async.store._install import install_directory
from outre_async.store._litter import open_temp_dir
from outre_async.store._overwrite import check_overwrite, meta_folder_names

from ._buckets import Buckets, row_items
from ._fennel import Assignment
from ._format import FORMAT_NAME, FORMAT_VERSION, META_NAME, PARTITIONS_DIR, check_name
from ._outfile import OutFile
from ._output_kernels import cut_chunk, edges_per_part, group_by_part, running_ends
from ._stream import CscStream

LARGE_FILES = ("adj_indices",)  # size-checked only; every other file is checksummed
BUFFER_BYTES = 64 << 20  # the rows regrouping the partition-ordered files, all together


class PartitionWriter:
    """Write the outputs of one :class:`~._fennel.Assignment` into ``partitions/<name>/``."""

    def __init__(self, ds: Dataset, name: str, *, overwrite: bool = False, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.ds = ds
        self.buffer_bytes = int(buffer_bytes)
        self.path = ds.path / PARTITIONS_DIR / check_name(name)
        if os.path.lexists(self.path) and not overwrite:
            raise PartitionExistsError(f"partitions {name!r} already exist at {self.path}; pass overwrite "
                                       "(--overwrite) or choose another --name")
        self.overwrite = overwrite
        self._check_overwrite()
        self._tmpdir = open_temp_dir(self.path.parent, name, "tmp")
        self.tmp = self._tmpdir.path
        self.files: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()

    def abort(self) -> None:
        self._tmpdir.remove()

    def _check_overwrite(self) -> None:
        if self.overwrite:
            check_overwrite(self.path, owned=partition_names, what="partition folder", inputs=(self.ds.path,))

    def write(self, result: Assignment, stream: CscStream, meta: dict[str, Any], *, started: float) -> dict[str, Any]:
        """Write every file and the meta, rename into place; returns the final meta.  ``stream`` must
        be in storage order.  ``seconds`` in the meta is the wall time since ``started`` (a
        ``time.perf_counter()`` value)."""
        ds, k, assign = self.ds, result.parts, result.assign
        if stream.order is not None:
            raise ConfigError("the partition writer needs a storage-order stream (order=None)")
        self._array("assignment", assign.astype(np.int32, copy=False))
        part_ptr = _offsets(np.bincount(assign, minlength=k))
        self._array("part_ptr", part_ptr)
        train = ds.split("train") if "train" in ds.split_names else np.empty(0, np.int64)
        train_ptr, train_nodes = group_by_part(assign, train, k)
        self._array("train_ptr", train_ptr)
        self._array("train_nodes", train_nodes)
        quality = self._partition_order(stream, assign, part_ptr, k)
        sizes, tsizes = np.diff(part_ptr), np.diff(train_ptr)
        quality["node_balance"] = float(sizes.max() * k / ds.num_nodes)
        quality["train_balance"] = float(tsizes.max() * k / len(train)) if len(train) else None
        quality["size_min_max"] = [int(sizes.min()), int(sizes.max())]
        quality["train_min_max"] = [int(tsizes.min()), int(tsizes.max())]
        meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": self.path.name,
                "dataset": dataset_identity(ds), "num_parts": k, **meta, "quality": quality,
                "peak_rss_bytes": peak_rss_bytes(), "files": self.files,
                "seconds": time.perf_counter() - started}
        self._drop_scratch()
        (self.tmp / META_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self._install()
        return meta

    def _partition_order(self, stream: CscStream, assign: np.ndarray, part_ptr: np.ndarray,
                         k: int) -> dict[str, Any]:
        """One storage-order pass: ``cross`` in node order, and ``part_nodes``, ``adj_ptr`` and
        ``adj_indices`` regrouped into partition order through :class:`~._buckets.Buckets`."""
        edge_ptr = _offsets(edges_per_part(assign, self.ds.indptr_map(), np.zeros(k, np.int64)))
        dtype = self.ds.manifest.indices.dtype
        internal = np.zeros(k, np.int64)
        cut = 0
        with (OutFile(self.tmp / "part_nodes.bin", np.int64) as f_nodes,
              OutFile(self.tmp / "adj_ptr.bin", np.int64) as f_ptr,
              OutFile(self.tmp / "adj_indices.bin", dtype) as f_adj,
              OutFile(self.tmp / "cross.bin", np.int32) as f_cross):
            f_ptr.append(np.zeros(1, np.int64))
            share = self.buffer_bytes // 4  # half for the adjacency, a quarter for each node-level file
            nodes_b = Buckets(f_nodes, part_ptr[:-1], row_items(share, k, 8))
            ends_b = Buckets(f_ptr, part_ptr[:-1] + 1, row_items(share, k, 8))
            adj_b = Buckets(f_adj, edge_ptr[:-1], row_items(2 * share, k, f_adj.dtype.itemsize))
            fill = edge_ptr[:-1].copy()
            for nodes, ptr, buf in stream:
                part = assign[nodes]
                cross = np.empty(len(nodes), np.int32)
                cut += int(cut_chunk(nodes, ptr, buf, assign, cross, internal))
                f_cross.append(cross)
                ends = np.empty(len(nodes), np.int64)
                running_ends(part, ptr, fill, ends)
                unit = np.arange(len(nodes) + 1, dtype=np.int64)
                nodes_b.add(part, unit, nodes)
                ends_b.add(part, unit, ends)
                adj_b.add(part, ptr, buf)
            for b in (nodes_b, ends_b, adj_b):
                b.flush()
            self.files["part_nodes"] = f_nodes.close()
            self.files["adj_ptr"] = f_ptr.close()
            self.files["adj_indices"] = f_adj.close(checksum=False)
            self.files["cross"] = f_cross.close()
        return {"edges_cut": cut, "edge_cut_fraction": cut / max(self.ds.num_edges, 1),
                "internal_edges_min_max": [int(internal.min()), int(internal.max())]}

    def _array(self, stem: str, array: np.ndarray) -> None:
        with OutFile(self.tmp / f"{stem}.bin", array.dtype) as f:
            f.append(array)
            self.files[stem] = f.close()

    def _drop_scratch(self) -> None:
        """Remove what the partitioner kept in the temp folder (bloom mode's file-backed assignment):
        the installed folder holds exactly the files ``meta.json`` names."""
        named = {entry["file"] for entry in self.files.values()}
        for path in self.tmp.iterdir():
            if path.name not in named:
                path.unlink()

    def _install(self) -> None:
        self._check_overwrite()
        install_directory(self.tmp, self.path, overwrite=self.overwrite, exists=PartitionExistsError(
            f"{self.path} appeared while writing; pass overwrite or choose another name"))
        self._tmpdir.release()


def partition_names(path: Path) -> set[str]:
    """The ``owned`` rule of a partition folder: ``meta.json`` of our format and the files it names."""
    return meta_folder_names(path, "partition folder", META_NAME, FORMAT_NAME)


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
