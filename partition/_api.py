"""``partition()``: the library call behind ``outre partition`` (stream, then write the outputs)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from numba.core import event as numba_event

from outre_async.store._dataset import Dataset, open_dataset

from ._batches import default_num_parts
from ._fennel import PartitionConfig, bloom_fp_bound, bloom_shape, level_params, stream_partition
from ._output import BUFFER_BYTES, PartitionWriter, check_name
from ._reader import PartitionSet, open_partitions
from ._stream import CscStream


def default_name(cfg: PartitionConfig) -> str:
    name = f"{cfg.objective}-{cfg.parts}"
    if cfg.levels == 2:
        name += f"-l2x{cfg.k1}"
    if cfg.mode == "bloom":
        name += "-bloom"
    return name


def partition(dataset: Dataset | str | os.PathLike[str], parts: int | None = None, *, name: str | None = None,
              order: np.ndarray | None = None, overwrite: bool = False, progress: bool = False,
              write_buffer_bytes: int = BUFFER_BYTES, **options: Any) -> PartitionSet:
    """Partition ``dataset`` into ``parts`` parts and write ``partitions/<name>/``; returns it opened.

    ``parts=None``: :func:`default_num_parts` of the node count (small parts, many per macro batch).

    ``options`` are :class:`PartitionConfig` fields (``levels``, ``first_level``, ``mode``, ``passes``,
    ``gamma``, ``nu``, ``alpha``, ``train_weight``, ``objective``, ``chunk_edges``, ``bloom_bytes``).
    ``order``: the stream order (default: storage order).  ``progress``: a tqdm bar over streamed edges.
    ``write_buffer_bytes``: memory for regrouping the outputs into partition order (see ``_buckets``).
    """
    ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
    cfg = PartitionConfig(parts=default_num_parts(ds.num_nodes) if parts is None else parts, **options)
    name = check_name(name or default_name(cfg))
    start = time.perf_counter()
    with PartitionWriter(ds, name, overwrite=overwrite, buffer_bytes=write_buffer_bytes) as writer, _Progress(ds, cfg, progress) as bar:
        with _CompileClock() as jit:
            result = stream_partition(ds, cfg, order=order, on_chunk=bar.update, scratch_dir=writer.tmp)
        seconds = time.perf_counter() - start
        bar.set_description("writing outputs")
        stream = CscStream(ds, chunk_edges=cfg.chunk_edges, on_chunk=bar.update)
        streaming = max(seconds - jit.seconds, 1e-9)
        meta = {"config": cfg.as_dict(), "partition_seconds": seconds, "order": "storage" if order is None else "given",
                "compile_seconds": jit.seconds, "edges_per_second": _passes(cfg) * ds.num_edges / streaming,
                **result.stats}
        if cfg.mode == "bloom":
            params = level_params(cfg, cfg.k1, np.array([ds.num_nodes]), np.array([0]), np.array([0]))
            nbits, nhash = bloom_shape(cfg, params)
            meta["bloom_level1"] = {"bits_per_filter": nbits, "hashes": nhash,
                                    "fp_bound_when_full": bloom_fp_bound(nbits, nhash, int(params.cap[0]))}
        writer.write(result, stream, meta, started=start)
        del result, stream  # the O(N) assignment and the read buffer, before the outputs are loaded
    return open_partitions(ds, name)


def _passes(cfg: PartitionConfig) -> int:
    return cfg.passes + (2 if cfg.levels == 2 else 0)  # two-level: one statistics pass + the second level


class _CompileClock(numba_event.Listener):
    """Seconds numba spends compiling (or loading from its cache) kernels inside the block, from its
    ``numba:compile`` events: the first run in a process compiles the streaming kernels, which would
    otherwise pass for a streaming rate of a few thousand edges/s on a small graph.  Nested compiles
    (a kernel calling another) count once."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth, self._since = 0, 0.0

    def __enter__(self) -> _CompileClock:
        numba_event.register("numba:compile", self)
        return self

    def __exit__(self, *exc: object) -> None:
        numba_event.unregister("numba:compile", self)

    def on_start(self, event: numba_event.Event) -> None:
        self._depth += 1
        if self._depth == 1:
            self._since = time.perf_counter()

    def on_end(self, event: numba_event.Event) -> None:
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._since


class _Progress:
    """A tqdm bar over streamed edges (all passes plus the output pass), or nothing."""

    def __init__(self, ds: Dataset, cfg: PartitionConfig, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            total = (_passes(cfg) + 1) * ds.num_edges
            self.bar = tqdm(total=total, unit="edge", unit_scale=True, desc=f"partitioning into {cfg.parts}")

    def update(self, edges: int) -> None:
        if self.bar is not None:
            self.bar.update(edges)

    def set_description(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description(text)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
