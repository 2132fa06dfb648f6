"""What an :class:`~outre_async.OutreLoader` says about itself: ``repr(loader)`` and ``loader.stats()``.

A mixin (like ``SyncIteration`` and ``StatefulEpochs``): the loader sets the fields below, and this
only reads them, so the loader's module stays about building and running epochs.  The dict's pieces
come from their owners' frozen snapshots (``_stats`` says what each key holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._units import format_bytes
from ..aio._channel import Channel
from ..features._gpu_tier import DeviceFeatureCache
from ..features._static_cache import StaticFeatureCache
from ..machine._cores import sized_from_cores
from ..store._dataset import Dataset
from ._auto_budget import AutoBudget
from ._batch import ExtractedBatch, SampledBatch
from ._budget import MemoryPlan
from ._config import LoaderConfig
from ._delivery import Delivery
from ._epoch_io import IOMark, latest_epoch_io
from ._extract_stage import ExtractStage
from ._foresight import ForesightTotals
from ._history import HistoryOwner
from ._layout import Layout
from ._link_input import LinkInput
from ._out_of_turn import OutOfTurnMemory
from ._profiling import AppliedPlan, profile_stats
from ._resources import ResourceBox, Resources
from ._sample_stage import SampleStage
from ._setup import LoaderSetup
from ._stats import device_resident, queue_stats, resource_stats, row_stats, stage_stats


class LoaderReport:
    """``__repr__`` and ``stats()`` of :class:`~outre_async.OutreLoader` (a mixin: the loader sets the fields below)."""

    config: LoaderConfig
    dataset: Dataset
    memory: MemoryPlan
    auto_budget: AutoBudget | None
    buffer_rows: int
    _setup: LoaderSetup
    _links: LinkInput | None
    _box: ResourceBox
    _epoch: int
    _sample: SampleStage
    _extract: ExtractStage
    _delivery: Delivery
    _channels: tuple[Channel[SampledBatch], Channel[ExtractedBatch]]
    _gate: OutOfTurnMemory | None
    _gpu: DeviceFeatureCache | None
    _static: StaticFeatureCache | None
    _history: HistoryOwner | None
    _applied: AppliedPlan | None
    _io_marks: tuple[IOMark, IOMark | None] | None
    _layout: Layout
    _foresight_totals: ForesightTotals

    if TYPE_CHECKING:  # the loader's: ``SyncIteration._res`` and ``OutreLoader.__len__``
        @property
        def _res(self) -> Resources | None: ...

        def __len__(self) -> int: ...

    def __repr__(self) -> str:
        cfg, res = self.config, self._res
        split = self._setup.split if isinstance(self._setup.split, str) else "<ids>"
        what = f"input_nodes={split!r} ({len(self._setup.seeds)} seeds)"
        if self._links is not None:
            what = (f"edge_label_index={self._links.name or '<pairs>'!r} ({self._links.pairs.shape[1]} pairs, "
                    f"neg_sampling={None if self._links.negatives is None else self._links.negatives.mode!r})")
        backend = res.source.backend if res is not None else cfg.backend
        budget = self.auto_budget.describe() if self.auto_budget is not None else format_bytes(cfg.budget_bytes or 0)
        return (f"OutreLoader(dataset={str(self.dataset.path)!r}, {what}, "
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
        out = stage_stats(self._sample.counters, self._extract.counters, self._delivery.counters, self._links)
        out["epochs_started"] = self._epoch
        out["buffer_rows"] = self.buffer_rows
        out["max_rows_per_batch"] = self._setup.sizes.max_rows
        place = self._setup.place
        out["expected_rows_per_batch"] = self._setup.sizes.batch_rows
        out["memory"] = {"budget": self._setup.budget, "planned": self.memory.total,
                         "budget_auto": self.auto_budget.describe() if self.auto_budget is not None else None,
                         **self.memory.parts, "per_node": dict(self.memory.per_node)}
        out["ranks"] = {"rank": place.rank, "world_size": place.world_size, "local_world_size": place.local_world_size}
        extract, ready = self._channels
        out["queues"] = queue_stats({"extract": extract.statistics(), "ready": ready.statistics()})
        out["device"] = {"device": self.config.device, "depth": self.config.device_depth,
                         **self._delivery.device_counters, "resident": device_resident(self._gpu, self._history)}
        res = self._res
        out.update(resource_stats(res.snapshot() if res is not None else self._box.closed))
        # what the loader chose for this machine (``_cores``: the defaults sized from the usable cores)
        out["workers"] = {**sized_from_cores(), "num_samplers": self.config.num_samplers,
                          "num_extractors": self.config.num_extractors,
                          "io_depth": out.get("io", {}).get("max_in_flight")}
        if self._gate is not None:
            out["out_of_turn"] = self._gate.stats()
        if self._setup.partitioned is not None:
            out["neighbor_lists"] = self._setup.partitioned.stats()
        if self._history is not None:
            out["history"] = self._history.stats()
        if self._applied is not None:
            out["profile"] = profile_stats(self._applied.info, out, self._static)
        out["epoch_io"] = latest_epoch_io(self._io_marks, res.source.stats() if res is not None else None,
                                          self.config.disk_probe, self._applied.info if self._applied else None,
                                          self.dataset.row_layout.stride)  # the latest epoch's reads
        out["layout"] = self._layout.stats()
        out["buffer_policy"] = self.config.buffer_policy
        out["foresight"] = {"depth": self.config.foresight, **self._foresight_totals.stats()}
        out["feature_rows"] = row_stats(self._setup.sizes.format, self.config.device)
        return out
