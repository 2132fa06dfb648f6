"""The facts a loader resolves from its validated config before it allocates anything: one
:class:`LoaderSetup`, built by :func:`loader_setup`.

``OutreLoader`` builds it first, and ``oa.profile`` builds the very same one (no loader, no private
members read), so the seeds, the rank's place, the (partition) plan, the probed rows per batch and
the byte sizes a profile is measured on are exactly those the loader later runs with.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import ConfigError
from ..features import FeatureSource, detect_io_uring
from ..features._disk_source import IOConfig, open_direct
from ..features._staging import SECTOR
from ..sampling._edge_items import EdgeItems, Graph
from ..sampling._items import BatchItem, Items, SeedItems
from ..sampling._plan import max_edges_per_batch, max_rows_per_batch, seed_ids
from ..store._dataset import Dataset
from ._batch_rows import expected_batch_rows
from ._budget import MemoryPlan, Sizes, plan_memory
from ._config import LoaderConfig
from ._options import changed_knobs, partition_knobs
from ._pyg_names import LOADER_KEYWORDS, given_options, resolve_aliases, resolve_pyg_options
from ._ranks import RankPlace, resolve_place

if TYPE_CHECKING:
    from ._link_input import LinkInput
    from ._partition_mode import PartitionBatching

_SOURCE_KNOBS = ("backend", "max_in_flight", "source_options")


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderSetup:
    """What a validated config resolves to on one dataset (nothing opened, nothing allocated)."""

    dataset: Dataset
    config: LoaderConfig                  # as validated (before a profile's plan is applied)
    split: Any                            # as given: a split name, node ids or a mask
    seeds: np.ndarray                     # the split's node ids (``seed_ids``)
    place: RankPlace                      # rank, world size, ranks on this host
    budget: int | None                    # this rank's bytes of memory_budget (the host's split, _ranks)
    device: torch.device                  # the config's device (validated there), as the one torch.device passed on
    partitioned: PartitionBatching | None  # partition mode's batching (None: plain seeds)
    items: Items                          # plans each epoch's batch items for this rank (``partitioned`` or plain)
    first_plan: Sequence[BatchItem]       # epoch 0's plan for this rank
    sizes: Sizes                          # what the memory plan needs: rows, bytes, probed rows per batch
    source: FeatureSource | None          # a source the caller opened (the loader never closes it)
    source_kind: str                      # "injected", "memory" or "disk"

    def plan(self, epoch: int) -> Sequence[BatchItem]:
        """The batches of ``epoch`` for this rank: micro-batches of macro batches in partition mode
        (OUTRE §4.2), else the seeds shuffled by ``seed`` and the epoch (made afresh each call)."""
        return self.items.plan(epoch)

    def memory_plan(self, cfg: LoaderConfig, extra: dict[str, int] | None = None) -> MemoryPlan:
        """The memory plan of ``cfg`` (this setup's config, or it with a profile's plan applied) on
        these sizes, within this rank's :attr:`budget` (``cfg.memory_budget`` is the host's when
        ``local_world_size`` is given)."""
        if cfg.budget_bytes != self.budget:
            cfg = replace(cfg, memory_budget=self.budget)
        return plan_memory(cfg, self.sizes, source=self.source_kind, extra=extra or None)


def loader_config(*, split: Any, input_nodes: Any, fanouts: Any, num_neighbors: Any, batch_size: Any, shuffle: Any,
                  seed: Any, drop_last: Any, ordered: Any, memory_budget: Any, device: Any, x_dtype: Any, partitions: Any,
                  history: Any, edge_label_index: Any, io: Any, cache: Any, pipeline: Any, ranks: Any,
                  num_workers: Any, pin_memory: Any, pyg_options: dict[str, Any]) -> tuple[Any, LoaderConfig]:
    """``(split, config)`` from the loader's keywords, each passed by name: the first row as given, the
    options objects' fields that differ from their defaults (``_options``), PyG's names folded in."""
    if edge_label_index is not None and (split is not None or input_nodes is not None):
        raise ConfigError("pass input_nodes= (seed nodes) or edge_label_index= (supervision pairs), not both")
    first = {"fanouts": fanouts, "batch_size": batch_size, "shuffle": shuffle, "seed": seed, "drop_last": drop_last,
             "ordered": ordered, "memory_budget": memory_budget, "device": device, "x_dtype": x_dtype, "history": history}
    given = given_options(first)
    for group, options in (("io", io), ("cache", cache), ("pipeline", pipeline), ("ranks", ranks)):
        given.update(changed_knobs(options, group))
    given.update(partition_knobs(partitions))
    split, given = resolve_aliases(given, split=split, input_nodes=input_nodes, num_neighbors=num_neighbors,
                                   num_workers=num_workers, pin_memory=pin_memory)
    # NeighborLoader's other names (``**pyg_options``): a knob of an options object names its new home,
    # a misspelt loader keyword is suggested from the rest
    given = resolve_pyg_options(given, pyg_options, LOADER_KEYWORDS)
    missing = [k for k in ("fanouts", "batch_size") if k not in given]
    if missing:
        raise ConfigError(f"OutreLoader needs {' and '.join(missing)} (num_neighbors= and batch_size=, as PyG's "
                          "NeighborLoader)")
    return split, LoaderConfig(**given)


def loader_setup(dataset: Dataset, config: LoaderConfig, split: Any, source: FeatureSource | None,
                 links: LinkInput | None = None) -> LoaderSetup:
    """Resolve ``config`` on ``dataset``: check the source and the seeds against the ranks, build
    the partition batching and the first plan, probe the rows a batch needs.  ``links``: edge
    batches of these supervision pairs instead (plain mode; ``seeds`` are then their endpoints)."""
    dataset.require_homogeneous("[N, D] feature matrix for the loader")
    if dataset.feature_dim == 0:
        raise ConfigError(f"dataset {dataset.path} has no features; the loader needs them")
    source = _check_source(source, config, dataset)
    seeds = seed_ids(dataset, split) if links is None else np.unique(links.pairs)
    place = resolve_place(config)
    count, what = (len(seeds), "seeds") if links is None else (links.pairs.shape[1], "pairs")
    if 0 < count < place.world_size:
        raise ConfigError(f"split has {count} {what} for {place.world_size} ranks; every rank "
                          "needs at least one: use fewer ranks or a larger split")
    partitioned = _partition_batching(dataset, config, seeds, place)
    items: Items
    if links is not None:
        items = EdgeItems(pairs=links.pairs, labels=links.labels, negatives=links.negatives,
                          num_nodes=dataset.num_nodes, batch_size=config.batch_size, shuffle=config.shuffle,
                          seed=config.seed, drop_last=config.drop_last, rank=place.rank, world_size=place.world_size,
                          graph=Graph(dataset.indptr, dataset.indices))
    else:
        items = partitioned if partitioned is not None else SeedItems(
            seeds=seeds, batch_size=config.batch_size, shuffle=config.shuffle, seed=config.seed,
            drop_last=config.drop_last, rank=place.rank, world_size=place.world_size)
    max_rows = max_rows_per_batch(items.max_seeds, config.fanouts, dataset.num_nodes)
    first_plan = items.plan(0)
    batch_rows = expected_batch_rows(dataset, config.fanouts, first_plan, seed=config.seed, max_rows=max_rows)
    sizes = Sizes(num_nodes=dataset.num_nodes, format=dataset.row_format.delivering(config.x_dtype), stride=dataset.row_layout.stride,
                  max_rows=max_rows, max_edges=max_edges_per_batch(items.max_seeds, config.fanouts, dataset.num_edges),
                  batch_rows=batch_rows)
    sizes = _partition_sizes(sizes, partitioned)
    kind = "injected" if source is not None else "memory" if config.backend == "memory" else "disk"
    if kind == "disk":  # what a budget's staging rule needs (a given budget, or the default: ``_auto_budget``)
        sizes = replace(sizes, rows_into_slots=_rows_into_slots(dataset, config))
    return LoaderSetup(dataset=dataset, config=config, split=split, seeds=seeds, place=place,
                       budget=place.budget_share(config.budget_bytes), device=torch.device(config.device),
                       partitioned=partitioned, items=items, first_plan=first_plan, sizes=sizes, source=source,
                       source_kind=kind)


def _rows_into_slots(ds: Dataset, cfg: LoaderConfig) -> bool:
    """Whether the disk source will read the buffer's rows straight into its slots
    (``UringSource._slot_reads``): io_uring, rows stored as they are held (every dtype: ``RowFormat``), unpadded
    (a slot is one row's held bytes, so a padded stride cannot land in it), their stride a multiple of
    the file's O_DIRECT alignment (found with the source's own aligned probe read where the stride
    is not a multiple of 4 KiB).  Staging then serves only other reads (``_budget.chunk_stage_bytes``)."""
    backend = cfg.backend if cfg.backend != "auto" else "io_uring" if detect_io_uring() else "pread"
    stride, row = ds.row_layout.stride, ds.row_format
    if backend != "io_uring" or row.stored != row.held or stride != row.held_row_bytes:
        return False
    if stride % SECTOR == 0:
        return True
    fd, _, align = open_direct(ds.features_path, IOConfig(**cfg.source_options).direct)
    os.close(fd)
    return stride % align == 0


def _partition_sizes(sizes: Sizes, partitioned: PartitionBatching | None) -> Sizes:
    """``sizes`` with what partition mode holds in RAM, for the memory plan (``_budget``: partition
    arrays, macro adjacency)."""
    if partitioned is None:
        return sizes
    top = partitioned.macro_top_bytes()
    return replace(sizes, partition_bytes=partitioned.held_bytes(), macro_block_bytes=top[1], macro_top_bytes=top,
                   interleave=partitioned.interleave)


def _partition_batching(ds: Dataset, cfg: LoaderConfig, seeds: np.ndarray, place: RankPlace) -> PartitionBatching | None:
    if cfg.partitions is None:
        return None
    from ._partition_mode import PartitionBatching

    return PartitionBatching.of_config(ds, cfg, seeds, rank=place.rank, world_size=place.world_size)


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
        raise ConfigError(f"{clash} configure the source the loader opens; with io=IOOptions(source=...) they do "
                          "not apply")
    return source
