"""What an open :class:`OutreLoader` holds, bound to one event loop, and what it leaves behind.

``Resources.create`` opens the feature source (unless the caller passed one), the feature buffer and
the chain of feature tiers over them (``_tiers``: the extract stage asks its top), the byte pool of
batch matrices in flight, one sampler per sample worker and their executor.  Ownership rule: a source
the loader opened is closed with the loader; an injected source (``OutreLoader(..., io=IOOptions(source=...))``) stays its caller's,
who opened it and may share it, so the loader never closes it.  On close the loader keeps a
:class:`ResourceStats` snapshot (backend, buffer, I/O and tier counters) so ``stats()`` still reports them,
while the buffer's memory itself is given back.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..features import FeatureBuffer, FeatureSource, FeatureTier, open_source
from ..features._disk_probe import gap_from_probe
from ..features._gpu_tier import DeviceFeatureCache
from ..features._static_cache import StaticFeatureCache
from ..features._uring_source import UringSource
from ..sampling._items import ItemSampler
from ..sampling._sampler import NeighborSampler
from ..store._dataset import Dataset
from ..store._watch import FileWatch
from ._batch import Sampler
from ._batch_memory import BatchMemory
from ._budget import MemoryPlan, batch_row_bytes, decodes_on_host
from ._config import LoaderConfig
from ._device_copy import CopyEngine, copy_engine_for
from ._read_depth import io_depth
from ._tiers import build_tiers

if TYPE_CHECKING:
    from ._delivery import EpochStream
    from ._partition_mode import PartitionBatching


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """Backend, buffer and I/O figures of an opening (live, or frozen at its close)."""

    backend: str
    buffer: dict[str, int | float]
    io: dict[str, Any]
    matrices: dict[str, int] | None = None
    tiers: dict[str, dict[str, Any]] | None = None  # each tier's figures, top to bottom
    device: dict[str, Any] | None = None  # the copy engine's counters (a GPU loader)


class Resources:
    """The source, buffer, samplers and executor of one opening; ``epochs`` are its running deliveries."""

    def __init__(self, loop: asyncio.AbstractEventLoop, source: FeatureSource, owns_source: bool,
                 buffer: FeatureBuffer, matrices: BatchMemory, samplers: list[Sampler],
                 executor: ThreadPoolExecutor, tiers: FeatureTier, engine: CopyEngine | None = None,
                 partitioned: PartitionBatching | None = None) -> None:
        self.loop, self.source, self.owns_source, self.buffer = loop, source, owns_source, buffer
        self.partitioned = partitioned  # gets its samplers back at close (``PartitionBatching.release``)
        self.tiers = tiers
        self.matrices, self.engine = matrices, engine
        self.samplers, self.executor = samplers, executor
        self.epochs: weakref.WeakSet[EpochStream[Any]] = weakref.WeakSet()
        self.watch: FileWatch | None = None  # the files read during epochs (``store._watch``), set by create

    @classmethod
    async def create(cls, loop: asyncio.AbstractEventLoop, cfg: LoaderConfig, ds: Dataset, *, plan: MemoryPlan,
                     budget: int | None, device: torch.device, partitioned: PartitionBatching | None,
                     source: FeatureSource | None,
                     static: StaticFeatureCache | None = None, gpu: DeviceFeatureCache | None = None) -> Resources:
        owns_source = source is None
        if source is None:
            source = _open_source(cfg, ds, plan.source_options())
        buffer = FeatureBuffer(ds.num_nodes, plan.buffer_rows, ds.feature_dim, held=ds.row_format.held,
                               policy=cfg.buffer_policy, merge_rows=source.merge_rows, map_entries=plan.map_entries)
        engine = copy_engine_for(device, cfg.device_depth)  # None on the CPU
        row = ds.row_format.delivering(cfg.x_dtype)
        on_host = decodes_on_host(cfg.device)
        matrices = BatchMemory(plan.batch_bytes, batch_row_bytes(row, on_host=on_host), budget=budget,
                               registry=engine.registry if engine is not None else None, dtype=row.held,
                               room=row.delivered.itemsize if on_host and row.decodes else None)
        samplers: list[Sampler]
        if partitioned is not None:
            samplers = [*partitioned.samplers(ds, list(cfg.fanouts), cfg.seed, cfg.num_samplers)]
        else:
            samplers = [ItemSampler(NeighborSampler(ds, list(cfg.fanouts), seed=cfg.seed)) for _ in range(cfg.num_samplers)]
        executor = ThreadPoolExecutor(cfg.num_samplers, thread_name_prefix="outre-sampler")
        tiers = build_tiers(source, buffer, num_extractors=cfg.num_extractors, static=static, gpu=gpu)
        res = cls(loop, source, owns_source, buffer, matrices, samplers, executor, tiers, engine, partitioned)
        # what epochs read from disk: the source's file (none for ``memory``: its rows were copied at
        # open) and the maps the samplers read (``indices`` when not in RAM; a features map is not theirs),
        # against the fingerprints of the dataset's open
        features = ds.features_path if ds.feature_dim else None
        maps = [p for p in ds.mapped_paths if p != features]
        res.watch = ds.file_watch(dict.fromkeys([*source.files, *maps]))
        return res

    def snapshot(self) -> ResourceStats:
        return ResourceStats(backend=self.source.backend, buffer=self.buffer.stats(), io=self.source.stats(),
                             matrices=self.matrices.stats(), tiers=self.tiers.chain_stats(),
                             device=self.engine.stats() if self.engine is not None else None)

    async def close(self) -> None:
        try:
            await self.buffer.aclose()  # its window requests read through the source: before the source closes
            if self.owns_source:
                await self.source.aclose()
        finally:
            if self.engine is not None:  # every copy complete before the pool unlocks and unmaps its maps
                self.engine.close()
            self.matrices.close()
            self.executor.shutdown(wait=True)
            if self.partitioned is not None:  # the samplers are done: their scratch and macro blocks go
                self.partitioned.release(self.samplers)


def _open_source(cfg: LoaderConfig, ds: Dataset, staging: dict[str, int]) -> FeatureSource:
    """Open the configured backend; a disk source gets the staging sizes of the memory plan unless
    ``source_options`` set them; the reads in flight are ``_read_depth``'s."""
    io_opts = {} if cfg.backend == "memory" else {**staging, **cfg.source_options}
    depth = io_depth(cfg, ds.row_layout.stride)
    if depth is not None:
        io_opts["max_in_flight"] = depth
    if cfg.backend != "memory" and cfg.disk_probe is not None:  # merged reads: holes cheaper than a read
        # (pread, which keeps its own depth: priced at io_uring's default, as it always was)
        io_opts.setdefault("max_gap_bytes", gap_from_probe(cfg.disk_probe, depth or UringSource.DEFAULT_DEPTH,
                                                           ds.row_layout.stride))
    return open_source(ds, cfg.backend, **io_opts)  # type: ignore[arg-type]  # validated in LoaderConfig


@dataclass(slots=True)
class ResourceBox:
    """The loader's open resources and the figures of its last closed opening; shared with the sync
    bridge's GC finalizer, which must not hold the loader itself."""

    res: Resources | None = None
    closed: ResourceStats | None = None

    async def close(self) -> None:
        """Close every running epoch, then the resources (idempotent); keep their figures."""
        res, self.res = self.res, None
        if res is None:
            return
        try:
            for epoch in list(res.epochs):
                await epoch.aclose()
            await res.close()
        finally:
            self.closed = res.snapshot()
