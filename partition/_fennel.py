"""Streaming FENNEL orchestration: configuration, levels, passes (kernels in ``_fennel_kernels``, ``_bloom_kernels``).

Single level: one group of ``K`` partitions over all nodes, ``passes`` streams (the second and later
passes restream: each node leaves its partition and is placed again, seeing every other node's
current place).  Two levels: ``k1`` first-level parts, a statistics pass counting each part's internal
edges, then one more streaming run placing every node among the ``K / k1`` sub-partitions of its
first-level part (all parts at once, in one stream), each part with its own ``alpha``, caps and heap.

Parameters per group of ``kk`` partitions holding ``n`` nodes, ``n_t`` training nodes and ``m``
neighbour incidences / 2 (the undirected edge count on a symmetric graph): ``cap = ceil(nu n / kk)``,
``tcap = ceil(nu n_t / kk)``, ``alpha = sqrt(kk) m / n^1.5`` (FENNEL) and
``alpha_t = train_weight * alpha * (n / n_t)^(gamma-1)``: at an even split the training term costs as
much as the size term, so both are held near even.

Memory: ``assign`` (int32, N) and ``is_train`` (bool, N) in exact mode, O(K) counters and heaps, and
the stream's chunk buffer; Bloom mode holds ``bloom_bytes`` of filters per level instead of reading
``assign`` (the assignment is written to a file-backed array as it is produced).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from outre_async.errors import ConfigError
from outre_async.store._dataset import Dataset

from ._bloom_kernels import bloom_chunk
from ._fennel_kernels import FENNEL, LDG, fennel_chunk, init_heaps
from ._format import MODES, OBJECTIVES
from ._output_kernels import cut_chunk
from ._stream import CscStream


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionConfig:
    """Every knob of the partitioner, validated once (``k <= N`` is checked against the dataset)."""

    parts: int
    levels: int = 1
    first_level: int | None = None   # k1 of a two-level run; default round(sqrt(parts))
    mode: str = "exact"
    passes: int = 1
    gamma: float = 1.5
    nu: float = 1.1
    alpha: float | None = None       # None: sqrt(k) m / n^1.5 per group
    train_weight: float = 1.0
    objective: str = "fennel"
    chunk_edges: int = 1 << 24       # ids per read (64 MiB of int32)
    bloom_bytes: int = 64 << 20      # total size of the Bloom filters of one level

    def __post_init__(self) -> None:
        for name in ("parts", "passes", "chunk_edges", "bloom_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ConfigError(f"{name}={value!r} must be an integer >= 1")
        if self.levels not in (1, 2):
            raise ConfigError(f"levels={self.levels!r} must be 1 or 2")
        if self.levels == 2:
            k1 = self.k1
            if not 1 <= k1 <= self.parts or self.parts % k1:
                raise ConfigError(f"first_level={k1} must divide parts={self.parts} (parts = first_level x sub-parts)")
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r} must be one of {MODES}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"objective={self.objective!r} must be one of {OBJECTIVES}")
        if self.mode == "bloom" and self.passes > 1:
            raise ConfigError(f"passes={self.passes}: bloom mode streams once (a filter cannot forget a node); "
                              "use mode='exact' to restream")
        if not (self.gamma > 1.0 and math.isfinite(self.gamma)):
            raise ConfigError(f"gamma={self.gamma!r} must be a finite number > 1")
        if not self.nu >= 1.0:
            raise ConfigError(f"nu={self.nu!r} must be >= 1 (the load limit is nu * n / k)")
        if self.alpha is not None and not self.alpha >= 0:
            raise ConfigError(f"alpha={self.alpha!r} must be >= 0")
        if not self.train_weight >= 0:
            raise ConfigError(f"train_weight={self.train_weight!r} must be >= 0")

    @property
    def k1(self) -> int:
        if self.levels == 1:
            return self.parts
        return self.first_level if self.first_level is not None else max(1, _near_divisor(self.parts))

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


def _near_divisor(k: int) -> int:
    """The divisor of k closest to sqrt(k)."""
    root = int(math.isqrt(k))
    for d in range(root, 0, -1):
        if k % d == 0:
            return d
    return 1


@dataclass(frozen=True, kw_only=True, slots=True)
class LevelParams:
    """Per-group parameters of one streaming run (arrays of length ``groups``)."""

    kk: int
    alpha: np.ndarray
    alpha_t: np.ndarray
    cap: np.ndarray
    tcap: np.ndarray
    gamma: float
    objective: int

    @property
    def groups(self) -> int:
        return len(self.alpha)


def level_params(cfg: PartitionConfig, kk: int, n: np.ndarray, n_t: np.ndarray, m: np.ndarray,
                 even: tuple[float, float] | None = None) -> LevelParams:
    """FENNEL's defaults for groups of ``n`` nodes, ``n_t`` training nodes and ``m`` edges each.

    ``even``: ``(N / K, N_t / K)`` of the whole run, for the second level of two: every sub-partition
    is then capped at ``nu`` times the *global* even share (feasible, since a first-level part holds at
    most ``nu N / k1`` nodes), so the final balance is within ``nu`` rather than ``nu**2``."""
    n = np.asarray(n, dtype=np.float64)
    n_t = np.asarray(n_t, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    if cfg.alpha is not None:
        alpha = np.full(len(n), float(cfg.alpha))
    else:
        alpha = np.where(n > 0, math.sqrt(kk) * m / np.maximum(n, 1) ** 1.5, 0.0)
    ratio = np.where(n_t > 0, n / np.maximum(n_t, 1), 0.0)
    alpha_t = cfg.train_weight * alpha * ratio ** (cfg.gamma - 1.0)
    if even is None:
        cap = np.array([math.ceil(cfg.nu * x / kk) for x in n], dtype=np.int64)
        tcap = np.array([max(1, math.ceil(cfg.nu * x / kk)) for x in n_t], dtype=np.int64)
    else:
        cap = np.full(len(n), math.ceil(cfg.nu * even[0]), dtype=np.int64)
        tcap = np.full(len(n), max(1, math.ceil(cfg.nu * even[1])), dtype=np.int64)
    objective = FENNEL if cfg.objective == "fennel" else LDG
    return LevelParams(kk=kk, alpha=alpha, alpha_t=alpha_t, cap=cap, tcap=tcap, gamma=float(cfg.gamma),
                       objective=objective)


@dataclass(kw_only=True, slots=True)
class LevelState:
    """Counters and heaps of one run (O(K))."""

    params: LevelParams
    size: np.ndarray
    tsize: np.ndarray
    counts: np.ndarray
    touched: np.ndarray
    heap: np.ndarray
    hpos: np.ndarray
    key: np.ndarray
    fallbacks: int = 0

    @classmethod
    def fresh(cls, params: LevelParams) -> LevelState:
        num = params.groups * params.kk
        st = cls(params=params, size=np.zeros(num, np.int64), tsize=np.zeros(num, np.int64),
                 counts=np.zeros(num, np.int64), touched=np.zeros(num, np.int64),
                 heap=np.zeros((2, num), np.int64), hpos=np.zeros((2, num), np.int64),
                 key=np.zeros((2, num), np.float64))
        st.reheap()
        return st

    def reheap(self) -> None:
        p = self.params
        init_heaps(p.kk, self.heap, self.hpos, self.key, self.size, self.tsize, p.alpha, p.alpha_t, p.gamma,
                     p.cap, p.tcap, p.objective)

    def place_chunk(self, nodes: np.ndarray, ptr: np.ndarray, buf: np.ndarray, assign: np.ndarray,
                    node_group: np.ndarray, is_train: np.ndarray, restream: bool) -> None:
        p = self.params
        self.fallbacks += int(fennel_chunk(
            nodes, ptr, buf, assign, node_group, is_train, p.kk, self.size, self.tsize, self.counts,
            self.touched, self.heap, self.hpos, self.key, p.alpha, p.alpha_t, p.gamma, p.cap, p.tcap,
            p.objective, restream))


@dataclass(kw_only=True, slots=True)
class Assignment:
    """Result of :func:`stream_partition`: the assignment and what the run measured."""

    assign: np.ndarray
    parts: int
    level1: np.ndarray | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def train_mask(ds: Dataset) -> np.ndarray:
    mask = np.zeros(ds.num_nodes, dtype=np.bool_)
    if "train" in ds.split_names:
        mask[ds.split("train")] = True
    return mask


def check_parts(ds: Dataset, cfg: PartitionConfig) -> None:
    if cfg.parts > ds.num_nodes:
        raise ConfigError(f"parts={cfg.parts} exceeds the node count {ds.num_nodes} of {ds.path}; "
                          "ask for at most num_nodes partitions")


def stream_partition(ds: Dataset, cfg: PartitionConfig, *, order: np.ndarray | None = None,
                     on_chunk: Callable[[int], None] | None = None,
                     scratch_dir: Path | None = None) -> Assignment:
    """Partition ``ds`` (exact or Bloom mode, one or two levels); returns the assignment in RAM."""
    check_parts(ds, cfg)
    order = _check_order(ds, order)
    stream = CscStream(ds, chunk_edges=cfg.chunk_edges, order=order, on_chunk=on_chunk)
    is_train = train_mask(ds)
    n, n_t = ds.num_nodes, int(np.count_nonzero(is_train))
    start = time.perf_counter()
    params = level_params(cfg, cfg.k1, np.array([n]), np.array([n_t]), np.array([ds.num_edges / 2]))
    run = _bloom_level if cfg.mode == "bloom" else _exact_level
    assign, fallbacks = run(stream, cfg, params, np.empty(0, np.int32), is_train, scratch_dir)
    stats: dict[str, Any] = {"level1_seconds": time.perf_counter() - start, "train_cap_fallbacks": fallbacks,
                             "chunk_buffer_bytes": stream.buffer_bytes}
    if cfg.levels == 1:
        return Assignment(assign=assign, parts=cfg.parts, stats=stats)
    level1 = assign
    kk = cfg.parts // cfg.k1
    internal = np.zeros(cfg.k1, np.int64)
    for nodes, ptr, buf in stream:
        cut_chunk(nodes, ptr, buf, level1, np.empty(len(nodes), np.int32), internal)
    sizes = np.bincount(level1, minlength=cfg.k1)
    tsizes = np.bincount(level1[is_train], minlength=cfg.k1)
    params2 = level_params(cfg, kk, sizes, tsizes, internal / 2, even=(n / cfg.parts, n_t / cfg.parts))
    assign2, fallbacks2 = run(stream, cfg, params2, level1, is_train, scratch_dir)
    stats.update(level2_seconds=time.perf_counter() - start - stats["level1_seconds"],
                 train_cap_fallbacks=fallbacks + fallbacks2)
    return Assignment(assign=assign2, parts=cfg.parts, level1=level1, stats=stats)


def _check_order(ds: Dataset, order: np.ndarray | None) -> np.ndarray | None:
    if order is None:
        return None
    arr = np.asarray(order)
    if arr.shape != (ds.num_nodes,) or not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"order must be a permutation of the {ds.num_nodes} node ids, got {arr.dtype} {arr.shape}")
    arr = arr.astype(np.int64)
    seen = np.zeros(ds.num_nodes, np.bool_)
    if arr.min() < 0 or arr.max() >= ds.num_nodes:
        raise ConfigError(f"order holds ids outside [0, {ds.num_nodes}); pass a permutation of the node ids")
    seen[arr] = True
    if not seen.all():
        raise ConfigError("order lists some node twice (and misses another); pass a permutation of the node ids")
    return arr


def _exact_level(stream: CscStream, cfg: PartitionConfig, params: LevelParams, node_group: np.ndarray,
                 is_train: np.ndarray, scratch_dir: Path | None) -> tuple[np.ndarray, int]:
    assign = np.full(stream.ds.num_nodes, -1, dtype=np.int32)
    state = LevelState.fresh(params)
    for r in range(cfg.passes):
        for nodes, ptr, buf in stream:
            state.place_chunk(nodes, ptr, buf, assign, node_group, is_train, restream=r > 0)
    return assign, state.fallbacks


def bloom_shape(cfg: PartitionConfig, params: LevelParams) -> tuple[int, int]:
    """``(bits per filter, hash count)``: ``bloom_bytes`` split evenly over the level's filters, the
    hash count optimal for a filter holding ``cap`` ids."""
    filters = params.groups * params.kk
    words = max(1, cfg.bloom_bytes // (8 * filters))
    nbits = 64 * words
    items = max(1, int(params.cap.max()))
    nhash = min(16, max(1, round(nbits / items * math.log(2))))
    return nbits, nhash


def bloom_fp_bound(nbits: int, nhash: int, items: int) -> float:
    """Expected false-positive rate of a filter of ``nbits`` bits and ``nhash`` hashes holding ``items``."""
    return (1.0 - math.exp(-nhash * items / nbits)) ** nhash


def _bloom_level(stream: CscStream, cfg: PartitionConfig, params: LevelParams, node_group: np.ndarray,
                 is_train: np.ndarray, scratch_dir: Path | None) -> tuple[np.ndarray, int]:
    n = stream.ds.num_nodes
    assign: np.ndarray
    if scratch_dir is not None:  # file-backed: the pages can be written back under memory pressure
        assign = np.lib.format.open_memmap(scratch_dir / f"bloom-assign-{params.groups}.npy", mode="w+",
                                           dtype=np.int32, shape=(n,))
    else:
        assign = np.empty(n, dtype=np.int32)
    nbits, nhash = bloom_shape(cfg, params)
    bits = np.zeros((params.groups * params.kk, nbits // 64), dtype=np.uint64)
    state = LevelState.fresh(params)
    p = params
    fallbacks = 0
    for nodes, ptr, buf in stream:
        out = np.empty(len(nodes), np.int32)
        groups = node_group[nodes] if len(node_group) else node_group
        fallbacks += int(bloom_chunk(
            nodes, ptr, buf, out, groups, is_train, p.kk, state.size, state.tsize, state.counts, state.touched,
            state.heap, state.hpos, state.key, p.alpha, p.alpha_t, p.gamma, p.cap, p.tcap, p.objective,
            bits, nbits, nhash))
        assign[nodes] = out
    return np.asarray(assign), fallbacks
