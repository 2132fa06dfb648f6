"""``OutreLoader``: the asyncio-native streaming dataloader (design §4-5).

    async with OutreLoader(ds, fanouts=[10, 10], batch_size=1024) as loader:
        async for batch in loader:          # one epoch, completion order (ordered=True: plan order)
            ...
    for batch in loader:                    # the same loader from synchronous code (own loop thread)
        ...

Memory is bounded by construction (all capacities are config), and ``memory_budget`` covers all of
it: the feature buffer, its node → slot table, the staging arenas, extractor and sampler scratch,
sampled subgraphs and gathered batches in flight (the formula, part by part, is in ``_budget``;
``stats()["memory"]`` reports the parts).  Given a budget, the loader sizes the staging arenas and
the buffer to fit it, or refuses it with a :class:`ConfigError` naming the minimum.  With ``history=``
the table adds ``4 N + C (4 dim + 12 + num_samplers)`` bytes (C slots of h^(L-1) rows; the cache's
``history_bytes``), counted as one more part of the plan before the feature buffer is sized; batches
its overtaking window holds back in completion order are not counted (``_budget``).  With
``ordered=True`` the batches the reorder buffer holds keep their leases on the pool of batch
matrices or on the samplers' out-of-turn budget (``_out_of_turn``), both parts of the plan.
"""

from __future__ import annotations

import asyncio
import numbers
import os
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from numpy.typing import ArrayLike

from .._errors import ConfigError, PipelineClosed
from .._units import format_bytes
from ..cache._history_config import HistoryConfig
from ..features import FeatureSource
from ..features._static_cache import StaticFeatureCache
from ..sampling._plan import SeedIndex, max_edges_per_batch, max_rows_per_batch, num_batches, plan_epoch, seed_ids
from ..store._dataset import Dataset, open_dataset
from ._batch import ExtractedBatch, OutreBatch, PlanItem, SampledBatch, to_batch
from ._batch_rows import expected_batch_rows
from ._budget import MemoryPlan, Sizes, batch_row_bytes, plan_memory
from ._channel import Channel
from ._config import BACKENDS, LoaderConfig
from ._delivery import Delivery
from ._extract_stage import ExtractStage
from ._history import EpochHistory, build_owner
from ._loop_thread import LoopThread
from ._out_of_turn import OutOfTurnMemory
from ._pipeline import EpochParts
from ._profile_stats import profile_stats
from ._profiling import AppliedPlan, load_plan
from ._pyg_names import check_transform, given_options, resolve_aliases
from ._ranks import resolve_place
from ._resources import ResourceBox, Resources
from ._sample_stage import SampleStage
from ._stats import queue_stats, resource_stats, stage_stats

if TYPE_CHECKING:
    from ._partition_mode import PartitionBatching

__all__ = ["BACKENDS", "LoaderConfig", "OutreLoader"]

_SOURCE_KNOBS = ("backend", "max_in_flight", "source_options")


