"""The negatives stage of an edge batch: which nodes stand in for non-edges, drawn deterministically.

A negative is a node drawn by one of three samplers, each from the batch's own generator (seeded by
``(seed, epoch, rank, batch)`` in ``_edge_items``), so the plan, foresight and a replay draw the same:

* ``uniform``: over all nodes (PyG's).  Cold random rows: each one brings a neighbourhood the batch
  would not otherwise read.
* ``degree``: proportional to in-degree in the message-passing graph: an edge drawn uniformly, its
  target taken (``searchsorted`` on ``indptr``, no table).  Harder negatives, hub rows that caches hold.
* ``resident``: the endpoints of the batch's own positive pairs (MariusGNN draws from the partitions
  in memory; in plain mode, the rows this batch samples anyway are its endpoints' subgraphs), so the
  negatives add few new rows.  ``degree_fraction`` of them are drawn by ``degree`` instead, as
  MariusGNN's ``degree_fraction``, so that not every negative is a batch neighbour.

``degree_fraction`` applies to ``uniform`` too (that share by degree); a graph without edges draws
uniformly.  Negatives may be true edges with every sampler; :func:`false_negatives` counts them
against the graph (``stats()["negatives"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._negative_kernels import count_edges

SAMPLERS = ("uniform", "degree", "resident")


@dataclass(frozen=True, kw_only=True, slots=True)
class NegativeSpec:
    """PyG's ``NegativeSampling(mode, amount)`` with the sampler that draws the nodes (validated by the loader)."""

    mode: str                     # "binary" or "triplet"
    amount: float                 # > 0; an int for triplet
    sampler: str = "uniform"      # one of SAMPLERS
    degree_fraction: float = 0.0  # share of the negatives drawn by degree (uniform and resident)


def draw_nodes(spec: NegativeSpec, count: int, rng: np.random.Generator, num_nodes: int, indptr: np.ndarray | None,
               resident: np.ndarray) -> np.ndarray:
    """``count`` negative nodes (int64) by ``spec``'s sampler; ``resident``: the batch's positive endpoints."""
    if spec.sampler == "uniform" and spec.degree_fraction == 0.0:
        return rng.integers(0, num_nodes, size=count, dtype=np.int64)  # PyG's draws, unchanged
    by_degree = count if spec.sampler == "degree" else math.floor(count * spec.degree_fraction)
    rest = count - by_degree
    if spec.sampler == "resident":
        others = resident[rng.integers(0, len(resident), size=rest)] if len(resident) else \
            rng.integers(0, num_nodes, size=rest, dtype=np.int64)
    else:
        others = rng.integers(0, num_nodes, size=rest, dtype=np.int64)
    return np.concatenate([_by_degree(by_degree, rng, num_nodes, indptr), others.astype(np.int64)])


def _by_degree(count: int, rng: np.random.Generator, num_nodes: int, indptr: np.ndarray | None) -> np.ndarray:
    if indptr is None or int(indptr[-1]) == 0:
        return rng.integers(0, num_nodes, size=count, dtype=np.int64)
    edges = rng.integers(0, int(indptr[-1]), size=count, dtype=np.int64)
    return np.searchsorted(indptr, edges, side="right").astype(np.int64) - 1


def false_negatives(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray, dst: np.ndarray) -> int:
    """How many negative pairs ``(src, dst)`` are edges of the graph (``_negative_kernels``)."""
    return int(count_edges(indptr, indices, np.ascontiguousarray(src, np.int64), np.ascontiguousarray(dst, np.int64)))
