"""Regrouping a storage-order stream into partition order on disk, in bounded memory.

The partition-ordered outputs (``part_nodes``, ``adj_ptr``, ``adj_indices``) hold, for partition
0, 1, ... in turn, its nodes' records in storage order.  The stream delivers nodes in storage order,
so each partition's records arrive in their final order: partition ``p``'s next record goes right
after its previous one.  :class:`Buckets` keeps one row of ``row_items`` per partition; a full row
is written at partition ``p``'s current file offset with one ``pwrite`` (a list longer than a whole
row is written directly).  A row is written up to the last page boundary it reaches, its tail kept
for the next write: a write covering part of a page that is no longer cached makes the kernel read
that page first, so only the pages at partition boundaries are ever written in parts.

Memory: ``K x row_items`` items, whatever N and E; writes: runs of up to a row, K interleaved
sequential streams (an :class:`~._outfile.OutFile` bounds their dirty page cache).  The copying is :func:`~._output_kernels.bucket_lists`.
"""

from __future__ import annotations

import numpy as np

from ._outfile import OutFile
from ._output_kernels import bucket_lists

MIN_ROW_BYTES = 4096
PAGE_BYTES = 4096


def row_items(budget_bytes: int, parts: int, itemsize: int) -> int:
    """Items per row when ``parts`` rows share ``budget_bytes`` (at least ``MIN_ROW_BYTES`` a row)."""
    return max(int(budget_bytes) // (max(parts, 1) * itemsize), MIN_ROW_BYTES // itemsize, 1)


class Buckets:
    """One output file regrouped by partition; ``starts[p]`` is partition p's first item offset."""

    def __init__(self, out: OutFile, starts: np.ndarray, row: int, *, page_bytes: int = PAGE_BYTES) -> None:
        self.out = out
        self.page = max(page_bytes // out.dtype.itemsize, 1)  # items per page
        self.next = np.array(starts, dtype=np.int64)  # file offset of each row's first item
        self.rows = np.empty((len(self.next), max(int(row), 1)), dtype=out.dtype)
        self.fill = np.zeros(len(self.next), dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes)

    def add(self, part: np.ndarray, ptr: np.ndarray, buf: np.ndarray) -> None:
        """Append lists ``buf[ptr[i]:ptr[i+1]]`` to partitions ``part[i]``, in order."""
        i = 0
        while (i := int(bucket_lists(part, ptr, buf, i, self.rows, self.fill))) < len(part):
            p = int(part[i])
            lo, hi = int(ptr[i]), int(ptr[i + 1])
            self._drain(p, whole=False)
            if self.fill[p] + hi - lo > self.rows.shape[1]:
                self._drain(p, whole=True)
            if hi - lo > self.rows.shape[1]:  # longer than a whole row: write it as it is
                self.out.pwrite(buf[lo:hi], int(self.next[p]))
                self.next[p] += hi - lo
                i += 1

    def flush(self) -> None:
        """Write every partially filled row."""
        for p in np.flatnonzero(self.fill):
            self._drain(int(p), whole=True)

    def _drain(self, p: int, *, whole: bool) -> None:
        """Write row p: all of it, or up to the last page boundary (keeping the tail in the row)."""
        start, n = int(self.next[p]), int(self.fill[p])
        cut = n if whole else (start + n) // self.page * self.page - start
        if cut <= 0:
            return
        self.out.pwrite(self.rows[p, :cut], start)
        self.rows[p, : n - cut] = self.rows[p, cut:n]  # numpy copies overlapping ranges correctly
        self.next[p] += cut
        self.fill[p] = n - cut
