"""The loader's knobs past its first row, in four small objects: ``io=``, ``cache=``, ``pipeline=``, ``ranks=``.

``OutreLoader``'s own keywords are the ones a PyG user meets in ``NeighborLoader`` (what to iterate, the
fanouts, the batch size, order, the memory budget, the device, partitions, history); everything that
tunes *how* the loader reads, caches, runs or shares an epoch is a field of one of these objects, with
its default written here and nowhere else (:class:`~outre_async.loader.LoaderConfig` takes its defaults
from them; ``tests/loader/test_signature.py`` checks that nothing repeats one).  ``partitions=`` takes a
name or a :class:`PartitionOptions` for the counts, as ``history=`` takes a ``HistoryConfig``.

Each object only holds values: every rule is checked once, where the loader's config is built
(``_config.LoaderConfig``), so a bad value names its knob whichever way it came in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..features import FeatureSource
    from ..features._disk_probe import DiskProbe


@dataclass(frozen=True, kw_only=True, slots=True)
class IOOptions:
    """How feature rows are read: ``OutreLoader(ds, ..., io=IOOptions(backend="pread"))``."""

    backend: str = "auto"  # "auto" (io_uring where it works, else pread), "io_uring", "pread", "memory"
    max_in_flight: int | None = None  # reads in flight; None: from disk_probe (io_uring), else the backend's default
    disk_probe: DiskProbe | None = None  # the features' device (`outre probe`); never measured by the loader
    source_options: dict[str, Any] = field(default_factory=dict)  # the disk source's (``features.IOConfig``)
    layout: str = "auto"  # which copy is read: "auto" (the partition-ordered one when there), "original", "ordered", a path
    source: FeatureSource | None = None  # a source the caller opened and keeps (the loader never closes it)


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheOptions:
    """The feature buffer and the caches beside it: ``cache=CacheOptions(profile="auto")``."""

    buffer_rows: int | None = None  # None: sized from memory_budget (given, or the default budget)
    buffer_policy: str = "lru-lookahead"  # the feature buffer's eviction policy (features.EVICTION_POLICIES)
    foresight: int | None = None  # batches past the extract queue the buffer foresees; None: planned, 0: off
    neighbor_cache: int | str = 0  # bytes of the global neighbour cache (partition mode); 0: no cache
    gpu_cache_budget: int | str | None = None  # device bytes of the GPU feature tier; 0/None: off
    profile: str | None = None  # profile/<name>/ whose plan splits memory_budget; "auto": profile now
    cache_split: str | float = "auto"  # with profile="auto": "auto" (knapsack), "outre" (alpha grid) or an alpha


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineOptions:
    """The stages' threads and queues: ``pipeline=PipelineOptions(num_samplers=4)``."""

    num_samplers: int | None = None  # sampler threads; None: sized from the cores (``machine._cores``)
    num_extractors: int | None = None  # extractor coroutines; None: sized from the cores
    extract_queue: int | None = None  # sampled batches waiting for features; None: num_samplers + 2, deepened by the plan
    ready_queue: int | None = None  # batches ready for the training loop; None: num_extractors
    device_depth: int = 2  # batches copied to a GPU device ahead of the training loop


@dataclass(frozen=True, kw_only=True, slots=True)
class RankOptions:
    """This process's share of a data-parallel run: ``ranks=RankOptions(rank=0, world_size=4)``
    (``outre_async.distributed`` makes it from the process group)."""

    rank: int | None = None  # this rank's share of each epoch; None: the process group's
    world_size: int | None = None  # (both or neither; None and no process group: one process)
    local_world_size: int | None = None  # ranks on this host: memory_budget is then the host's, split evenly


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionOptions:
    """Partition batches with their counts: ``partitions=PartitionOptions(name="fennel", parts_per_batch=8)``
    (``partitions="fennel"`` takes the default counts)."""

    name: str  # partitions/<name>/ of the dataset (`outre partition`)
    parts_per_batch: int | None = None  # partitions per macro batch; None: partition._batches.default_parts_per_batch
    interleave: int | None = None  # macro batches whose micro-batches are shuffled together; None: default_interleave