class OutreLoader:
    """Streams PyG mini-batches of ``split`` through samplers, io_uring extractors and bounded queues.

    Knobs come as keywords (``fanouts=``, ``batch_size=``, ...: :class:`LoaderConfig`'s fields, with
    its defaults) or as one ``config=LoaderConfig(...)``, not both.  ``source=`` reads features
    through a :class:`FeatureSource` the caller opened instead of opening one from ``backend``; the
    caller keeps it (the loader never closes it).  PyG ``NeighborLoader`` names work too:
    ``num_neighbors`` (= ``fanouts``), ``input_nodes`` (= ``split``: a split name, node ids or a
    boolean mask), ``num_workers`` (>= 1: ``num_samplers``), ``pin_memory`` and ``transform``
    (applied to each batch); each batch carries ``NeighborLoader``'s fields (:class:`OutreBatch`).

    Reproducibility: batch *content* (seeds, sampled edges, feature rows) is a function of ``seed``
    and the epoch in either order, but by default batches arrive in completion order (the fastest),
    which changes from run to run, so a fixed seed alone does not repeat a training run.  Pass
    ``ordered=True`` for plan order: the same seed then gives the same sequence of batches.
    """

    def __init__(self, dataset: Dataset | str | os.PathLike[str], *,
                 # what to iterate (``input_nodes``: PyG's name for ``split``)
                 split: str | ArrayLike | None = None, input_nodes: str | ArrayLike | None = None,
                 # LoaderConfig's knobs, with its defaults (tests/loader/test_signature.py keeps them equal)
                 fanouts: Sequence[int] | None = None, batch_size: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, ordered: bool = False,
                 num_samplers: int = 2, num_extractors: int = 2, extract_queue: int | None = None,
                 ready_queue: int | None = None, buffer_rows: int | None = None,
                 memory_budget: int | str | None = None, backend: str = "auto", max_in_flight: int | None = None,
                 device: str = "cpu", source_options: dict[str, Any] | None = None, partitions: str | None = None,
                 parts_per_batch: int | None = None, interleave: int | None = None,
                 neighbor_cache: int | str = 0, history: HistoryConfig | None = None,
                 rank: int | None = None, world_size: int | None = None, local_world_size: int | None = None,
                 profile: str | None = None, cache_split: str | float = "auto",
                 # the same knobs as one object, or a source the caller opened
                 config: LoaderConfig | None = None, source: FeatureSource | None = None,
                 # PyG NeighborLoader's names (see _pyg_names)
                 num_neighbors: Sequence[int] | None = None, num_workers: int | None = None,
                 pin_memory: bool = False, transform: Callable[[Any], Any] | None = None) -> None:
        given = given_options(locals())
        split, given = resolve_aliases(given, split=split, input_nodes=input_nodes, num_neighbors=num_neighbors,
                                       num_workers=num_workers, pin_memory=pin_memory)
        self.dataset = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        self.config = _config(config, given)
        self.transform = check_transform(transform)
        if self.dataset.feature_dim == 0:
            raise ConfigError(f"dataset {self.dataset.path} has no features; the loader needs them")
        self._source = _check_source(source, self.config, self.dataset)
        self._split = split
        self._seeds = seed_ids(self.dataset, split)
        self._seed_index = SeedIndex(self._seeds)
        self._place = resolve_place(self.config)
        if 0 < len(self._seeds) < self._place.world_size:
            raise ConfigError(f"split has {len(self._seeds)} seeds for {self._place.world_size} ranks; every rank "
                              "needs at least one: use fewer ranks or a larger split")
        self._max_rows = max_rows_per_batch(self.config.batch_size, self.config.fanouts, self.dataset.num_nodes)
        self._partitioned = self._partition_batching()
        first_plan = self._plan(0)
        self._batch_rows = expected_batch_rows(self.dataset, self.config.fanouts, first_plan, seed=self.config.seed,
                                               max_rows=self._max_rows)
        self._applied, self._static = self._apply_profile()  # profile=: the budget's split (issue 12)
        self._history = build_owner(self.dataset, self.config, first_plan)
        self.memory = self._memory_plan()
        if self.config.extract_queue is None:  # the depth the plan counts (``_budget.extract_depth``)
            self.config = replace(self.config, extract_queue=self.memory.extract_queue)
        self.buffer_rows = self.memory.buffer_rows
        self._epoch = 0
        self._sample, self._extract, self._delivery = SampleStage(), ExtractStage(), Delivery()
        self._extract.static = self._static
        self._channels = self._new_channels()  # the latest epoch's (what stats()["queues"] reports)
        self._gate: OutOfTurnMemory | None = None  # ordered mode: the latest epoch's out-of-turn budget
        self._box = ResourceBox()
        self._bridge: LoopThread | None = None
        self._finalizer: weakref.finalize | None = None

    def _partition_batching(self) -> PartitionBatching | None:
        cfg = self.config
        if cfg.partitions is None:
            return None
        from ._partition_mode import PartitionBatching

        return PartitionBatching.of_config(self.dataset, cfg, self._seeds, rank=self._place.rank,
                                           world_size=self._place.world_size)

    def _apply_profile(self) -> tuple[AppliedPlan | None, StaticFeatureCache | None]:
        """With ``profile=``: the plan (read, or measured now for ``"auto"``) rewrites the config."""
        cfg, ds = self.config, self.dataset
        if cfg.profile is None:
            return None, None
        applied = load_plan(ds, cfg, self._seeds, self._partitioned, self._sizes(), self._source_kind())
        self.config = applied.config
        if self._partitioned is not None:
            self._partitioned.use_neighbor_cache(applied.neighbor_nodes, int(applied.config.neighbor_cache))
        static = None
        if len(applied.static_rows):
            static = StaticFeatureCache(applied.static_rows, ds.num_nodes, ds.feature_dim,
                                        pin=torch.device(cfg.device).type == "cuda")
        return applied, static

    @property
    def _res(self) -> Resources | None:
        return self._box.res

    def _sizes(self) -> Sizes:
        cfg, ds = self.config, self.dataset
        return Sizes(num_nodes=ds.num_nodes, dim=ds.feature_dim, row_bytes=ds.feature_dim * ds.feature_dtype.itemsize,
                     stride=ds.row_layout.stride, max_rows=self._max_rows,
                     max_edges=max_edges_per_batch(cfg.batch_size, cfg.fanouts, ds.num_edges),
                     batch_rows=self._batch_rows)

    def _source_kind(self) -> str:
        return "injected" if self._source is not None else "memory" if self.config.backend == "memory" else "disk"

    def _memory_plan(self) -> MemoryPlan:
        cfg, sizes, kind = self.config, self._sizes(), self._source_kind()
        history = self._history.table.nbytes(cfg.num_samplers) if self._history is not None else 0
        if self._place.local_world_size is not None:  # memory_budget is the host's: this rank's share
            cfg = replace(cfg, memory_budget=self._place.budget_share(cfg.budget_bytes))
        extra = {"history table": history} if history else {}
        if self._static is not None:
            extra["static feature cache"] = self._static.nbytes
        return plan_memory(cfg, sizes, source=kind, extra=extra or None)

    def _new_channels(self) -> tuple[Channel[SampledBatch], Channel[ExtractedBatch]]:
        return (Channel(self.config.extract_capacity, name="extract queue"),
                Channel(self.config.ready_capacity, name="ready queue"))

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
        self._box.res = await Resources.create(loop, self.config, self.dataset, plan=self.memory,
                                                partitioned=self._partitioned, source=self._source)
        if self._static is not None:  # the profile's hot rows, read once through the loader's source
            await self._static.load(self._box.res.source if self._box.res is not None else self._source)

    async def aclose(self) -> None:
        """Close any epoch still running, then release every resource (ring, files, threads).

        An ``async for`` left by an exception or cancellation in its body leaves its epoch open until
        the generator is collected; closing the loader closes it deterministically.  The loader can be
        opened again later.
        """
        await self._box.close()

    def __aiter__(self) -> AsyncIterator[OutreBatch]:
        return self._one_epoch()

    async def _one_epoch(self) -> AsyncGenerator[OutreBatch, None]:
        await self.open()
        res = self._res
        if res is None:
            raise PipelineClosed("the loader was closed")
        epoch = self._epoch
        self._epoch += 1
        ordered = self.config.ordered
        history = self._history.epoch(ordered=ordered) if self._history is not None else None
        parts = self._epoch_parts(res, epoch, history)
        device = torch.device(self.config.device)
        labels = self.dataset.labels

        def wrap(eb: ExtractedBatch) -> OutreBatch:
            input_id = self._seed_index.positions(eb.subgraph.n_id[: eb.subgraph.batch_size])
            batch = to_batch(eb, labels, epoch, device, input_id)
            if history is not None and eb.history is not None:
                batch.__dict__["_outre_history"] = history.owner.record(eb.history, device)
            return batch

        window = history.window if history is not None and not ordered else None
        batches = self._delivery.deliver(parts, ordered=ordered, wrap=wrap, window=window)
        res.epochs.add(batches)
        transform = self.transform
        try:
            async for batch in batches:
                yield batch if transform is None else transform(batch)
        finally:
            res.epochs.discard(batches)
            if history is not None:
                history.close()
            await batches.aclose()

    def _plan(self, epoch: int) -> Sequence[PlanItem]:
        cfg = self.config
        if self._partitioned is not None:  # micro-batches of macro batches (OUTRE §4.2)
            return self._partitioned.plan(epoch)
        return plan_epoch(self._seeds, cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed, epoch=epoch,
                          drop_last=cfg.drop_last, rank=self._place.rank, world_size=self._place.world_size)

    def _epoch_parts(self, res: Resources, epoch: int, history: EpochHistory | None) -> EpochParts:
        cfg = self.config
        plan = self._plan(epoch)
        # rank r's batch seq samples with stream (epoch * spacing + seq) * W + r: distinct over ranks and epochs
        world = self._place.world_size
        if self._partitioned is not None:
            stream_base = self._partitioned.stream_base(epoch)
        else:
            stream_base = epoch * max(len(plan), 1) * world + self._place.rank
        self._channels = extract, ready = self._new_channels()
        if cfg.ordered:
            self._gate = OutOfTurnMemory(self.memory.out_of_turn_bytes, batch_row_bytes(self.dataset.feature_dim))
        return EpochParts(
            plan=plan, samplers=res.samplers, executor=res.executor, buffer=res.buffer, source=res.source,
            extract=extract, ready=ready, num_extractors=cfg.num_extractors, stream_base=stream_base,
            sample_stage=self._sample, extract_stage=self._extract, matrices=res.matrices, history=history,
            gate=self._gate if cfg.ordered else None, stream_stride=world,
        )

    # -- sync API --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[OutreBatch]:
        return self._sync_epoch(self._sync_bridge())

    def start(self) -> OutreLoader:
        """Open the resources now, from synchronous code (``await loader.open()`` is the async
        form); otherwise the first batch does it.  What it costs, e.g. reading a profile's static
        feature cache, is then paid before the training loop starts rather than inside its first epoch."""
        self._sync_bridge().call(self.open)
        return self

    def _sync_bridge(self) -> LoopThread:
        if self._res is not None and self._bridge is None:
            raise ConfigError("this loader is open in async mode; use `async for`, or a separate loader")
        if self._bridge is None:
            self._bridge = LoopThread()
            self._finalizer = weakref.finalize(self, _close_bridge, self._bridge, self._box)
        return self._bridge

    def _sync_epoch(self, bridge: LoopThread) -> Iterator[OutreBatch]:
        agen = bridge.call(self._make_epoch)
        try:
            while True:
                try:
                    batch = bridge.call(agen.__anext__)
                except StopAsyncIteration:
                    return
                yield batch
        finally:
            if not bridge.closed:
                bridge.call(agen.aclose)

    async def _make_epoch(self) -> AsyncGenerator[OutreBatch, None]:
        return self._one_epoch()

    def close(self) -> None:
        """Shut down the sync bridge: resources closed on its loop, thread joined (idempotent)."""
        bridge, self._bridge = self._bridge, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if bridge is not None:
            _close_bridge(bridge, self._box)

    def __enter__(self) -> OutreLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- epochs ------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs (0 first; each iteration, even one left early, takes one)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run ``epoch``: its shuffle, its partition plan and its sampling
        streams, as an uninterrupted run would have them (like ``DistributedSampler.set_epoch``).  For
        resuming a run from a checkpoint; ranks of a data-parallel run must pass the same value."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
            raise ConfigError(f"set_epoch({epoch!r}): the epoch must be an int >= 0")
        self._epoch = int(epoch)

    # -- introspection ---------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._partitioned is not None:  # the plan of the next epoch (macro batches vary per epoch)
            return len(self._partitioned.plan(self._epoch))
        return num_batches(len(self._seeds), self.config.batch_size, self.config.drop_last, self._place.world_size)

    def __repr__(self) -> str:
        cfg, res = self.config, self._res
        split = self._split if isinstance(self._split, str) else "<ids>"
        backend = res.source.backend if res is not None else cfg.backend
        budget = "none" if cfg.budget_bytes is None else format_bytes(cfg.budget_bytes)
        return (f"OutreLoader(dataset={str(self.dataset.path)!r}, input_nodes={split!r} ({len(self._seeds)} seeds), "
                f"fanouts={list(cfg.fanouts)}, batch_size={cfg.batch_size}, batches={len(self)}, "
                f"order={'plan' if cfg.ordered else 'completion'}, backend={backend!r}, memory_budget={budget}, "
                f"planned={format_bytes(self.memory.total)}{', partitions=' + repr(cfg.partitions) if cfg.partitions else ''}, "
                f"state={self._state()})")

    def _state(self) -> str:
        """``open`` (resources held), ``closed`` (released by ``close()`` / ``aclose()``; the next
        iteration opens them again) or ``not opened`` (nothing iterated or opened yet)."""
        if self._res is not None:
            return "open"
        return "closed" if self._box.closed is not None else "not opened"

    def stats(self) -> dict[str, Any]:
        """Per-stage counters (design §9): batches, busy seconds, stall, queue depths, buffer and I/O
        figures; backend, buffer and I/O stay reported (as of the close) after the loader is closed."""
        out = stage_stats(self._sample.counters, self._extract.counters, self._delivery.counters)
        out["epochs_started"] = self._epoch
        out["buffer_rows"] = self.buffer_rows
        out["max_rows_per_batch"] = self._max_rows
        place = self._place
        out["expected_rows_per_batch"] = self._batch_rows
        out["memory"] = {"budget": place.budget_share(self.config.budget_bytes), "planned": self.memory.total,
                         **self.memory.parts}
        out["ranks"] = {"rank": place.rank, "world_size": place.world_size, "local_world_size": place.local_world_size}
        extract, ready = self._channels
        out["queues"] = queue_stats({"extract": extract.statistics(), "ready": ready.statistics()})
        res = self._res
        out.update(resource_stats(res.snapshot() if res is not None else self._box.closed))
        if self._gate is not None:
            out["out_of_turn"] = self._gate.stats()
        if self._partitioned is not None:
            out["neighbor_lists"] = self._partitioned.stats()
        if self._history is not None:
            out["history"] = self._history.stats()
        if self._applied is not None:
            out["profile"] = profile_stats(self._applied.info, out, self._static)
        return out


