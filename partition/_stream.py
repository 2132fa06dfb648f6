"""Sequential, bounded-memory reading of a dataset's CSC in chunks of nodes (the partitioner's input).

:class:`CscStream` yields ``(nodes, ptr, buf)`` per chunk: node ids, int64 offsets into ``buf`` and
the nodes' in-neighbour lists.  In storage order every chunk is one ``pread`` (looped over short
reads) of a contiguous byte range of ``indices`` into one reusable buffer: ``indices`` is never
memory-mapped or held whole, and never read node by node; ``indptr`` is read through its memory map
(clean page cache, reclaimable under a memory cap).  The buffer holds ``max(chunk_edges, max
in-degree)`` ids (a hub's list always fits whole; the max in-degree is below N, so memory stays
O(N) + chunk), and a chunk holds at most ``chunk_edges`` nodes.

Every chunk is range-checked (``0 <= id < N``, vectorised, on ids already in cache) before it is
yielded: the FENNEL and output kernels index O(N) arrays with these ids and do no bounds checks, so a
negative or too large neighbour id is a :class:`DatasetCorruptError` naming its position in
``indices``, not a segfault or a silently wrong partition.

With an explicit node ``order`` a chunk's lists are gathered from the memory-mapped ``indices``
(random access, cached by the OS): meant for restreaming experiments and small graphs; the
out-of-core path is storage order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from outre_async.errors import DatasetCorruptError, DatasetReadError
from outre_async.store._csc_kernels import gather_lists, max_degree
from outre_async.store._dataset import Dataset
from outre_async.store._file_reads import open_data_file

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]


class CscStream:
    """Re-iterable chunked reader of ``ds``'s in-neighbour lists (each ``iter()`` is one pass)."""

    def __init__(self, ds: Dataset, *, chunk_edges: int, order: np.ndarray | None = None,
                 on_chunk: Callable[[int], None] | None = None) -> None:
        self.ds = ds
        self.chunk_edges = max(int(chunk_edges), 1)
        self.order = order
        self.on_chunk = on_chunk  # called with each chunk's edge count (progress bars)
        self._indptr = ds.indptr_map()
        deg_max = int(max_degree(self._indptr))
        self._buf = np.empty(max(self.chunk_edges, deg_max, 1), dtype=ds.manifest.indices.dtype)

    @property
    def buffer_bytes(self) -> int:
        return int(self._buf.nbytes)

    def __iter__(self) -> Iterator[Chunk]:
        chunks = self._storage_order() if self.order is None else self._given_order(self.order)
        n = self.ds.num_nodes
        for nodes, ptr, buf in chunks:
            if len(buf) and (buf.min() < 0 or buf.max() >= n):
                _raise_bad_id(self.ds, nodes, ptr, buf)
            yield nodes, ptr, buf
            if self.on_chunk is not None:
                self.on_chunk(int(ptr[-1]))

    def _storage_order(self) -> Iterator[Chunk]:
        indptr, n = self._indptr, self.ds.num_nodes
        itemsize = self._buf.itemsize
        path = self.ds.path / self.ds.manifest.indices.file
        fd = open_data_file(path, self.ds.manifest.indices.nbytes)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            a = 0
            while a < n:
                b = int(np.searchsorted(indptr, indptr[a] + self.chunk_edges, side="right")) - 1
                b = min(max(b, a + 1), n, a + self.chunk_edges)
                lo, hi = int(indptr[a]), int(indptr[b])
                buf = self._buf[: hi - lo]
                pread_exact(fd, buf, lo * itemsize, path)
                yield np.arange(a, b, dtype=np.int64), indptr[a : b + 1] - lo, buf
                a = b
        finally:
            os.close(fd)

    def _given_order(self, order: np.ndarray) -> Iterator[Chunk]:
        indptr, indices = self._indptr, self.ds.indices
        step = self.chunk_edges
        i = 0
        while i < len(order):
            cand = order[i : i + step]
            deg = indptr[cand + 1] - indptr[cand]
            take = max(int(np.searchsorted(np.cumsum(deg), len(self._buf), side="right")), 1)
            nodes = np.ascontiguousarray(cand[:take], dtype=np.int64)
            ptr = np.empty(len(nodes) + 1, dtype=np.int64)
            gather_lists(indptr, indices, nodes, ptr, self._buf)
            yield nodes, ptr, self._buf[: ptr[-1]]
            i += take


def _raise_bad_id(ds: Dataset, nodes: np.ndarray, ptr: np.ndarray, buf: np.ndarray) -> None:
    j = int(np.argmax((buf < 0) | (buf >= ds.num_nodes)))
    i = int(np.searchsorted(ptr, j, side="right")) - 1
    v = int(nodes[i])
    at = int(ds.indptr_map()[v]) + j - int(ptr[i])
    raise DatasetCorruptError(f"{ds.path / ds.manifest.indices.file}: item {at} (node {v}'s in-neighbour "
                              f"{j - int(ptr[i])}) = {int(buf[j])} is not a node id in [0, {ds.num_nodes}); "
                              "the dataset is corrupt, re-create it")


def pread_exact(fd: int, buf: np.ndarray, offset: int, path: Path) -> None:
    """Fill ``buf`` (C-contiguous) from the dataset file ``path`` at ``offset``; a short file or an
    ``OSError`` is a named dataset error (path, byte offset, errno)."""
    view = buf.data.cast("B")  # ndarray.data: the array's memoryview
    done = 0
    while done < len(view):
        try:
            got = os.preadv(fd, [view[done:]], offset + done)
        except OSError as exc:
            raise DatasetReadError(f"read failed ({exc.strerror}); check the disk", path=path,
                                   offset=offset + done, errno=exc.errno) from exc
        if got <= 0:
            raise DatasetCorruptError(f"{path} ends at byte {offset + done}, expected {offset + len(view)}; "
                                      "the dataset is truncated, re-create it")
        done += got
