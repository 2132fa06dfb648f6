"""Synthetic graphs with planted communities, streamed into a dataset (``outre generate``).

The model is a degree-corrected stochastic block model (DC-SBM) generated in destination order,
so the CSC comes out sorted and no edge is ever held twice or sorted globally:

1. Communities get heavy-tailed sizes (Pareto, the largest at most :data:`COMMUNITY_SIZE_RATIO`
   times the smallest).  With ``shuffle_ids`` node ids are a seeded random permutation of the
   community order, so ids carry no trace of the communities (a partitioner has to find them);
   without it, communities are contiguous id ranges.
2. Every node gets a weight θ from a power law truncated to ``[xmin, max_degree]`` with exponent
   ``degree_exponent``; ``xmin`` is solved so that the mean weight is ``avg_degree``.
3. For each chunk of consecutive destinations ``v``: the in-degree is θ_v rounded stochastically;
   each source comes from v's own community with probability ``mixing_intra``, otherwise from a
   different community chosen by total weight; inside a community, a node is chosen ∝ θ (alias
   tables).  Lists are sorted, without duplicates or self loops (kernels in ``_gen_kernels``).
4. Labels are ``community mod num_classes``; a feature row is its class centroid (a random
   vector of norm ≈ 1) plus N(0, ``feature_noise``²) noise in every dimension.  The noise hides
   the class from a single row (an MLP is weak), and averaging over the in-neighbours, most of
   which share the class, removes it (a GNN is strong).

Randomness is counter-based: everything about node ``v`` (weight, in-neighbours, feature noise)
comes from streams seeded by ``(seed, v)``, so a seed gives a byte-identical dataset whatever
``chunk_nodes`` is.  Memory is O(N) (weights, communities, alias tables, the writer's ``indptr``)
plus one chunk of edges and features: never O(E) or O(N·D).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ConfigError
from .._rng import stream_state
from ..store._row_format import storage_dtype
from ..store._writer import INT32_LIMIT, DatasetWriter
from . import _gen_kernels as kernels
from ._gen_config import MIN_COMMUNITY_SIZE, GeneratorConfig, resolve_config

__all__ = ["generate", "planted_communities"]

GENERATOR_VERSION = 1  # bump whenever the same seed would give a different graph
COMMUNITY_SIZE_TAIL = 1.2  # Pareto index of the community sizes (smaller = more unequal)
COMMUNITY_SIZE_RATIO = 50.0  # largest / smallest community size, before rounding
_CHUNK_EDGES = 1 << 22  # a default chunk holds about this many edges ...
_CHUNK_FEATURE_BYTES = 64 << 20  # ... or this many feature bytes, whichever is fewer nodes
_MIN_CHUNK = 1024
# one independent random stream per use
_TAG_COMMUNITIES, _TAG_WEIGHTS, _TAG_DEGREES, _TAG_EDGES = 0, 1, 2, 3
_TAG_CENTROIDS, _TAG_FEATURES, _TAG_SPLITS = 4, 5, 6
_ZIGGURAT = kernels.ziggurat_tables()


# -- the public entry points -----------------------------------------------------------------------


def generate(
    out: str | os.PathLike[str],
    config: GeneratorConfig | str = "tiny",
    *,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = False,
    chunk_nodes: int | None = None,
    **overrides: Any,
) -> Path:
    """Generate a synthetic dataset at ``out`` and return its path.

    ``config`` is a :data:`PRESETS` name or a :class:`GeneratorConfig`; ``overrides`` replace its
    fields (``num_nodes=...``).  A seed gives a byte-identical dataset whatever ``chunk_nodes``
    (nodes generated and written per step; default: about 4M edges or 64 MiB of features).  On
    any error, or Ctrl-C, nothing is left at ``out``.
    """
    cfg = resolve_config(config, overrides)
    _check_seed(seed)
    chunk = _chunk_nodes(cfg, chunk_nodes)
    meta = {"generator": {"model": "dc-sbm", "version": GENERATOR_VERSION, **cfg.as_dict(),
                          "seed": int(seed)}}
    with DatasetWriter(out, num_nodes=cfg.num_nodes, feature_dim=cfg.feature_dim,
                       feature_dtype=cfg.feature_dtype, num_classes=cfg.num_classes,
                       overwrite=overwrite, meta=meta) as writer:
        plan = _make_plan(cfg, int(seed))
        _write_chunks(writer, plan, chunk, progress)
        writer.write_labels(plan.labels(0, cfg.num_nodes))
        _write_splits(writer, cfg, int(seed))
    return writer.path


def planted_communities(config: GeneratorConfig | str = "tiny", seed: int = 0,
                        **overrides: Any) -> np.ndarray:
    """The planted community (int32) of every node of ``generate(out, config, seed=seed, ...)``.

    Ground truth for tests and partitioner evaluations; O(N), draws no edge.
    """
    cfg = resolve_config(config, overrides)
    _check_seed(seed)
    return _communities(cfg, int(seed))[0]


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed={seed!r} must be a non-negative integer")


def _chunk_nodes(cfg: GeneratorConfig, chunk_nodes: int | None) -> int:
    """Nodes per step: as given, or enough for large writes while a chunk stays tens of MiB."""
    if chunk_nodes is not None:
        if isinstance(chunk_nodes, bool) or not isinstance(chunk_nodes, int | np.integer) \
                or chunk_nodes < 1:
            raise ConfigError(f"chunk_nodes={chunk_nodes!r} must be a positive integer")
        return int(chunk_nodes)
    row_bytes = cfg.feature_dim * storage_dtype(cfg.feature_dtype).itemsize
    by_edges = _CHUNK_EDGES / cfg.avg_degree
    by_features = _CHUNK_FEATURE_BYTES / row_bytes if row_bytes else by_edges
    return max(int(min(by_edges, by_features)), _MIN_CHUNK)


def _wrapping() -> np.errstate:
    """The kernels' uint64 arithmetic wraps on purpose; under ``NUMBA_DISABLE_JIT=1`` numpy would
    warn about it.  numpy's error state is per thread, so every kernel call site enters this."""
    return np.errstate(over="ignore")


