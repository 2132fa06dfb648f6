"""The systems a suite compares, as plug-ins: one small class per loader.

A plug-in turns (dataset, :class:`RunSpec`) into an iterable of PyG mini-batches and reports its own
stage counters afterwards; the child process (``child.py``) does everything else the same way for
every system: the model, the timed training loop, I/O counters, evaluation.  Adding a system:

    @register_system
    class MySystem(System):
        name = "my-loader"
        summary = "what it is, in one line"

        def open(self, ds, spec):
            self.loader = MyLoader(ds, fanouts=spec.fanouts, batch_size=spec.batch_size, seed=spec.seed)
            return iter(self.loader)

A system outside this package is named ``"package.module:ClassName"`` on the command line.
``skip_reason`` runs in the harness process and must stay cheap; ``open`` runs in the child and may
raise :class:`SystemSkipped` too (e.g. an import that fails only there).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import mmap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError

# PyG publishes pyg-lib / torch-sparse wheels per torch release at https://data.pyg.org/whl/ and had none for
# torch 2.13 when this was written; PyPI has torch-sparse / torch-scatter as source only (README, "Comparing with PyG").
WHEELS_HINT = ("build torch-sparse from source: `pip install --no-build-isolation torch-scatter torch-sparse` "
               "(torch installed first, a C++ compiler; about 45 min on 2 cores), or use prebuilt wheels: "
               "`pip install torch-scatter torch-sparse -f https://data.pyg.org/whl/torch-${TORCH}+cpu.html` where PyG "
               "lists this torch, `pip install --no-deps ../shared/wheels/torch_scatter-*.whl ../shared/wheels/torch_sparse-*.whl "
               "scipy` in this project's workspace (docs/how-to/bench.md: Comparing with PyG)")


class SystemSkipped(Exception):
    """A system that cannot run here; the message says why and what to install."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    """What every system of a suite shares (sent to the child as JSON)."""

    dataset: str
    fanouts: tuple[int, ...]
    batch_size: int
    hidden: int
    lr: float
    seed: int
    max_batches: int = 0          # 0: full epoch
    val_nodes: int = 2048         # validation seeds evaluated after the epoch
    ram_budget: int = 2 << 30     # compute-only: feature bytes held in RAM at once
    step_ms: float = 0.0          # > 0: the training step is a fixed wait of this many ms (--step-ms)
    device: str = "cpu"           # the training device (--device, resolved by the harness: "cpu", "cuda:0")
    options: dict[str, Any] = field(default_factory=dict)  # this system's own options (from the preset)
    probe_cache_dir: str = ""     # --disk-grid: the outre systems' loaders get the device's cached probe grid


class System:
    """Base class of the plug-ins; subclasses set ``name`` and ``summary`` and implement ``open``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # trains FENNEL partition batches: the suite then also runs ``compute-only-part`` on those batches
    partitioned: ClassVar[bool] = False

    def skip_reason(self) -> str | None:
        """Why this system cannot run in this environment (None: it can)."""
        return None

    def prepare(self, dataset_dir: str, spec: RunSpec) -> dict[str, Any]:
        """Once per suite in the harness, before any run and untimed (e.g. build partitions)."""
        return {}

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """After the epoch: ``sample_seconds``, ``extract_seconds`` (busy time, summed over workers),
        ``rows_from_cache``, ``rows_from_disk`` (None where the system cannot tell) and ``extra``."""
        return {}

    def close(self) -> None:
        """Release what ``open`` acquired."""


SYSTEMS: dict[str, type[System]] = {}


def register_system(cls: type[System]) -> type[System]:
    if not cls.name:
        raise ConfigError(f"{cls.__name__} needs a non-empty `name` to be registered")
    SYSTEMS[cls.name] = cls
    return cls


def resolve_system(name: str) -> System:
    """A registered name, or ``"module:Class"`` of a :class:`System` subclass importable here."""
    if name in SYSTEMS:
        return SYSTEMS[name]()
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot import system {name!r}: {exc}") from exc
        if not (inspect.isclass(cls) and issubclass(cls, System)):
            raise ConfigError(f"{name!r} is not a subclass of outre_async.bench.System")
        return cls()
    raise ConfigError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)} or give module:Class")