def _config(config: LoaderConfig | None, given: dict[str, Any]) -> LoaderConfig:
    """The loader's one config: ``config=`` as given, or one made from the keywords."""
    if config is not None:
        if given:
            raise ConfigError(f"pass either config=LoaderConfig(...) or option keywords, not both "
                              f"(got config and {sorted(given)})")
        return config
    missing = [k for k in ("fanouts", "batch_size") if k not in given]
    if missing:
        raise ConfigError(f"OutreLoader needs {' and '.join(missing)} (or config=LoaderConfig(...))")
    return LoaderConfig(**given)


def _check_source(source: FeatureSource | None, cfg: LoaderConfig, ds: Dataset) -> FeatureSource | None:
    """An injected source must serve this dataset's rows; the knobs that open a source do not apply."""
    if source is None:
        return None
    if not isinstance(source, FeatureSource):
        raise ConfigError(f"source must be a FeatureSource, got {type(source).__name__}")
    if (source.num_rows, source.dim) != (ds.num_nodes, ds.feature_dim):
        raise ConfigError(f"source has {source.num_rows} rows of dim {source.dim}, dataset {ds.path} has "
                          f"{ds.num_nodes} rows of dim {ds.feature_dim}; pass a source over this dataset")
    defaults = LoaderConfig(fanouts=cfg.fanouts, batch_size=cfg.batch_size)
    clash = [k for k in _SOURCE_KNOBS if getattr(cfg, k) != getattr(defaults, k)]
    if clash:
        raise ConfigError(f"{clash} configure the source the loader opens; with source= they do not apply")
    return source


def _close_bridge(bridge: LoopThread, box: ResourceBox) -> None:
    """Close the resources on the bridge's loop, then stop and join it (also the GC finalizer, which
    may run on any thread, the loop's own included: ``LoopThread.close`` handles both)."""
    bridge.close(box.close)
