"""Cut the nodes into chunks of consecutive targets and build each chunk's full in-neighbourhood.

A chunk ``[a, b)`` of targets owns the contiguous CSC slice ``indices[indptr[a]:indptr[b]]``: every
in-edge of every target, so a layer computed on the chunk's subgraph is exact for its targets.  The
chunk's rows are the targets first (local ids ``0 .. b-a-1``, in order), then the other sources
sorted; ``edge_index`` is local, source -> target.  Chunks hold at most ``max_nodes`` targets and
``max_edges`` edges (a single node with more in-edges is a chunk of its own): that bounds the rows
one chunk reads at ``max_nodes + max_edges``.  Neighbour ids come from a file, so they are range
checked here before anything indexes with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import DatasetCorruptError


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int  # targets are [start, stop)
    stop: int
    rows: np.ndarray  # int64 global ids to read: the targets, then the other sources (sorted)
    edge_index: np.ndarray  # int64 [2, E] local ids, row 0 source, row 1 target
    src: np.ndarray  # int64 [E] global source ids (for edge weights)
    dst: np.ndarray  # int64 [E] global target ids


def chunk_bounds(indptr: np.ndarray, max_nodes: int, max_edges: int) -> Iterator[tuple[int, int]]:
    """``(a, b)`` ranges covering ``[0, N)``: at most ``max_nodes`` targets, at most ``max_edges`` edges
    unless one node alone has more."""
    n, a = len(indptr) - 1, 0
    while a < n:
        by_edges = int(np.searchsorted(indptr, indptr[a] + max_edges, side="right")) - 1
        b = max(a + 1, min(a + max_nodes, by_edges, n))
        yield a, b
        a = b


def build_chunk(indptr: np.ndarray, indices: np.ndarray, a: int, b: int, path: object) -> Chunk:
    """The chunk of targets ``[a, b)``: rows to read and its local ``edge_index`` (see the module)."""
    lo, hi = int(indptr[a]), int(indptr[b])
    src = np.asarray(indices[lo:hi], dtype=np.int64)
    n = len(indptr) - 1
    if len(src) and (int(src.min()) < 0 or int(src.max()) >= n):
        raise DatasetCorruptError(f"{path}: indices[{lo}:{hi}] hold ids outside [0, {n}); the graph is corrupt, re-convert it")
    dst = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(indptr[a : b + 1]))
    others = np.unique(src)
    others = others[(others < a) | (others >= b)]
    inside = (src >= a) & (src < b)
    local_src = np.where(inside, src - a, (b - a) + np.searchsorted(others, src))
    edge_index = np.stack([local_src, dst - a])
    return Chunk(a, b, np.concatenate([np.arange(a, b, dtype=np.int64), others]), edge_index, src, dst)