def run_seeds(ds: Any, spec: RunSpec) -> tuple[Any, bool]:
    """The seed ids a run loads, and whether the loader shuffles them.

    A full epoch: the training split, shuffled by the loader.  ``max_batches = N``: the seeds of the
    first N batches of the epoch-0 plan, in plan order and unshuffled, so the loader's whole epoch is
    exactly those N batches (same seeds, same sampler streams ``0..N-1``) whatever order they complete
    in: every system, and ``compute-only``, trains on the same batches.  (Taking the first N batches
    to *complete* from a full epoch compared different batches under CPU load.)
    """
    from ..sampling._plan import plan_epoch

    train = ds.split("train")
    if not spec.max_batches:
        return train, True
    plan = plan_epoch(train, spec.batch_size, shuffle=True, seed=spec.seed, epoch=0)[: spec.max_batches]
    return (np.concatenate(plan) if plan else np.empty(0, np.int64)), False


# -- the built-in systems -------------------------------------------------------------------------


@register_system
class PygMmap(System):
    name = "pyg-mmap"
    summary = "PyG NeighborLoader (torch-sparse sampler) over memory-mapped features: the papers' PyG+"
    madvise: ClassVar[int | None] = None  # the kernel's default read-around (see read_ahead_kb in the machine facts)

    def skip_reason(self) -> str | None:
        if importlib.util.find_spec("torch_sparse") is None:
            return f"torch_sparse is not installed (PyG's NeighborLoader needs it here); {WHEELS_HINT}"
        return None

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        try:
            from torch_sparse import SparseTensor
        except ImportError as exc:
            raise SystemSkipped(f"torch_sparse does not import ({exc}); {WHEELS_HINT}") from exc
        n = ds.num_nodes
        with warnings.catch_warnings():  # the memmap is read-only; PyG only reads it
            warnings.simplefilter("ignore", UserWarning)
            x = torch.from_numpy(self._features(ds))
        # CSC as PyG's adj_t (row v = in-neighbours of v); PyG's sampler wants int64 column ids in RAM.
        adj_t = SparseTensor(rowptr=torch.from_numpy(ds.indptr), col=torch.from_numpy(ds.indices.astype(np.int64)),
                             sparse_sizes=(n, n), is_sorted=True, trust_data=True)
        data = Data(x=x, y=torch.from_numpy(ds.labels.astype(np.int64)), adj_t=adj_t, num_nodes=n)
        torch.manual_seed(spec.seed)
        seeds, shuffle = run_seeds(ds, spec)
        self.loader = NeighborLoader(data, num_neighbors=list(spec.fanouts), batch_size=spec.batch_size,
                                     input_nodes=torch.from_numpy(seeds), shuffle=shuffle,
                                     **self.loader_options(spec))
        self._times = {"sample": 0.0, "extract": 0.0}
        self.loader.node_sampler.sample_from_nodes = _timed(self.loader.node_sampler.sample_from_nodes,
                                                            self._times, "sample")
        self.loader.filter_fn = _timed(self.loader.filter_fn, self._times, "extract")
        return iter(self.loader)

    def loader_options(self, spec: RunSpec) -> dict[str, Any]:
        """Extra ``NeighborLoader`` keywords (``pyg-workers``: its worker processes)."""
        return {}

    def _features(self, ds: Any) -> Any:
        from ._epoch import random_access_features

        return ds.features if self.madvise is None else random_access_features(ds, self.madvise)

    def stats(self) -> dict[str, Any]:
        return {"sample_seconds": self._times["sample"], "extract_seconds": self._times["extract"],
                "rows_from_cache": None, "rows_from_disk": None,
                "extra": {"sampler": "torch_sparse.neighbor_sample", "features": "memmap (page cache)",
                          "madvise": self.madvise}}


@register_system
class PygMmapRandom(PygMmap):
    name = "pyg-mmap-random"
    summary = "pyg-mmap with madvise(MADV_RANDOM) on the feature map: no read-around on page faults"
    madvise = mmap.MADV_RANDOM


@register_system
class PygWorkers(PygMmapRandom):
    """What a PyG user runs on a GPU box: ``pyg-mmap-random``'s loader with ``num_workers`` worker
    processes (``workers`` option; default ``min(4, cores)``), ``persistent_workers=True``, and
    ``pin_memory`` when training on CUDA (the batches come pinned, the trainer's ``.to`` is then
    asynchronous).  The workers are forked with the memory map, so they read the same
    MADV_RANDOM pages (under the same cgroup cap: children are charged to it).  Sampling and
    gathering run in the workers, so this process cannot time them: ``sample_seconds`` and
    ``extract_seconds`` are reported as 0 (``extra`` says so)."""

    name = "pyg-workers"
    summary = "pyg-mmap-random with NeighborLoader worker processes (num_workers, persistent, pin_memory on CUDA)"

    def loader_options(self, spec: RunSpec) -> dict[str, Any]:
        workers = int(spec.options.get("workers", default_workers()))
        self.workers = workers
        return {"num_workers": workers, "persistent_workers": workers > 0,
                "pin_memory": spec.device.startswith("cuda")}

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["extra"].update(workers=self.workers, timed="in the workers: sample/extract seconds not measured here")
        return out

    def close(self) -> None:
        # persistent workers live as long as the loader's iterator: end them now, not at exit
        iterator = getattr(self.loader, "_iterator", None)
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


