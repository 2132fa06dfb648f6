"""``OutreLoader``: the asyncio-native streaming dataloader (design §4-5).

    async with OutreLoader(ds, fanouts=[10, 10], batch_size=1024) as loader:
        async for batch in loader:          # one epoch, completion order (ordered=True: plan order)
            ...
    for batch in loader:                    # the same loader from synchronous code (own loop thread)
        ...

Memory is bounded by construction (all capacities are config):
``buffer_rows × dim × 4`` (feature buffer) ``+ 8 N`` (its node → slot table)
``+ (ready_queue + num_extractors + 1) × max_rows × dim × 4`` (gathered batch matrices in flight)
``+ extract_queue × one sampled subgraph``, where ``max_rows = batch_size × (1 + f1 + f1 f2 + ...)``
capped at N; in ordered mode batches waiting for their turn add at most
``num_samplers + extract_queue + num_extractors + ready_queue`` gathered matrices.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections import defaultdict
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._errors import ConfigError, PipelineClosed
from .._units import parse_bytes
from ..features._backends import BACKENDS
from ..features._feature_buffer import FeatureBuffer
from ..sampling._plan import max_rows_per_batch, num_batches, plan_epoch
from ..store._dataset import Dataset, open_dataset
from ._batch import ExtractedBatch, OutreBatch, to_batch
from ._loop_thread import LoopThread
from ._pipeline import EpochParts, deliver

_SLOT_OVERHEAD = 40  # bytes of bookkeeping per buffer slot (node id, refs, valid, LRU links)


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderConfig:
    """Every knob of :class:`OutreLoader`, validated once."""

    fanouts: tuple[int, ...]
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    drop_last: bool = False
    ordered: bool = False
    num_samplers: int = 2
    num_extractors: int = 2
    extract_queue: int = 0       # 0: num_samplers + 2 (GNNDrive: a bit more than the samplers)
    ready_queue: int = 0         # 0: num_extractors
    buffer_rows: int = 0         # 0: from memory_budget, else (num_extractors + 1) × max rows per batch
    memory_budget: int = 0       # bytes for the feature buffer; 0 = use buffer_rows' default
    backend: str = "auto"
    max_in_flight: int | None = None  # None: the I/O backend's default (io_uring 256, pread 32)
    device: str = "cpu"
    source_options: dict[str, Any] = field(default_factory=dict)
    partitions: str | None = None  # partitions/<name>/ of the dataset: partition-based batches (OUTRE §4.2)
    parts_per_batch: int = 1       # partitions per macro batch
    neighbor_cache: int = 0        # bytes of the global neighbour cache (partition mode)

    def __post_init__(self) -> None:
        if not self.fanouts or any(not isinstance(f, int) or f == 0 or f < -1 for f in self.fanouts):
            raise ConfigError(f"fanouts={list(self.fanouts)} must be a non-empty list of ints > 0 (or -1 = all)")
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ConfigError(f"max_in_flight={self.max_in_flight} must be >= 1 (or None for the backend's default)")
        for name in ("batch_size", "num_samplers", "num_extractors", "parts_per_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("extract_queue", "ready_queue", "buffer_rows", "memory_budget", "neighbor_cache"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1 (or omitted for the default)")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend={self.backend!r} must be one of {BACKENDS}")

    @property
    def extract_capacity(self) -> int:
        return self.extract_queue or self.num_samplers + 2

    @property
    def ready_capacity(self) -> int:
        return self.ready_queue or self.num_extractors


class OutreLoader:
    """Streams PyG mini-batches of ``split`` through samplers, io_uring extractors and bounded queues."""

    def __init__(self, dataset: Dataset | str | os.PathLike[str], *, split: str | np.ndarray = "train",
                 fanouts: list[int] | tuple[int, ...], batch_size: int,
                 memory_budget: int | str | None = None, **options: Any) -> None:
        self.dataset = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        budget = 0 if memory_budget is None else parse_bytes(memory_budget)
        if isinstance(options.get("neighbor_cache"), str):
            options["neighbor_cache"] = parse_bytes(options["neighbor_cache"])
        self.config = LoaderConfig(fanouts=tuple(fanouts), batch_size=batch_size, memory_budget=budget, **options)
        if self.dataset.feature_dim == 0:
            raise ConfigError(f"dataset {self.dataset.path} has no features; the loader needs them")
        self._seeds = self.dataset.split(split) if isinstance(split, str) else np.asarray(split, dtype=np.int64)
        self._max_rows = max_rows_per_batch(batch_size, self.config.fanouts, self.dataset.num_nodes)
        self._partitioned = self._partition_batching()
        self.buffer_rows = self._buffer_rows()
        self._epoch = 0
        self._counters: dict[str, float] = defaultdict(float)
        self._box: list[_Resources | None] = [None]  # shared with the GC finalizer, which must not hold self
        self._portal: LoopThread | None = None
        self._finalizer: weakref.finalize | None = None

    def _partition_batching(self) -> Any:
        cfg = self.config
        if cfg.partitions is None:
            return None
        from ._partition_mode import PartitionBatching

        return PartitionBatching(self.dataset, cfg.partitions, self._seeds, parts_per_batch=cfg.parts_per_batch,
                                 batch_size=cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed,
                                 drop_last=cfg.drop_last, neighbor_cache_bytes=cfg.neighbor_cache)

    @property
    def _res(self) -> _Resources | None:
        return self._box[0]

    @_res.setter
    def _res(self, value: _Resources | None) -> None:
        self._box[0] = value

    def _buffer_rows(self) -> int:
        cfg, n = self.config, self.dataset.num_nodes
        if cfg.buffer_rows:
            rows = cfg.buffer_rows
        elif cfg.memory_budget:
            rows = (cfg.memory_budget - 8 * n) // (self.dataset.feature_dim * 4 + _SLOT_OVERHEAD)
        else:
            rows = (cfg.num_extractors + 1) * self._max_rows
        rows = min(int(rows), n)
        if rows < self._max_rows:
            raise ConfigError(
                f"feature buffer of {max(rows, 0)} rows is smaller than one batch can need ({self._max_rows} rows "
                f"= batch_size {cfg.batch_size} x fanouts {list(cfg.fanouts)}); raise buffer_rows / memory_budget "
                "or lower batch_size or fanouts"
            )
        return rows

    # -- async API -------------------------------------------------------------------------------
    async def __aenter__(self) -> OutreLoader:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Create the I/O source, buffer, samplers and executor on the running loop (idempotent)."""
        loop = asyncio.get_running_loop()
        if self._res is not None:
            if self._res.loop is not loop:
                raise ConfigError("this loader is open on another event loop; use one loader per loop")
            return
        self._res = await _Resources.create(self, loop)

    async def aclose(self) -> None:
        """Close any epoch still running, then release every resource (ring, files, threads).

        An ``async for`` left by an exception or cancellation in its body leaves its epoch open until
        the generator is collected; closing the loader closes it deterministically.  The loader can be
        opened again later.
        """
        res, self._res = self._res, None
        if res is None:
            return
        for epoch in list(res.epochs):
            await epoch.aclose()
        await res.close()

    def __aiter__(self) -> AsyncIterator[OutreBatch]:
        return self._one_epoch()

    async def _one_epoch(self) -> AsyncGenerator[OutreBatch, None]:
        await self.open()
        res = self._res
        if res is None:
            raise PipelineClosed("the loader was closed")
        epoch = self._epoch
        self._epoch += 1
        parts = res.epoch_parts(self, epoch)
        device = torch.device(self.config.device)
        labels = self.dataset.labels

        def wrap(eb: ExtractedBatch) -> OutreBatch:
            return to_batch(eb, labels, epoch, lambda: res.buffer.release(eb.hold), device)

        batches = deliver(parts, ordered=self.config.ordered, wrap=wrap)
        res.epochs.add(batches)
        try:
            async for batch in batches:
                yield batch
        finally:
            res.epochs.discard(batches)
            await batches.aclose()

    # -- sync API --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[OutreBatch]:
        if self._res is not None and self._portal is None:
            raise ConfigError("this loader is open in async mode; use `async for`, or a separate loader")
        if self._portal is None:
            self._portal = LoopThread()
            self._finalizer = weakref.finalize(self, _close_portal, self._portal, self._box)
        return self._sync_epoch(self._portal)

    def _sync_epoch(self, portal: LoopThread) -> Iterator[OutreBatch]:
        agen = portal.call(self._make_epoch)
        try:
            while True:
                try:
                    batch = portal.call(agen.__anext__)
                except StopAsyncIteration:
                    return
                yield batch
        finally:
            if not portal.closed:
                portal.call(agen.aclose)

    async def _make_epoch(self) -> AsyncGenerator[OutreBatch, None]:
        return self._one_epoch()

    def close(self) -> None:
        """Shut down the sync bridge: resources closed on its loop, thread joined (idempotent)."""
        portal, self._portal = self._portal, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if portal is not None:
            _close_portal(portal, self._box)

    def __enter__(self) -> OutreLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- introspection ---------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._partitioned is not None:  # the plan of the next epoch (macro batches vary per epoch)
            return len(self._partitioned.plan(self._epoch))
        return num_batches(len(self._seeds), self.config.batch_size, self.config.drop_last)

    def stats(self) -> dict[str, Any]:
        """Per-stage counters (design §9): batches, busy seconds, stall, buffer and I/O figures."""
        out: dict[str, Any] = dict(self._counters)
        out["epochs_started"] = self._epoch
        out["buffer_rows"] = self.buffer_rows
        out["max_rows_per_batch"] = self._max_rows
        out["queues"] = {"extract_capacity": self.config.extract_capacity,
                         "ready_capacity": self.config.ready_capacity}
        if self._res is not None:
            out["backend"] = self._res.source.backend
            out["buffer"] = self._res.buffer.stats()
            out["io"] = self._res.source.stats()
        if self._partitioned is not None:
            out["neighbor_lists"] = self._partitioned.stats()
        return out


