"""External-memory edge sort: a stream of (src, dst) chunks in, CSC topology out to a DatasetWriter.

Memory stays within ``memory_budget`` plus O(N) (in-degree counts, bucket offsets) whatever E is:

1. **Ingest** (:meth:`CSCBuilder.add`): drop self loops / add reverse edges as asked, check ids,
   count in-degrees into an O(N) array, and keep the pairs in RAM while they fit the budget; past
   that, every pair is spilled to one raw binary file (``[k, 2]`` int32 or int64, appended).
2. **Distribute** (spilled input only): the counts give destination ranges ("buckets") whose
   edges fit the budget; the spill file is read back in budget-sized chunks, each chunk
   counting-sorted by bucket and appended to one file per bucket.
3. **Sort and emit**: a bucket (or the whole in-memory input) is counting-sorted by destination,
   each in-neighbour list is sorted (and de-duplicated if asked) and handed to
   :meth:`DatasetWriter.append_neighbors` in node order.

The sort is a counting sort, not a comparison sort: the in-degrees are known from step 1, so placing
each source at its destination's next free slot is O(E); only the short per-node lists are sorted.
Per edge in RAM: the pair plus one output id, ``3 × itemsize`` bytes (12 B for int32 ids); per
node of a bucket 16 B (offset and write cursor), so buckets are also cut to bound node ranges.
A single node with more in-edges than the budget holds still gets a bucket of its own (it cannot
be split), so memory is ``max(budget, 12 B × max in-degree)``.  The O(N) part: the in-degree
counts (8 B/node, grown geometrically when N is not given), the writer's ``indptr`` (8 B/node), a
transient cumulative cost while planning buckets (8 B/node), and, for input sorted in memory,
offsets and cursors over all nodes (16 B/node).

Temporary files live in a private directory under ``tmp_dir`` (created only when spilling) and are
removed by :meth:`CSCBuilder.close`, which the context manager calls on success and on error.  The
directory is one of ``store._tempdir``'s (``.{tmp_stem}.outre-sort-...-{pid}-...``): after a
``kill -9`` the next writer into ``tmp_dir``, or ``outre clean``, removes it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tqdm import tqdm

from ..errors import ConfigError, InvalidGraphError
from ..store._litter import open_temp_dir
from ..store._tempdir import TempDir
from ..store._writer import INT32_LIMIT, DatasetWriter
from ._convert_kernels import count_into, scatter_by_bucket, scatter_sources, sort_segments

DEFAULT_MEMORY_BUDGET = 1 << 30
MIN_MEMORY_BUDGET = 1 << 10
NODE_BYTES = 16  # per destination node in a sort pass: its offset and its write cursor (int64)
APPEND_NODES = 1 << 20  # nodes per append_neighbors call: bounds the writer's temporaries


class CSCBuilder:
    """Collect edges with :meth:`add`, then :meth:`write_to` a writer; use as a context manager."""

    def __init__(
        self,
        *,
        num_nodes: int | None = None,
        undirected: bool = False,
        drop_self_loops: bool = False,
        dedupe: bool = False,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        tmp_dir: str | Path | None = None,
        tmp_stem: str = "convert",
        progress: bool = False,
    ) -> None:
        if memory_budget < MIN_MEMORY_BUDGET:
            raise ConfigError(
                f"memory_budget must be >= {MIN_MEMORY_BUDGET} bytes, got {memory_budget=}"
            )
        if num_nodes is not None and num_nodes <= 0:
            raise InvalidGraphError(f"empty graph: num_nodes must be >= 1, got {num_nodes}")
        self.undirected, self.drop_self_loops, self.dedupe = undirected, drop_self_loops, dedupe
        self.memory_budget = int(memory_budget)
        self.progress = progress
        self._given_nodes = num_nodes
        self._tmp_parent = None if tmp_dir is None else Path(tmp_dir)
        self._tmp_stem = tmp_stem
        self._tmpdir: TempDir | None = None
        self._dtype = np.dtype(np.int64 if (num_nodes or 0) > INT32_LIMIT else np.int32)
        self._counts = np.zeros(num_nodes or 0, dtype=np.int64)
        self._max_id = -1
        self._pieces: list[np.ndarray] = []
        self._held = 0
        self._spill: BinaryIO | None = None
        self.num_edges = 0  # pairs taken in (after undirected / self-loop filtering, before dedupe)
        self.num_buckets = 0  # sort passes used by write_to: 1 in memory, more when spilled

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> CSCBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release memory and remove every temporary file (safe to call twice)."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._pieces.clear()
        if self._tmpdir is not None:
            self._tmpdir.remove()
            self._tmpdir = None

    @property
    def num_nodes(self) -> int:
        """The given node count, else max id + 1 (0 before any edge)."""
        return self._given_nodes if self._given_nodes is not None else self._max_id + 1

    @property
    def spilled(self) -> bool:
        """True when the edges did not fit the budget and go through the external sort."""
        return self._spill is not None or self.num_buckets > 1

    @property
    def _capacity(self) -> int:
        """Edges one sort pass may hold: pair + output id per edge."""
        return max(1, self.memory_budget // (3 * self._dtype.itemsize))

    # -- step 1: ingest --------------------------------------------------------------------------
    def add(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Take one chunk of edges ``src[i] → dst[i]`` (1-D integer arrays of equal length)."""
        src, dst = _as_ids(src, "source"), _as_ids(dst, "target")
        if len(src) != len(dst):
            raise InvalidGraphError(f"edge chunk has {len(src)} sources but {len(dst)} targets")
        src, dst = self._filter(src, dst)
        if len(src) == 0:
            return
        self._check_range(src, dst)
        pairs = np.empty((len(src), 2), dtype=self._dtype)
        pairs[:, 0], pairs[:, 1] = src, dst
        count_into(self._counts, pairs[:, 1])  # one kernel signature per id dtype
        self.num_edges += len(pairs)
        self._store(pairs)

    def _filter(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Drop self loops if asked; add reverses if undirected (a self loop is its own reverse)."""
        loops = src == dst
        if self.drop_self_loops:
            src, dst, loops = src[~loops], dst[~loops], loops[~loops]
        if self.undirected:
            keep = ~loops
            src, dst = np.concatenate([src, dst[keep]]), np.concatenate([dst, src[keep]])
        return src, dst

    def _check_range(self, src: np.ndarray, dst: np.ndarray) -> None:
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0:
            raise InvalidGraphError(f"edge endpoint {lo} is negative; node ids must be >= 0")
        if self._given_nodes is not None and hi >= self._given_nodes:
            raise InvalidGraphError(
                f"edge endpoint {hi} is out of range [0, {self._given_nodes}); "
                "check num_nodes or the input ids"
            )
        if hi > self._max_id:
            self._max_id = hi
            self._grow(hi + 1)

    def _grow(self, needed: int) -> None:
        """Grow the O(N) in-degree array geometrically; widen stored ids past int32."""
        if needed > len(self._counts):
            grown = np.zeros(max(needed, len(self._counts) * 3 // 2), dtype=np.int64)
            grown[: len(self._counts)] = self._counts
            self._counts = grown
        if needed - 1 > INT32_LIMIT and self._dtype == np.int32:
            self._widen()

    def _widen(self) -> None:
        """Ids no longer fit int32: convert what is held (in RAM and in the spill) to int64."""
        self._dtype = np.dtype(np.int64)
        self._pieces = [p.astype(np.int64) for p in self._pieces]
        if self._spill is not None:
            old = Path(self._spill.name)
            self._spill.close()
            self._spill = open(self._tmp_dir() / "spill64.bin", "wb")  # noqa: SIM115
            for chunk in _read_pairs(old, np.dtype(np.int32), self._chunk_edges()):
                self._spill.write(chunk.astype(np.int64).data)
            old.unlink()

    def _store(self, pairs: np.ndarray) -> None:
        if self._spill is not None:
            self._spill.write(pairs.data)
            return
        self._pieces.append(pairs)
        self._held += len(pairs)
        if self._held > self._capacity:
            self._spill = open(self._tmp_dir() / "spill.bin", "wb")  # noqa: SIM115
            for piece in self._pieces:
                self._spill.write(piece.data)
            self._pieces.clear()
            self._held = 0

    def _tmp_dir(self) -> Path:
        if self._tmpdir is None:
            parent = self._tmp_parent or Path(tempfile.gettempdir())
            self._tmpdir = open_temp_dir(parent, self._tmp_stem, "sort")
        return self._tmpdir.path

    def _chunk_edges(self) -> int:
        """Edges per distribution chunk: a pair in and a pair out each."""
        return max(1, self.memory_budget // (4 * self._dtype.itemsize))

    # -- steps 2 and 3: sort and emit ------------------------------------------------------------
    def write_to(self, writer: DatasetWriter) -> None:
        """Write the CSC of every edge taken in to ``writer`` (num_nodes may exceed max id + 1)."""
        n = writer.num_nodes
        if n <= self._max_id:
            raise InvalidGraphError(
                f"edge endpoint {self._max_id} is out of range [0, {n}); "
                "num_nodes must be >= max id + 1"
            )
        counts = self._counts[:n]  # a view: the O(N) arrays are the peak of the in-memory path
        if len(counts) < n:
            counts = np.zeros(n, dtype=np.int64)
            counts[: len(self._counts)] = self._counts
        with tqdm(
            total=self.num_edges,
            unit="edge",
            unit_scale=True,
            desc="sort edges",
            disable=not self.progress,
        ) as bar:
            if self._spill is None:
                pieces, self._pieces = self._pieces, []
                self.num_buckets = 1
                _emit(writer, pieces, 0, n, counts, self.dedupe)
                bar.update(self.num_edges)
            else:
                spill = Path(self._spill.name)
                self._spill.close()
                self._spill = None
                self._emit_external(writer, spill, counts, bar)

    def _emit_external(
        self, writer: DatasetWriter, spill: Path, counts: np.ndarray, bar: tqdm
    ) -> None:
        bounds = plan_buckets(counts, self.memory_budget, 3 * self._dtype.itemsize)
        self.num_buckets = len(bounds) - 1
        files = self._distribute(spill, bounds)
        spill.unlink()
        for b, path in enumerate(files):
            pieces = [np.fromfile(path, dtype=self._dtype).reshape(-1, 2)] if path.exists() else []
            path.unlink(missing_ok=True)
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            _emit(writer, pieces, lo, hi, counts[lo:hi], self.dedupe)
            bar.update(int(counts[lo:hi].sum()))

    def _distribute(self, spill: Path, bounds: np.ndarray) -> list[Path]:
        """Pass 2: split the spill file into one file per destination range, chunk by chunk."""
        files = [self._tmp_dir() / f"bucket-{b:06d}.bin" for b in range(len(bounds) - 1)]
        for pairs in _read_pairs(spill, self._dtype, self._chunk_edges()):
            out = np.empty_like(pairs)
            offsets = scatter_by_bucket(pairs, bounds, out)
            del pairs
            for b in np.flatnonzero(np.diff(offsets)):
                with open(files[b], "ab") as f:
                    f.write(out[offsets[b] : offsets[b + 1]].data)
        return files


def plan_buckets(
    counts: np.ndarray, budget: int, edge_bytes: int, node_bytes: int = NODE_BYTES
) -> np.ndarray:
    """Split nodes ``[0, N)`` into consecutive ranges whose sort pass fits ``budget`` bytes:
    ``edge_bytes`` per in-edge plus ``node_bytes`` per node (a single node over the budget gets a
    range of its own).  Return the boundaries, ``0`` and ``N`` included."""
    cost = counts * edge_bytes  # one O(N) temporary, turned into the running cost in place
    cost += node_bytes
    np.cumsum(cost, out=cost)
    n = len(counts)
    bounds = [0]
    while bounds[-1] < n:
        lo = bounds[-1]
        base = int(cost[lo - 1]) if lo else 0
        hi = int(np.searchsorted(cost, base + budget, side="right"))
        bounds.append(min(n, max(hi, lo + 1)))
    return np.asarray(bounds, dtype=np.int64)


def _emit(
    writer: DatasetWriter,
    pieces: list[np.ndarray],
    lo: int,
    hi: int,
    counts: np.ndarray,
    dedupe: bool,
) -> None:
    """Counting-sort the pairs of nodes ``[lo, hi)`` by destination; append them to ``writer``."""
    offsets = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(counts[: hi - lo], out=offsets[1:])
    dtype = np.int64 if writer.num_nodes > INT32_LIMIT else np.int32
    out = np.empty(int(offsets[-1]), dtype=dtype)
    pos = offsets[:-1].copy()
    while pieces:
        scatter_sources(pieces.pop(), lo, pos, out)
    kept = pos  # no longer needed after the scatter: reuse it for the final in-degrees
    sort_segments(out, offsets, dedupe, kept)
    start = 0
    for a in range(0, len(kept), APPEND_NODES):  # bounded writer temporaries
        block = kept[a : a + APPEND_NODES]
        stop = start + int(block.sum())
        writer.append_neighbors(block, out[start:stop])
        start = stop


def _read_pairs(path: Path, dtype: np.dtype, chunk_edges: int):
    """Yield ``[k, 2]`` blocks of a raw pair file with large sequential reads."""
    with open(path, "rb") as f:
        while True:
            block = np.fromfile(f, dtype=dtype, count=2 * chunk_edges)
            if len(block) == 0:
                return
            yield block.reshape(-1, 2)


def _as_ids(values: np.ndarray, what: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1 or (len(values) and not np.issubdtype(values.dtype, np.integer)):
        raise InvalidGraphError(
            f"edge {what} ids must be a 1-D integer array, got {values.dtype} {values.shape}"
        )
    return values