def default_workers() -> int:
    """``pyg-workers``' default: one worker process per core, at most 4 (PyG's examples use 4)."""
    import os

    return max(1, min(4, len(os.sched_getaffinity(0))))


def _timed(fn: Any, times: dict[str, float], key: str) -> Any:
    import time

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[key] += time.perf_counter() - start

    return wrapper


@register_system
class Sync(System):
    name = "sync"
    summary = "oa.SyncLoader: sample (numba) -> memmap gather -> train, one batch at a time"

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..loader import SyncLoader

        seeds, shuffle = run_seeds(ds, spec)
        self.loader = SyncLoader(ds, split=seeds, fanouts=spec.fanouts, batch_size=spec.batch_size, seed=spec.seed,
                                 shuffle=shuffle)
        return iter(self.loader)

    def stats(self) -> dict[str, Any]:
        s = self.loader.stats()
        return {"sample_seconds": s["sample_seconds"], "extract_seconds": s["gather_seconds"],
                "rows_from_cache": None, "rows_from_disk": None, "extra": {"features": "memmap (page cache)"}}


@register_system
class Outre(System):
    name = "outre"
    summary = "oa.OutreLoader: async samplers, io_uring extractors, feature buffer, random batches"
    loader_options: ClassVar[dict[str, Any]] = {"backend": "auto"}

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..loader import OutreLoader
        from ..loader._options import group_knobs

        seeds, shuffle = run_seeds(ds, spec)
        self.loader = OutreLoader(ds, **group_knobs(dict(
            split=seeds, fanouts=list(spec.fanouts), batch_size=spec.batch_size, seed=spec.seed, shuffle=shuffle,
            memory_budget=spec.options.get("memory_budget"), device=spec.device, **disk_grid(ds, spec),
            **self.loader_options)))
        return iter(self.loader)

    def stats(self) -> dict[str, Any]:
        s = self.loader.stats()
        buf, tiers = s.get("buffer", {}), s.get("tiers") or {}
        # every tier above the source served its hits from memory (GPU rows, static rows, buffer slots)
        cached = sum(int(t["hits"]) for t in tiers.values() if t["tier"] != "source")
        return {"sample_seconds": s.get("sample_seconds", 0.0), "extract_seconds": s.get("extract_seconds", 0.0),
                "rows_from_cache": cached if tiers else int(buf.get("hits", 0) + buf.get("waits", 0)),
                # rows the device served this epoch (read-ahead included: a row read along for the next
                # batch is a buffer hit there), not the buffer's own misses; before any epoch: the misses
                "rows_from_disk": int((s.get("epoch_io") or {}).get("rows_from_disk", buf.get("reads", 0))),
                "extra": {"backend": s.get("backend"), "buffer_rows": s.get("buffer_rows"),
                          "loader_stall_seconds": s.get("stall_seconds"), "io": s.get("io", {}),
                          "buffer": buf, "tiers": tiers, "epoch_io": s.get("epoch_io"),
                          "foresight": s.get("foresight"), "layout": s.get("layout"),
                          # thread CPU of each stage: what the loader takes from training
                          "cpu_seconds": {"sample": s.get("sample_cpu_seconds"),
                                          "extract": s.get("extract_cpu_seconds"),
                                          "io": s.get("io", {}).get("io_cpu_seconds")}}}

    def close(self) -> None:
        self.loader.close()


