"""``LoaderConfig``: every knob of :class:`~outre_async.OutreLoader`, validated once.

One rule per knob, written here only: ``None`` means "the default" (which may depend on other knobs,
see the properties), never 0; a 0 where 0 has no meaning (a queue of depth 0, a buffer of 0 rows) is
a :class:`ConfigError` showing the value.  Fanouts go through the sampler's :func:`check_fanouts`,
the one fanout rule of the package.  Byte sizes accept ``"2GiB"``-style strings, as the CLI does.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .._rng import check_seed
from .._units import parse_bytes
from ..cache._history_config import HistoryConfig
from ..features import BACKENDS
from ..features._disk_probe import DiskProbe
from ..features._policies import check_policy
from ..machine._cores import sized_from_cores
from ..machine._device import resolve_device
from ..sampling._plan import check_rank
from ..sampling._sampler import check_fanouts
from ._layout import check_layout
from ._options import CacheOptions, IOOptions, PartitionOptions, PipelineOptions, RankOptions, default_of, factory_of

if TYPE_CHECKING:
    import torch

_AT_LEAST_ONE = ("batch_size", "num_samplers", "num_extractors", "device_depth")
EXTRACT_QUEUE = 64  # the extract queue's default depth (see LoaderConfig.extract_capacity)
# the most of each count a loader takes: each sampler is a thread with scratch, each extractor a coroutine
# with a batch in flight, each queue slot a batch held; io_uring's ring takes at most 32768 entries
AT_MOST = {"num_samplers": 1024, "num_extractors": 1024, "extract_queue": 65536, "ready_queue": 65536,
           "device_depth": 64, "max_in_flight": 32768}
_NONE_OR_AT_LEAST_ONE = ("extract_queue", "ready_queue", "buffer_rows", "memory_budget", "max_in_flight",
                         "parts_per_batch", "interleave")


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderConfig:
    """Every knob of :class:`OutreLoader`, validated and resolved, as one flat frozen object: what a
    loader runs with (``loader.config``), what the memory plan and a profile read.

    Built from the loader's first row of keywords and its options objects (``_options``; ``_setup.loader_config``),
    never passed in by a user.  The first row's defaults are written here, the options' in their classes.
    Each knob is listed on the docs' "Loader options" page (``docs/reference/options.md``); ``None`` means
    "the default", a 0 where 0 means nothing is a :class:`ConfigError`, byte sizes take ``"2GiB"``-style strings.
    """

    fanouts: tuple[int, ...]
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    drop_last: bool = False
    ordered: bool = False
    memory_budget: int | str | None = None  # bytes for the loader's parts; None: the default budget (_auto_budget)
    device: str = "cpu"  # "auto" (CUDA when present), "cpu", "cuda", "cuda:N"; held resolved ("cuda:0")
    partitions: str | None = None  # partitions/<name>/ of the dataset: partition-based batches (OUTRE §4.2)
    history: HistoryConfig | None = None  # historical embedding cache (OUTRE §4.3); None: off, held so (staleness 1 too)
    x_dtype: str | torch.dtype = "float32"  # what a batch's x is: "float32", "float16", "bfloat16" or that torch dtype; held as its name
    # the knobs of the options objects (``_options``): each default is taken from its class, the one
    # place it is written; see there what each does.  num_samplers and num_extractors: None sizes them
    # from the cores, then they are held resolved, so every reader sees an int (hence the annotation)
    num_samplers: int = default_of(PipelineOptions, "num_samplers")
    num_extractors: int = default_of(PipelineOptions, "num_extractors")
    extract_queue: int | None = default_of(PipelineOptions, "extract_queue")  # deepened by the plan (extract_capacity)
    ready_queue: int | None = default_of(PipelineOptions, "ready_queue")
    device_depth: int = default_of(PipelineOptions, "device_depth")
    buffer_rows: int | None = default_of(CacheOptions, "buffer_rows")  # None: from memory_budget (or the default
    # budget: _auto_budget); below one batch's expected rows a SmallBufferWarning (_budget.warn_small_buffer)
    buffer_policy: str = default_of(CacheOptions, "buffer_policy")
    foresight: int | None = default_of(CacheOptions, "foresight")
    neighbor_cache: int | str = default_of(CacheOptions, "neighbor_cache")
    gpu_cache_budget: int | str | None = default_of(CacheOptions, "gpu_cache_budget")
    profile: str | None = default_of(CacheOptions, "profile")
    cache_split: str | float = default_of(CacheOptions, "cache_split")
    backend: str = default_of(IOOptions, "backend")
    max_in_flight: int | None = default_of(IOOptions, "max_in_flight")
    disk_probe: DiskProbe | None = default_of(IOOptions, "disk_probe")
    source_options: dict[str, Any] = field(default_factory=factory_of(IOOptions, "source_options"))
    layout: str = default_of(IOOptions, "layout")
    rank: int | None = default_of(RankOptions, "rank")
    world_size: int | None = default_of(RankOptions, "world_size")
    local_world_size: int | None = default_of(RankOptions, "local_world_size")
    parts_per_batch: int | None = default_of(PartitionOptions, "parts_per_batch")
    interleave: int | None = default_of(PartitionOptions, "interleave")

    def __post_init__(self) -> None:
        object.__setattr__(self, "fanouts", check_fanouts(self.fanouts))
        object.__setattr__(self, "seed", check_seed(self.seed))
        sized = sized_from_cores()
        for name in ("num_samplers", "num_extractors"):  # held resolved: the rest of the loader reads ints
            if getattr(self, name) is None:
                object.__setattr__(self, name, sized[name])
        for name in ("memory_budget", "neighbor_cache", "gpu_cache_budget"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, parse_bytes(getattr(self, name)))
        for name in _AT_LEAST_ONE:
            check_count(name, getattr(self, name))
        for name in _NONE_OR_AT_LEAST_ONE:
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name), " (or None for the default)")
        _check_at_most(self, sized)
        if not isinstance(self.neighbor_cache, int) or self.neighbor_cache < 0:
            raise ConfigError(f"neighbor_cache={self.neighbor_cache!r} must be a byte count >= 0 (0: no cache)")
        if self.gpu_cache_budget is not None and (isinstance(self.gpu_cache_budget, bool) or not isinstance(
                self.gpu_cache_budget, int) or self.gpu_cache_budget < 0):
            raise ConfigError(f"gpu_cache_budget={self.gpu_cache_budget!r} must be a byte count >= 0 (0 or None: "
                              "no GPU tier)")
        check_policy(self.buffer_policy)
        if self.history is not None and not _check_history(self.history, self.fanouts):
            object.__setattr__(self, "history", None)  # one way to say off: ``history is None`` is the test
        _check_ranks(self.rank, self.world_size, self.local_world_size)
        if self.profile is not None:
            _check_profile(self)
        if self.partitions is not None:
            _check_partitions(self.partitions)
        if self.disk_probe is not None and not isinstance(self.disk_probe, DiskProbe):
            raise ConfigError(f"disk_probe must be a DiskProbe (outre_async.features.cached_probe / probe_disk) "
                              f"or None, got {type(self.disk_probe).__name__}")
        # "auto", "cuda" -> "cuda:0": one spelling per device; a device not here is refused now
        object.__setattr__(self, "device", str(resolve_device(self.device)))
        check_layout(self.layout)
        _check_foresight(self)
        object.__setattr__(self, "x_dtype", check_x_dtype(self.x_dtype))
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend={self.backend!r} must be one of {BACKENDS}")
        if "max_in_flight" in self.source_options:  # one home: the memory plan sizes staging by the knob
            depth = self.source_options["max_in_flight"]
            raise ConfigError(f"source_options={{'max_in_flight': {depth!r}}} repeats a loader knob; pass "
                              f"max_in_flight={depth!r} instead (the memory plan sizes staging for it)")

    @property
    def extract_capacity(self) -> int:
        """Depth of the channel between samplers and extractors: ``extract_queue``, else its floor,
        ``num_samplers + 2``, which the memory plan deepens (``_budget.extract_depth``; the loader
        then holds the deeper value in its config).

        GNNDrive keeps "a bit more than the samplers" there, enough to keep the extractors fed.  Here
        the queue is also how far look-ahead pins see: rows of queued batches are evicted last, so a
        deeper queue re-reads fewer rows, down to near Belady's MIN at ``EXTRACT_QUEUE``
        (``benchmarks/bench_buffer_rereads.py`` counts an epoch's rows by depth).  Each slot costs one
        worst-case subgraph in the plan (``8 R + 24 E``, megabytes with large fanouts and batches),
        so the default deepens the queue to ``EXTRACT_QUEUE`` only within ``_budget.LOOKAHEAD_SHARE``
        of ``memory_budget`` and what the budget leaves above the loader's floor (a budget at the
        floor keeps ``num_samplers + 2``).  Why not deeper: past it the deeper queue's subgraphs took
        the buffer rows it saved (``benchmarks/simulate_cache_policies.py --extract-queue``).
        """
        return self.num_samplers + 2 if self.extract_queue is None else self.extract_queue

    @property
    def foresight_allowed(self) -> bool:
        """Whether the loader may foresee batches (``_foresight``): not with the history cache, whose
        state decides what a batch samples, nor with next-use eviction."""
        return self.buffer_policy == "lru-lookahead" and self.history is None

    @property
    def holds_back(self) -> bool:
        """Whether delivery may hold a batch that arrives before an earlier one: plan order
        (``ordered``), or completion order with the history cache, whose overtaking window hands a
        batch out only after the batches more than ``window`` places before it (``_delivery._Windowed``).
        Such batches keep their matrices (leases), and the samplers' gate keeps them inside the plan:
        the pool's, or the ``reorder buffer`` part's in ordered mode (``_out_of_turn``, ``_budget``)."""
        return self.ordered or self.history is not None

    @property
    def ready_capacity(self) -> int:
        return self.num_extractors if self.ready_queue is None else self.ready_queue

    @property
    def budget_bytes(self) -> int | None:
        """``memory_budget`` in bytes (a string was parsed at construction)."""
        return None if self.memory_budget is None else int(self.memory_budget)


FIRST_ROW = ("shuffle", "seed", "drop_last", "ordered", "memory_budget", "device", "x_dtype")


def first_row_defaults() -> dict[str, Any]:
    """The defaults of the loader's first-row knobs that have one, read from :class:`LoaderConfig`'s
    fields (``OutreLoader``'s signature shows them from here: one place each is written)."""
    return {f.name: f.default for f in fields(LoaderConfig) if f.name in FIRST_ROW}


def check_x_dtype(value: Any) -> str:
    """``x_dtype`` as its name (``float32``, ``float16``, ``bfloat16``), from the name or the torch dtype."""
    import torch

    names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
    name = names.get(value) if isinstance(value, torch.dtype) else value
    if name not in names.values():
        raise ConfigError(f"x_dtype={value!r} is not a dtype a batch delivers; pass 'float32' (the default), "
                          "'float16' or 'bfloat16' (or that torch dtype)")
    return name


def _check_foresight(cfg: LoaderConfig) -> None:
    from ..features._buffer_kernels import MAX_FORESIGHT

    sight = cfg.foresight
    if sight is None:
        return
    if isinstance(sight, bool) or not isinstance(sight, numbers.Integral) or not 0 <= sight <= MAX_FORESIGHT:
        raise ConfigError(f"foresight={sight!r} must be an int in [0, {MAX_FORESIGHT}] (batches; 0: off, None: "
                          "the memory plan's)")
    object.__setattr__(cfg, "foresight", int(sight))
    if sight and cfg.history is not None:
        raise ConfigError(f"foresight={sight} needs history off: what a batch samples depends on the history's "
                          "state when its turn comes; pass foresight=0 or None")
    if sight and cfg.buffer_policy != "lru-lookahead":
        raise ConfigError(f"foresight={sight} needs buffer_policy='lru-lookahead' (got {cfg.buffer_policy!r}); "
                          "pass foresight=0 or None")


def _check_history(history: object, fanouts: tuple[int, ...]) -> bool:
    """Whether ``history`` is on (staleness 1: every row recomputed, nothing cached, as None says)."""
    if not isinstance(history, HistoryConfig):
        raise ConfigError(f"history must be a HistoryConfig (or None), got {type(history).__name__}")
    if history.enabled and len(fanouts) < 2:
        raise ConfigError(f"history needs at least 2 layers (it caches h^(L-1)); got fanouts={list(fanouts)}")
    return history.enabled


def _check_ranks(rank: int | None, world_size: int | None, local_world_size: int | None) -> None:
    if (rank is None) != (world_size is None):
        raise ConfigError(f"pass rank and world_size together (got {rank=}, {world_size=}), or neither to take "
                          "them from the torch.distributed process group")
    if rank is not None and world_size is not None:
        check_rank(rank, world_size)
    if local_world_size is not None:
        check_count("local_world_size", local_world_size, " (or None: memory_budget is this process's)")
        if world_size is not None and local_world_size > world_size:
            raise ConfigError(f"{local_world_size=} exceeds {world_size=}; pass the number of ranks on this host")


def _check_partitions(name: object) -> None:
    """``partitions=`` names a folder under the dataset's ``partitions/`` (and the ordered copy
    ``<dataset>-ordered-<name>`` beside it): a plain name, as a profile's is, never a path."""
    from ..partition._format import check_name

    if not isinstance(name, str):
        raise ConfigError(f"partitions={name!r} must be the name of a partition folder (a str), "
                          f"got {type(name).__name__}; `outre info DATASET` lists them")
    check_name(name)


def _check_profile(cfg: LoaderConfig) -> None:
    from ..plan._budget_plan import check_split
    from ..plan._files import check_profile_name

    check_profile_name(cfg.profile)  # type: ignore[arg-type]
    object.__setattr__(cfg, "cache_split", check_split(cfg.cache_split))
    if cfg.memory_budget is None:
        raise ConfigError(f"profile={cfg.profile!r} splits memory_budget between the caches; pass memory_budget= too")
    if cfg.buffer_rows is not None:
        raise ConfigError("profile= sizes the feature buffer itself; drop buffer_rows= (or drop profile=)")


def _check_at_most(cfg: LoaderConfig, sized: dict[str, int]) -> None:
    """The upper bound of the count knobs (:data:`AT_MOST`): past it a loader plans memory it cannot
    have and threads that cannot run at once (``num_extractors=10**6`` was once accepted:
    ``tests/loader/test_machine_bounds.py``)."""
    for name, most in AT_MOST.items():
        value = getattr(cfg, name)
        if value is not None and value > most:
            default = f"; the default here is {sized[name]}" if name in sized else ""
            raise ConfigError(f"{name}={value} is more than {most}, the most a loader takes{default}; pass at most "
                              f"{most} (or leave it out for the default)")


def check_count(name: str, value: object, default_hint: str = "") -> int:
    """The rule of every count knob (batch size, workers, depths): an int >= 1; also the SyncLoader's."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an int >= 1{default_hint}")
    return int(value)
