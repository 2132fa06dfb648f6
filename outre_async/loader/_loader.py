"""``OutreLoader``: the asyncio-native streaming dataloader (design §4-5).

    async with OutreLoader(ds, fanouts=[10, 10], batch_size=1024) as loader:
        async for batch in loader:          # one epoch, completion order (ordered=True: plan order)
            ...
    for batch in loader:                    # the same loader from synchronous code (own loop thread)
        ...

Memory is bounded by construction (all capacities are config), and ``memory_budget`` covers all of
it, part by part (``_budget``; ``stats()["memory"]``; docs/design/memory.md has the formula): given a
budget the loader sizes the staging arenas and the buffer to fit it, or refuses it with a
:class:`ConfigError` naming the minimum.  The history's table and transfer buffer, the batches the
reorder buffer or the history's window hold back, and the GPU tier's index are parts of the plan too;
the GPU tier's and a device history's rows (held row bytes, ``RowFormat``) are device memory, outside it.
"""

from __future__ import annotations

import asyncio
import numbers
import os
import threading
import time
import weakref
from contextlib import aclosing
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from numpy.typing import ArrayLike

from ..errors import ConfigError, LoaderForkedError, PipelineClosed
from .._units import available_memory
from ..aio._channel import Channel
from ..aio._loop_thread import LoopThread, forked_message
from ..cache._history_config import HistoryConfig
from ..features._decode import RowDecoder
from ..features._device_rows import assemble_x
from ..store._dataset import Dataset, open_dataset
from ..store._safe_read import fd_exhausted
from ._auto_budget import AutoBudget, with_default_budget
from ._batch import BatchHandles, ExtractedBatch, OutreBatch, SampledBatch, attach_handles, to_batch
from ._batch_memory import MatrixLease
from ._budget import MemoryPlan, batch_row_bytes, check_fits_machine, decodes_on_host, foresight_rows, warn_small_buffer
from ._config import BACKENDS, LoaderConfig, first_row_defaults
from ._delivery import AsyncEpoch, Delivery, EpochStream, ToDevice
from ._device_copy import CopyEngine, Transfer
from ._epoch_io import IOMark
from ._extract_stage import ExtractStage
from ._foresight import EpochForesight, ForesightTotals
from ._epoch_rule import EpochToken, OneEpochAtATime
from ._history import EpochHistory, build_owner
from ._link_input import link_input
from ._loader_report import LoaderReport
from ._layout import choose_layout
from ._options import CacheOptions, IOOptions, PartitionOptions, PipelineOptions, RankOptions
from ._out_of_turn import OutOfTurnMemory
from ._pipeline import EpochParts
from ._profiling import load_plan
from ._pyg_names import check_dataset_argument, check_transform
from ._resume import Progress
from ._resources import ResourceBox, Resources
from ._sample_stage import SampleStage
from ._setup import loader_config, loader_setup
from ._stateful import StatefulEpochs
from ._sync_api import SyncIteration
from ._tiers import tier_caches

if TYPE_CHECKING:
    import torch

__all__ = ["BACKENDS", "LoaderConfig", "OutreLoader"]

_FIRST_ROW = first_row_defaults()  # the signature's defaults: LoaderConfig's, written once there