# -- the O(N) plan ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Plan:
    """Everything the chunk loop needs, built once: O(N) arrays, never O(E)."""

    config: GeneratorConfig
    community: np.ndarray  # int32 [N]
    ptr: np.ndarray  # int64 [K+1]: community c owns alias rows ptr[c]:ptr[c+1]
    weights: np.ndarray  # float64 [N]: θ, expected in-degree and propensity as a source
    table: np.ndarray  # [N, 4] per-community alias rows (int32; int64 for N >= 2**31)
    group_table: np.ndarray  # [K, 4] alias rows over communities, by total weight
    centroids: np.ndarray  # float32 [C, D]
    degree_key: np.uint64
    edge_key: np.uint64
    feature_key: np.uint64

    def labels(self, start: int, stop: int) -> np.ndarray:
        return (self.community[start:stop] % self.config.num_classes).astype(np.int64)


def _make_plan(cfg: GeneratorConfig, seed: int) -> _Plan:
    community, members, ptr = _communities(cfg, seed)
    weights = _degree_weights(cfg, seed)
    dtype = np.int32 if cfg.num_nodes <= INT32_LIMIT else np.int64
    table = np.empty((cfg.num_nodes, 4), dtype=dtype)
    k = cfg.num_communities
    group_table = np.empty((k, 4), dtype=dtype)
    group_weights = np.bincount(community, weights=weights, minlength=k)
    with _wrapping():
        kernels.alias_tables(ptr, members, weights, table)
        kernels.alias_tables(np.array([0, k]), np.arange(k), group_weights, group_table)
    return _Plan(
        config=cfg, community=community, ptr=ptr, weights=weights, table=table,
        group_table=group_table, centroids=_centroids(cfg, seed),
        degree_key=_key(seed, _TAG_DEGREES), edge_key=_key(seed, _TAG_EDGES),
        feature_key=_key(seed, _TAG_FEATURES),
    )


def _key(seed: int, tag: int) -> np.uint64:
    return np.uint64(stream_state(seed, tag)[0])