GROUPS: dict[str, type] = {"io": IOOptions, "cache": CacheOptions, "pipeline": PipelineOptions,
                           "ranks": RankOptions}
_NOT_KNOBS = {"source"}  # IOOptions.source is an object the loader reads through, not a config knob
KNOB_GROUP: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}
KNOB_GROUP.update({"parts_per_batch": "partitions", "interleave": "partitions"})
_CLASS_NAME = {**{group: cls.__name__ for group, cls in GROUPS.items()}, "partitions": "PartitionOptions"}


def default_of(cls: type, name: str) -> Any:
    """The default of field ``name`` of options class ``cls``: where :class:`LoaderConfig` takes it from."""
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
            raise TypeError(f"{cls.__name__}.{name} has no default")
    raise TypeError(f"{cls.__name__} has no field {name!r}")


def factory_of(cls: type, name: str) -> Any:
    """The default factory of field ``name`` of ``cls`` (a mutable default: one fresh value per config)."""
    for f in fields(cls):
        if f.name == name and f.default_factory is not MISSING:
            return f.default_factory
    raise TypeError(f"{cls.__name__}.{name} has no default factory")


def changed_knobs(options: object, group: str) -> dict[str, Any]:
    """The fields of ``options`` (an instance of ``GROUPS[group]``, or None) that differ from their
    defaults, as flat knob names; anything else passed as ``group=`` is a :class:`ConfigError`."""
    cls = GROUPS[group]
    if options is None:
        return {}
    if not isinstance(options, cls):
        raise ConfigError(f"{group}= takes an oa.{cls.__name__}(...), got {type(options).__name__}")
    out = {}
    for f in fields(cls):
        if f.name in _NOT_KNOBS:
            continue
        value, default = getattr(options, f.name), default_of(cls, f.name)
        if value is default or (type(value) is type(default) and value == default):
            continue
        out[f.name] = value
    return out


def partition_knobs(partitions: object) -> dict[str, Any]:
    """``partitions=`` (a name, a :class:`PartitionOptions` or None) as flat knobs."""
    if partitions is None or isinstance(partitions, str):
        return {} if partitions is None else {"partitions": partitions}
    if not isinstance(partitions, PartitionOptions):
        raise ConfigError(f"partitions= takes the name of a partition folder or an oa.PartitionOptions(name=...), "
                          f"got {type(partitions).__name__}; `outre info DATASET` lists the names")
    out: dict[str, Any] = {"partitions": partitions.name}
    for name in ("parts_per_batch", "interleave"):
        if getattr(partitions, name) is not None:
            out[name] = getattr(partitions, name)
    return out


def moved_message(name: str, value: object) -> str | None:
    """The one-line error for a knob passed where it no longer lives (``OutreLoader(num_samplers=2)``),
    naming its new home; None for a name that is no knob."""
    group = KNOB_GROUP.get(name)
    if group is None:
        return None
    shown = f"<{type(value).__name__}>" if hasattr(value, "shape") else repr(value)
    if group == "partitions":
        return (f"{name}= is an option of partitions=: pass partitions=oa.PartitionOptions(name=..., "
                f"{name}={shown})")
    return f"{name}= is an option of {group}=: pass {group}=oa.{_CLASS_NAME[group]}({name}={shown})"


def group_knobs(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``OutreLoader`` keywords from a flat dict of knobs (a bench spec, a script's ``**options``): the
    grouped ones gathered into their options objects, the first row's passed as they are."""
    out: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        group = KNOB_GROUP.get(name)
        if group is None:
            out[name] = value
        else:
            grouped.setdefault(group, {})[name] = value
    for group, values in grouped.items():
        if group == "partitions":
            values = {k: v for k, v in values.items() if v is not None}  # None: the default count
            if not values:
                continue
            name = out.pop("partitions", None)
            if name is None:
                raise ConfigError(f"{sorted(values)} need partitions=: pass the partition folder's name too")
            out["partitions"] = name if isinstance(name, PartitionOptions) else PartitionOptions(name=name, **values)
        else:
            out[group] = GROUPS[group](**values)
    return out