class OutreLoader(SyncIteration, StatefulEpochs, LoaderReport):
    """Streams PyG mini-batches of ``split`` through samplers, io_uring extractors and bounded queues.

    Its own keywords are ``NeighborLoader``'s first row (what to iterate, fanouts, batch size, order,
    memory budget, device, transform) plus ``partitions=`` and ``history=``; the knobs that tune reads,
    caches, threads and ranks come in four small objects, ``io=``, ``cache=``, ``pipeline=``, ``ranks=``
    (``_options``; ``io=IOOptions(source=...)`` reads through a :class:`FeatureSource` the caller opened
    and keeps).  PyG ``NeighborLoader``'s names work too (``_pyg_names``), and ``LinkNeighborLoader``'s
    for edge batches (``_link_input``); each batch carries ``NeighborLoader``'s fields (:class:`OutreBatch`).

    Reproducibility: batch *content* is a function of ``seed`` and the epoch in either order; batches
    arrive in completion order (the fastest) unless ``ordered=True`` gives plan order, and the same seed
    then repeats the sequence of batches.
    :meth:`state_dict` / :meth:`load_state_dict` resume an epoch where it stopped (``_stateful``).

    One epoch at a time: each ``for``/``async for``/``iter()`` starts an epoch, and one started while
    another epoch of this loader is still being iterated (an iterator kept from ``iter(loader)``,
    another thread or task) is refused with :class:`ConcurrentEpochError`; the running one goes on.
    Finish, close or drop the first iterator, or use a second loader (``_epoch_rule``).  Used in a child
    forked after it started (torch ``DataLoader`` workers) it raises :class:`LoaderForkedError`.
    """

    def __init__(self, dataset: Dataset | str | os.PathLike[str], *,
                 # what to iterate (``input_nodes``: PyG's name for ``split``; None: "train")
                 split: str | ArrayLike | None = None, input_nodes: str | ArrayLike | None = None,
                 # how a batch is sampled (``num_neighbors``: PyG's name for ``fanouts``); both required
                 fanouts: Sequence[int] | None = None, num_neighbors: Sequence[int] | None = None,
                 batch_size: int | None = None,
                 # the epoch's order and what it delivers; defaults are LoaderConfig's (``_FIRST_ROW``)
                 shuffle: bool = _FIRST_ROW["shuffle"], seed: int = _FIRST_ROW["seed"],
                 drop_last: bool = _FIRST_ROW["drop_last"], ordered: bool = _FIRST_ROW["ordered"],
                 memory_budget: int | str | None = _FIRST_ROW["memory_budget"], device: str = _FIRST_ROW["device"],
                 x_dtype: str | torch.dtype = _FIRST_ROW["x_dtype"], transform: Callable[[Any], Any] | None = None,
                 # partition batches (a partition folder's name, or PartitionOptions with its counts); history
                 partitions: str | PartitionOptions | None = None, history: HistoryConfig | None = None,
                 # link prediction (PyG LinkNeighborLoader's names; _link_input): pairs or an edge split name
                 edge_label_index: str | ArrayLike | None = None, edge_label: ArrayLike | None = None,
                 neg_sampling: Any = None, neg_sampling_ratio: float | None = None,
                 # the rest, in small options objects (``_options``): reads, caches, threads and queues, ranks
                 io: IOOptions | None = None, cache: CacheOptions | None = None,
                 pipeline: PipelineOptions | None = None, ranks: RankOptions | None = None,
                 # PyG NeighborLoader's names (see _pyg_names)
                 num_workers: int | None = None, pin_memory: bool = False,
                 # NeighborLoader's and DataLoader's other names: accepted where they mean what the loader
                 # does, else a ConfigError naming what it does instead (_pyg_names.NO_COUNTERPART)
                 **pyg_options: Any) -> None:
        source = io.source if isinstance(io, IOOptions) else None
        split, cfg = loader_config(
            split=split, input_nodes=input_nodes, fanouts=fanouts, num_neighbors=num_neighbors, batch_size=batch_size,
            shuffle=shuffle, seed=seed, drop_last=drop_last, ordered=ordered, memory_budget=memory_budget,
            device=device, x_dtype=x_dtype, partitions=partitions, history=history, edge_label_index=edge_label_index, io=io,
            cache=cache, pipeline=pipeline, ranks=ranks, num_workers=num_workers, pin_memory=pin_memory,
            pyg_options=pyg_options)
        self.transform = check_transform(transform)
        if not isinstance(dataset, Dataset):
            check_dataset_argument(dataset)
        original = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        self._links = links = link_input(original, cfg, edge_label_index, edge_label, neg_sampling,
                                         neg_sampling_ratio)  # before a partition folder or a layout is looked for
        # partition batches read the partition-ordered copy when there (``_layout``): a source
        # the caller opened or a profile's rows name the original's rows, so those read the original
        auto_original = cfg.layout == "auto" and (source is not None or cfg.profile is not None)
        self._layout = choose_layout(original, "original" if auto_original else cfg.layout, cfg.partitions)
        self.original_dataset = original
        self.dataset = ds = self._layout.read  # what is sampled and read (n_id is mapped back in batches)
        split = self._layout.split(split)
        self._setup = setup = loader_setup(ds, cfg, split, source, links)
        if cfg.profile is not None:  # profile=: a budget below the loader's floor is refused before profiling
            setup.memory_plan(cfg)
        self._applied = load_plan(setup) if cfg.profile is not None else None
        run_cfg = self._applied.config if self._applied is not None else cfg
        self._gpu, self._static = tier_caches(setup, run_cfg, self._applied)  # the GPU and static tiers' rows (``_tiers``)
        self._history = build_owner(ds, run_cfg, setup.first_plan, setup.device)
        self.memory = self._memory_plan(run_cfg)
        check_fits_machine(self.memory, setup.sizes, available_memory())  # or ConfigError, before anything is allocated
        if run_cfg.buffer_rows is not None:  # the caller's size (a budget's is the plan's own choice)
            warn_small_buffer(self.memory.buffer_rows, setup.sizes)
        if run_cfg.extract_queue is None:  # the depth the plan counts (``_budget.extract_depth``)
            run_cfg = replace(run_cfg, extract_queue=self.memory.extract_queue)
        if run_cfg.foresight is None:  # the plan's (``_budget.foresight_depth``)
            run_cfg = replace(run_cfg, foresight=self.memory.foresight)
        self._foresight_totals = ForesightTotals()
        self.config = run_cfg  # set once: what the loader runs with
        self._decoder = RowDecoder(setup.sizes.format)  # held rows -> x_dtype, once per batch at hand-over
        self.buffer_rows = self.memory.buffer_rows
        self._epoch = 0
        self._progress: Progress | None = None  # the latest epoch's delivered seqs (``state_dict``)
        self._resume: Progress | None = None    # a loaded state's epoch, run next with only its remaining batches
        self._identity: dict[str, Any] | None = None  # the dataset's, as a state records it (``_facts``)
        self._io_marks: tuple[IOMark, IOMark | None] | None = None  # the latest epoch's start and end (epoch_io)
        self._sample, self._extract, self._delivery = SampleStage(), ExtractStage(), Delivery()
        self._channels = self._new_channels()  # the latest epoch's (what stats()["queues"] reports)
        self._gate: OutOfTurnMemory | None = None  # ordered mode: the latest epoch's out-of-turn budget
        self._box = ResourceBox()
        self._bridge: LoopThread | None = None
        self._bridge_lock = threading.Lock()  # two threads' first iterations make one bridge
        self._finalizer: weakref.finalize | None = None
        self._turn = OneEpochAtATime()  # the iteration rule (``_epoch_rule``)
        self._opened_in: int | None = None  # the pid that opened the resources (a forked child has no threads)

    def _memory_plan(self, cfg: LoaderConfig) -> MemoryPlan:
        # its host parts; rows on a GPU are device memory (``stats()["device"]["resident"]``)
        history = self._history.table.host_bytes(cfg.num_samplers) if self._history is not None else 0
        extra = {"history table": history} if history else {}
        if self._static is not None:
            extra["static feature cache"] = self._static.nbytes
        if self._applied is not None and self._applied.held_bytes:  # the profile's node lists it keeps
            extra["profile arrays"] = self._applied.held_bytes
        if self._gpu is not None:  # its rows are device memory (not here); its node -> slot table is the host's
            extra["gpu tier index"] = self._gpu.index_bytes
        self.auto_budget: AutoBudget | None = None  # memory_budget=None: the default budget (``_auto_budget``)
        if self._setup.budget is None:
            self._setup, self.auto_budget = with_default_budget(self._setup, cfg, extra, available_memory())
        return self._setup.memory_plan(cfg, extra)

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
        self._check_process()
        if self._res is not None:
            if self._res.loop is not loop:
                raise ConfigError("this loader is open on another event loop; use one loader per loop")
            return
        try:
            res = await Resources.create(loop, self.config, self.dataset, plan=self.memory, budget=self._setup.budget,
                                         device=self._setup.device,
                                         partitioned=self._setup.partitioned, source=self._setup.source,
                                         static=self._static, gpu=self._gpu)
        except OSError as exc:  # EMFILE/ENFILE: the I/O ring, files, eventfds of one more loader
            named = fd_exhausted(exc, f"opening a loader of {self.dataset.path}")
            if named is None:
                raise
            raise named from exc
        self._box.res = res
        self._opened_in = os.getpid()
        for cache in (self._static, self._gpu):  # hot rows, read once through the loader's source
            if cache is not None:
                await cache.load(res.source)

    async def aclose(self) -> None:
        """Close any epoch still running, then release every resource (ring, files, threads).

        An ``async for`` left by an exception or cancellation in its body leaves its epoch open until
        the generator is collected; closing the loader closes it deterministically.  The loader can be
        opened again later.
        """
        if self._inherited():
            return  # a forked child: the threads and the ring are the parent's to close
        await self._box.close()

    def _inherited(self) -> bool:
        """Whether the open resources were opened by another process (this one is a forked child)."""
        return self._res is not None and self._opened_in != os.getpid()

    def _check_process(self) -> None:
        if self._inherited():
            raise LoaderForkedError(forked_message(self._opened_in or 0))

    def __aiter__(self) -> AsyncIterator[OutreBatch]:
        token = EpochToken()
        epoch = AsyncEpoch(self._one_epoch(token))
        weakref.finalize(epoch, token.abandon)  # the user let go of it: it delivers nothing more
        return epoch

    async def _one_epoch(self, token: EpochToken) -> AsyncGenerator[OutreBatch, None]:
        await self.open()
        res = self._res
        if res is None:
            raise PipelineClosed("the loader was closed")
        watch = res.watch
        if watch is not None:  # a file read during epochs changed since the dataset was opened: no epoch
            watch.check()
        await self._turn.begin(self._epoch, token)  # or ConcurrentEpochError
        try:
            async with aclosing(self._epoch_batches(res, token)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            self._turn.end(token)

    async def _epoch_batches(self, res: Resources, token: EpochToken) -> AsyncGenerator[OutreBatch, None]:
        watch = res.watch
        ordered = self.config.ordered
        history = await self._history.epoch(ordered=ordered, token=token) if self._history is not None else None
        epoch = self._epoch
        self._epoch += 1
        resume, self._resume = self._resume, None
        io_start = IOMark(t=time.perf_counter(), io=res.source.stats())
        self._io_marks = (io_start, None)
        parts = self._epoch_parts(res, epoch, history, resume)
        plan, seqs = parts.plan, parts.seqs
        self._progress = progress = Progress(epoch=epoch, num_batches=len(plan) + (len(resume.delivered) if resume else 0),
                                             delivered=set(resume.delivered) if resume else set())
        device = self._setup.device
        labels = self.dataset.labels
        to_original = self._layout.to_original if self._layout.ordered else None
        edges_to_original = self._layout.edges_to_original if self._layout.ordered else None

        def build(eb: ExtractedBatch) -> OutreBatch:
            targets = plan[eb.seq].targets
            batch = to_batch(eb, labels, epoch, targets.input_id, to_original, edges_to_original,
                             fields=targets.batch_fields())
            if seqs is not None:  # a resumed epoch: its seq in the full plan, not its position in the rest
                batch.seq = seqs[eb.seq]
            return batch

        def handed(eb: ExtractedBatch, batch: OutreBatch, *, lease: MatrixLease | None = None,
                   transfer: Transfer | None = None) -> OutreBatch:
            """At hand-over, in step order: the GPU tier's rows join the misses (on the batch's device, after
            its copy), the history's clock ticks and its rows are pulled now; the batch gets its handles."""
            if transfer is None:  # a batch that stayed on the host is decoded in its own matrix's map
                batch.x = assemble_x(batch.x, eb.device_rows, self._decoder, held=eb.x)
            else:  # decoded by the copy engine after its copy, unless GPU-tier rows join it first
                batch.x = assemble_x(batch.x, eb.device_rows, self._decoder if eb.device_rows is not None else None)
            record = history.record(eb.history, device, eb.seq) if history is not None and eb.history is not None else None
            attach_handles(batch, BatchHandles(lease=lease, history=record, transfer=transfer))
            return batch

        def wrap(eb: ExtractedBatch) -> OutreBatch:
            return handed(eb, build(eb), lease=eb.lease)  # a host batch's lease ends at ``release``

        window = history.window if history is not None and not ordered else None
        batches: EpochStream[OutreBatch]
        if res.engine is None:
            batches = self._delivery.deliver(parts, ordered=ordered, wrap=wrap, window=window)
        else:
            engine: CopyEngine = res.engine

            def wrap_copied(eb: ExtractedBatch, batch: OutreBatch, transfer: Transfer) -> OutreBatch:
                engine.wait(transfer)  # the loop thread's stream: the device's default stream, the trainer's too
                return handed(eb, batch, transfer=transfer)  # a trainer on a stream of its own waits again

            to = ToDevice(engine=engine, depth=self.config.device_depth, build=build,
                          decode=None if self._decoder.identity else self._decoder.decode)
            batches = self._delivery.deliver_to_device(parts, ordered=ordered, to=to, wrap=wrap_copied, window=window)
        res.epochs.add(batches)
        transform = self.transform
        try:
            async for batch in batches:
                if watch is not None:  # before a batch whose rows a rewrite may have mixed is handed over
                    watch.check_due()
                progress.delivered.add(batch.seq)  # handed to the caller now (what ``state_dict`` records)
                yield batch if transform is None else transform(batch)
            if self._res is not res:  # aclose() ended this epoch's delivery: not an epoch's end
                raise PipelineClosed("the loader was closed during this epoch: its iterator delivers no more "
                                     "batches; iterate the loader again (it reopens) or make a new one")
        finally:
            if self._io_marks is not None and self._io_marks[0] is io_start:  # not overtaken by a later epoch
                self._io_marks = (io_start, IOMark(t=time.perf_counter(), io=res.source.stats()))
            if history is not None:
                history.close()
            await batches.aclose()  # the loader's aclose may be closing it too: both wait for one shutdown
            res.epochs.discard(batches)

    def _epoch_parts(self, res: Resources, epoch: int, history: EpochHistory | None,
                     resume: Progress | None = None) -> EpochParts:
        cfg = self.config
        plan = self._setup.plan(epoch)
        # rank r's batch seq samples with stream (epoch * spacing + seq) * W + r: distinct over ranks and epochs
        world = self._setup.place.world_size
        if self._setup.partitioned is not None:
            stream_base = self._setup.partitioned.stream_base(epoch)
        else:
            stream_base = epoch * max(len(plan), 1) * world + self._setup.place.rank
        seqs = None
        if resume is not None:  # only the batches not yet delivered, each with its own seq's stream (``_resume``)
            seqs = resume.remaining()
            plan = [plan[s] for s in seqs]
        self._channels = extract, ready = self._new_channels()
        if cfg.holds_back:  # plan order, or history's overtaking window: held batches keep their leases
            self._gate = OutOfTurnMemory(self.memory.out_of_turn_bytes, batch_row_bytes(
                self._setup.sizes.format, on_host=decodes_on_host(cfg.device)))
        sight = None if not cfg.foresight or history is not None else EpochForesight(
            plan, cfg.foresight, res.buffer, res.tiers,
            stream_of=lambda pos: stream_base + (pos if seqs is None else seqs[pos]) * world,
            num_nodes=self.dataset.num_nodes, max_held_rows=foresight_rows(cfg.foresight, self._setup.sizes),
            totals=self._foresight_totals)
        return EpochParts(
            plan=plan, samplers=res.samplers, executor=res.executor, buffer=res.buffer, tiers=res.tiers,
            extract=extract, ready=ready, num_extractors=cfg.num_extractors, stream_base=stream_base,
            sample_stage=self._sample, extract_stage=self._extract, matrices=res.matrices, history=history,
            gate=self._gate if cfg.holds_back else None, stream_stride=world, foresight=sight, seqs=seqs,
        )

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
        self._progress = self._resume = None  # a loaded state's partial epoch too: the set epoch runs whole

    # -- introspection ---------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._resume is not None:  # a loaded state's epoch: the batches it has left
            return self._resume.num_batches - len(self._resume.delivered)
        return self._setup.items.num_batches(self._epoch)  # the next epoch's (partition mode: they vary)