def _communities(cfg: GeneratorConfig, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(community[N], members[N], ptr[K+1])``; community c is ``members[ptr[c]:ptr[c+1]]``."""
    rng = np.random.default_rng([seed, _TAG_COMMUNITIES])
    sizes = _community_sizes(cfg.num_nodes, cfg.num_communities, rng)
    ptr = np.zeros(cfg.num_communities + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    members = rng.permutation(cfg.num_nodes) if cfg.shuffle_ids else np.arange(cfg.num_nodes)
    community = np.empty(cfg.num_nodes, dtype=np.int32)
    community[members] = np.repeat(np.arange(cfg.num_communities, dtype=np.int32), sizes)
    return community, members, ptr


def _community_sizes(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed sizes summing to ``n``, each >= MIN_COMMUNITY_SIZE (largest remainders)."""
    raw = np.minimum((1.0 - rng.random(k)) ** (-1.0 / COMMUNITY_SIZE_TAIL), COMMUNITY_SIZE_RATIO)
    share = raw / raw.sum() * (n - MIN_COMMUNITY_SIZE * k)
    sizes = MIN_COMMUNITY_SIZE + np.floor(share).astype(np.int64)
    short = n - int(sizes.sum())
    sizes[np.argsort(np.floor(share) - share, kind="stable")[:short]] += 1
    return sizes


def _degree_weights(cfg: GeneratorConfig, seed: int) -> np.ndarray:
    xmax = float(min(cfg.max_degree, cfg.num_nodes - 1))
    xmin = pareto_xmin(cfg.avg_degree, xmax, cfg.degree_exponent)
    weights = np.empty(cfg.num_nodes, dtype=np.float64)
    with _wrapping():
        kernels.degree_weights(_key(seed, _TAG_WEIGHTS), xmin, xmax, cfg.degree_exponent, weights)
    return weights


def pareto_xmin(mean: float, xmax: float, exponent: float) -> float:
    """The lower end ``xmin`` of a power law truncated to ``[xmin, xmax]`` with mean ``mean``.

    The truncated mean grows with ``xmin`` from 0 to ``xmax``, so bisection always converges.
    """
    lo, hi = 0.0, float(mean)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _pareto_mean(mid, xmax, exponent) < mean:
            lo = mid
        else:
            hi = mid
    return hi


def _pareto_mean(a: float, b: float, g: float) -> float:
    if a <= 0.0:
        return 0.0
    r = b / a
    if abs(g - 2.0) < 1e-6:
        return a * math.log(r) / (1.0 - 1.0 / r)
    return a * (g - 1.0) / (g - 2.0) * (1.0 - r ** (2.0 - g)) / (1.0 - r ** (1.0 - g))


def _centroids(cfg: GeneratorConfig, seed: int) -> np.ndarray:
    """One random direction per class, entries N(0, 1/D): norms ≈ 1, pairwise distances ≈ √2."""
    rng = np.random.default_rng([seed, _TAG_CENTROIDS])
    dim = max(cfg.feature_dim, 1)
    return (rng.standard_normal((cfg.num_classes, dim)) / math.sqrt(dim)).astype(np.float32)


# -- the chunk loop --------------------------------------------------------------------------------


def _write_chunks(writer: DatasetWriter, plan: _Plan, chunk: int, progress: bool) -> None:
    """Generate and append chunk after chunk.  A helper thread draws a chunk's features while
    this one draws its topology (both kernels release the GIL); it is joined on the way out."""
    n, dim = plan.config.num_nodes, plan.config.feature_dim
    with (ThreadPoolExecutor(max_workers=1, thread_name_prefix="outre-generate") as pool,
          tqdm(total=n, unit="node", unit_scale=True, disable=not progress,
               desc=f"generate {plan.config.name}") as bar):
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            features = pool.submit(_features, plan, start, stop) if dim else None
            writer.append_neighbors(*_topology(plan, start, stop))
            if features is not None:
                writer.append_features(features.result())
            bar.update(stop - start)


def _topology(plan: _Plan, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """In-degrees and concatenated in-neighbour lists of the destinations ``start:stop``."""
    cfg = plan.config
    targets = np.empty(stop - start, dtype=np.int64)
    degrees = np.empty_like(targets)
    by_community = np.argsort(plan.community[start:stop], kind="stable")
    with _wrapping():
        kernels.target_degrees(plan.degree_key, plan.weights, start,
                               min(cfg.max_degree, cfg.num_nodes - 1), targets)
        out = np.empty(int(targets.sum()), dtype=plan.table.dtype)
        count = kernels.in_neighbors(plan.edge_key, start, by_community, targets, plan.community,
                                     plan.ptr, plan.table, plan.group_table, cfg.mixing_intra,
                                     degrees, out)
    return degrees, out[:count]


def _features(plan: _Plan, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop``: class centroid + N(0, feature_noise²) noise, per-node streams."""
    cfg = plan.config
    rows = np.empty((stop - start, cfg.feature_dim), dtype=np.float32)
    with _wrapping():
        kernels.feature_rows(plan.feature_key, start, plan.labels(start, stop), plan.centroids,
                             cfg.feature_noise, *_ZIGGURAT, rows)
    return rows  # the writer encodes them as cfg.feature_dtype


def _write_splits(writer: DatasetWriter, cfg: GeneratorConfig, seed: int) -> None:
    """Disjoint random train/val/test node sets of the configured fractions (sorted ids)."""
    order = np.random.default_rng([seed, _TAG_SPLITS]).permutation(cfg.num_nodes)
    fractions = np.cumsum([cfg.train_fraction, cfg.val_fraction, cfg.test_fraction])
    bounds = np.minimum(np.round(fractions * cfg.num_nodes).astype(np.int64), cfg.num_nodes)
    start = 0
    for name, stop in zip(("train", "val", "test"), bounds, strict=True):
        writer.write_split(name, np.sort(order[start:stop]))
        start = int(stop)