class _Resources:
    """What an open loader holds, all bound to one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, source: Any, buffer: FeatureBuffer,
                 samplers: list[Any], executor: ThreadPoolExecutor) -> None:
        self.loop, self.source, self.buffer = loop, source, buffer
        self.samplers, self.executor = samplers, executor
        self.epochs: weakref.WeakSet[Any] = weakref.WeakSet()  # running epochs' delivery generators

    @classmethod
    async def create(cls, loader: OutreLoader, loop: asyncio.AbstractEventLoop) -> _Resources:
        from ..features._backends import open_source
        from ..sampling._sampler import NeighborSampler

        cfg, ds = loader.config, loader.dataset
        io_opts = {} if cfg.backend == "memory" else {**cfg.source_options}
        if cfg.backend != "memory" and cfg.max_in_flight is not None:
            io_opts.setdefault("max_in_flight", cfg.max_in_flight)
        source = open_source(ds, cfg.backend, **io_opts)  # type: ignore[arg-type]  # validated in LoaderConfig
        buffer = FeatureBuffer(ds.num_nodes, loader.buffer_rows, ds.feature_dim, min_slots=loader._max_rows)
        if loader._partitioned is not None:
            samplers = loader._partitioned.samplers(ds, list(cfg.fanouts), cfg.seed, cfg.num_samplers)
        else:
            samplers = [NeighborSampler(ds, list(cfg.fanouts), seed=cfg.seed) for _ in range(cfg.num_samplers)]
        executor = ThreadPoolExecutor(cfg.num_samplers, thread_name_prefix="outre-sampler")
        return cls(loop, source, buffer, samplers, executor)

    def epoch_parts(self, loader: OutreLoader, epoch: int) -> EpochParts:
        cfg = loader.config
        plan: list[Any]
        if loader._partitioned is not None:  # micro-batches of macro batches (OUTRE §4.2)
            plan, stream_base = loader._partitioned.plan(epoch), loader._partitioned.stream_base(epoch)
        else:
            plan = plan_epoch(loader._seeds, cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed, epoch=epoch,
                              drop_last=cfg.drop_last)
            stream_base = epoch * max(len(plan), 1)
        return EpochParts(
            plan=plan, samplers=self.samplers, executor=self.executor, buffer=self.buffer,
            source=self.source, extract_capacity=cfg.extract_capacity, ready_capacity=cfg.ready_capacity,
            num_extractors=cfg.num_extractors, stream_base=stream_base,
            counters=loader._counters,
        )

    async def close(self) -> None:
        try:
            await self.source.aclose()
        finally:
            self.executor.shutdown(wait=True)


def _close_portal(portal: LoopThread, box: list[_Resources | None]) -> None:
    """Close the resources on the bridge's loop, then stop and join it (also the GC finalizer)."""
    res, box[0] = box[0], None
    if portal.closed:
        return
    try:
        if res is not None:
            portal.call(res.close)
    finally:
        portal.close()