@register_system
class OutrePart(Outre):
    """FENNEL partition-based batches with the global neighbour cache (OUTRE §4.2).

    ``prepare`` (in the harness, once, untimed) partitions the dataset into ``spec.options["parts"]``
    FENNEL parts unless ``partitions/<name>/`` is already there; the child then loads with
    ``partitions=name, parts_per_batch, neighbor_cache``.
    """

    name = "outre-part"
    summary = "OutreLoader with FENNEL partition-based batches and the global neighbour cache"
    partitioned = True

    def prepare(self, dataset_dir: str, spec: RunSpec) -> dict[str, Any]:
        from ..partition import list_partitions, partition
        from ..store._dataset import open_dataset

        ds = open_dataset(dataset_dir)
        name = _partition_name(spec)
        if any(p["name"] == name and p.get("status") == "ok" for p in list_partitions(ds)):
            return {"partitions": name, "reused": True}
        import time

        start = time.perf_counter()
        parts = partition(ds, int(spec.options.get("parts", 256)), name=name, overwrite=True)
        return {"partitions": name, "reused": False, "seconds": time.perf_counter() - start,
                "num_parts": parts.num_parts}

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..loader import OutreLoader
        from ..loader._options import group_knobs

        self.loader = OutreLoader(ds, **group_knobs(dict(**self.loader_kwargs(spec), **disk_grid(ds, spec))))
        return iter(self.loader)

    def loader_kwargs(self, spec: RunSpec) -> dict[str, Any]:
        """The knobs of this system's loader, flat (``group_knobs`` makes its keywords); ``compute-only-part``
        plans and samples from them too."""
        return {"split": "train", "fanouts": list(spec.fanouts), "batch_size": spec.batch_size, "seed": spec.seed,
                "partitions": _partition_name(spec), "memory_budget": spec.options.get("memory_budget"),
                "parts_per_batch": int(spec.options.get("parts_per_batch", 4)),
                "neighbor_cache": int(spec.options.get("neighbor_cache", 64 << 20)),
                # --max-batches N: the plan's first N macro/micro batches, not the first
                # N to complete (the partition plan is built from the whole split)
                "ordered": spec.max_batches > 0, "device": spec.device,
                # the original's layout even where outre-part-ordered's copy sits beside it (the loader
                # would read it by default): the two systems compare the two layouts
                "layout": "original", **self.loader_options}

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["extra"]["neighbor_lists"] = self.loader.stats().get("neighbor_lists")
        return out


def disk_grid(ds: Any, spec: RunSpec) -> dict[str, Any]:
    """``{"disk_probe": grid}`` with ``--disk-grid`` (the harness cached the grid of the features' device),
    else nothing: the loader's defaults."""
    if not spec.probe_cache_dir:
        return {}
    from pathlib import Path

    from ..errors import ConfigError
    from ._disk_limit import cached_grid

    cache = Path(spec.probe_cache_dir)
    grid = cached_grid(ds.features_path, cache)
    if grid is None:
        raise ConfigError(f"--disk-grid: no probe of {ds.features_path}'s device in {cache}; run outre probe "
                          f"{ds.features_path} --cache-dir {cache}")
    return {"disk_probe": grid}


def _partition_name(spec: RunSpec) -> str:
    return f"bench-fennel-{int(spec.options.get('parts', 256))}"


@register_system
class OutrePartOrdered(OutrePart):
    """``outre-part`` on the partition-ordered copy of the dataset (``outre reorder``):
    the same partitions, each a contiguous id range, so a macro batch's rows coalesce into long reads.

    ``prepare`` (untimed) partitions like ``outre-part`` and writes the copy beside the dataset
    (``<dataset>-ordered-<partitions>``) unless a copy reordered from this very dataset is there; the
    child evicts the copy from the page cache too and loads it instead of the original.  Batches are
    the original's renumbered (same seeds, same samples), so reads and bytes compare one to one.
    """

    name = "outre-part-ordered"
    summary = "outre-part on the dataset renumbered partition by partition (outre reorder)"

    def prepare(self, dataset_dir: str, spec: RunSpec) -> dict[str, Any]:
        import time

        from ..partition._reorder import reorder
        from ..store._dataset import open_dataset

        out = super().prepare(dataset_dir, spec)
        target = _ordered_path(dataset_dir, spec)
        if _ordered_copy_is_current(dataset_dir, target):
            return {**out, "ordered": str(target), "ordered_reused": True}
        start = time.perf_counter()
        reorder(open_dataset(dataset_dir), _partition_name(spec), target, overwrite=True)
        return {**out, "ordered": str(target), "ordered_reused": False, "reorder_seconds": time.perf_counter() - start}

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..store._dataset import open_dataset
        from ._measure import evict_from_page_cache

        target = _ordered_path(spec.dataset, spec)
        evict_from_page_cache(target)
        return super().open(open_dataset(target), spec)


def _ordered_path(dataset_dir: str, spec: RunSpec) -> Any:
    from pathlib import Path

    path = Path(dataset_dir)
    return path.with_name(f"{path.name}-ordered-{_partition_name(spec)}")


def _ordered_copy_is_current(dataset_dir: str, target: Any) -> bool:
    """A valid reordered copy made from this version of the dataset (its identity recorded in the copy)."""
    from ..errors import OutreError
    from ..partition import dataset_identity
    from ..store._dataset import open_dataset

    try:
        copy = open_dataset(target)
        return bool(copy.manifest.meta.get("reordered", {}).get("source") == dataset_identity(open_dataset(dataset_dir)))
    except OutreError:
        return False
