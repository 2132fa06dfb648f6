"""Regrouping a storage-order stream into partition order on disk, in bounded memory.

The partition-ordered outputs (``part_nodes``, ``adj_ptr``, ``adj_indices``) hold, for partition
0, 1, ... in turn, its nodes' records in storage order.  The stream delivers nodes in storage order,
so each partition's records arrive in their final order: partition ``p``'s next record goes right
after its previous one.  :class:`Buckets` keeps one row of ``row_items`` per partition; a full row
is written at partition ``p``'s current file offset with one ``pwrite`` (a list longer than a whole
row is written directly).  Memory: ``K x row_items`` items, whatever N and E; writes: contiguous
runs of up to a row, K interleaved sequential streams (an :class:`~._outfile.OutFile` bounds
their dirty page cache).  The copying is :func:`~._kernels.bucket_lists`.
"""

from __future__ import annotations

import numpy as np

from . import _kernels as K
from ._outfile import OutFile

MIN_ROW_BYTES = 4096


def row_items(budget_bytes: int, parts: int, itemsize: int) -> int:
    """Items per row when ``parts`` rows share ``budget_bytes`` (at least ``MIN_ROW_BYTES`` a row)."""
    return max(int(budget_bytes) // (max(parts, 1) * itemsize), MIN_ROW_BYTES // itemsize, 1)


class Buckets:
    """One output file regrouped by partition; ``starts[p]`` is partition p's first item offset."""

    def __init__(self, out: OutFile, starts: np.ndarray, row: int) -> None:
        self.out = out
        self.next = np.array(starts, dtype=np.int64)  # file offset of each row's first item
        self.rows = np.empty((len(self.next), max(int(row), 1)), dtype=out.dtype)
        self.fill = np.zeros(len(self.next), dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes)

    def add(self, part: np.ndarray, ptr: np.ndarray, buf: np.ndarray) -> None:
        """Append lists ``buf[ptr[i]:ptr[i+1]]`` to partitions ``part[i]``, in order."""
        i = 0
        while (i := int(K.bucket_lists(part, ptr, buf, i, self.rows, self.fill))) < len(part):
            p = int(part[i])
            self._drain(p)
            lo, hi = int(ptr[i]), int(ptr[i + 1])
            if hi - lo > self.rows.shape[1]:  # longer than a whole row: write it as it is
                self.out.pwrite(buf[lo:hi], int(self.next[p]))
                self.next[p] += hi - lo
                i += 1

    def flush(self) -> None:
        """Write every partially filled row."""
        for p in np.flatnonzero(self.fill):
            self._drain(int(p))

    def _drain(self, p: int) -> None:
        n = int(self.fill[p])
        if n:
            self.out.pwrite(self.rows[p, :n], int(self.next[p]))
            self.next[p] += n
            self.fill[p] = 0
