"""Sequential, bounded-memory reading of a dataset's CSC in chunks of nodes (the partitioner's input).

:class:`CscStream` yields ``(nodes, ptr, buf)`` per chunk: node ids, int64 offsets into ``buf`` and
the nodes' in-neighbour lists.  In storage order every chunk is one ``pread`` (looped over short
reads) of a contiguous byte range of ``indices`` into one reusable buffer: ``indices`` is never
memory-mapped or held whole, and never read node by node; ``indptr`` is read through its memory map
(clean page cache, reclaimable under a memory cap).  The buffer holds ``max(chunk_edges, max
in-degree)`` ids (a hub's list always fits whole; the max in-degree is below N, so memory stays
O(N) + chunk), and a chunk holds at most ``chunk_edges`` nodes.

With an explicit node ``order`` a chunk's lists are gathered from the memory-mapped ``indices``
(random access, cached by the OS): meant for restreaming experiments and small graphs; the
out-of-core path is storage order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

from outre_async.store._csc_kernels import gather_lists, max_degree
from outre_async.store._dataset import Dataset

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
        for nodes, ptr, buf in chunks:
            yield nodes, ptr, buf
            if self.on_chunk is not None:
                self.on_chunk(int(ptr[-1]))

    def _storage_order(self) -> Iterator[Chunk]:
        indptr, n = self._indptr, self.ds.num_nodes
        itemsize = self._buf.itemsize
        fd = os.open(self.ds.path / self.ds.manifest.indices.file, os.O_RDONLY)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            a = 0
            while a < n:
                b = int(np.searchsorted(indptr, indptr[a] + self.chunk_edges, side="right")) - 1
                b = min(max(b, a + 1), n, a + self.chunk_edges)
                lo, hi = int(indptr[a]), int(indptr[b])
                buf = self._buf[: hi - lo]
                _pread_into(fd, buf, lo * itemsize)
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


def _pread_into(fd: int, buf: np.ndarray, offset: int) -> None:
    view = memoryview(buf).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            from outre_async._errors import DatasetCorruptError

            raise DatasetCorruptError(f"indices file ends at byte {offset + done}, expected {offset + len(view)}; "
                                      "the dataset is truncated, re-create it")
        done += got
