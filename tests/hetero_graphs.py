"""Small random typed graphs shared by the typed-store, hetero-import and hetero-sampler tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from outre_async.ingest._hetero import HeteroArrays, write_hetero
from outre_async.ingest._source import parse_options

COUNTS = {"paper": 40, "author": 25, "venue": 6}
EDGE_TYPES = [("author", "writes", "paper"), ("paper", "written_by", "author"), ("paper", "cites", "paper"),
              ("paper", "refs", "paper"), ("paper", "in", "venue"), ("venue", "has", "paper")]


def random_hetero(seed: int = 0, counts: dict[str, int] | None = None, edge_types=None, *,
                  avg_edges: int = 60, features: bool = True) -> HeteroArrays:
    """A typed graph with distinct (src, dst) pairs per edge type, paper features of width 5 (float32),
    author features of width 3 (float16), featureless venues, labels and splits on papers."""
    counts = dict(COUNTS if counts is None else counts)
    edge_types = EDGE_TYPES if edge_types is None else edge_types
    rng = np.random.default_rng(seed)
    edges = {}
    for s, r, d in edge_types:
        k = int(rng.integers(1, avg_edges))
        pairs = np.unique(np.stack([rng.integers(0, counts[s], k), rng.integers(0, counts[d], k)]), axis=1)
        edges[(s, r, d)] = pairs
    x = {}
    if features:
        x = {"paper": rng.standard_normal((counts["paper"], 5)).astype(np.float32),
             "author": rng.standard_normal((counts["author"], 3)).astype(np.float16)}
    n = counts["paper"]
    perm = rng.permutation(n)
    return HeteroArrays(description="random hetero", format="test", num_nodes=counts, edge_index=edges, x=x,
                        y={"paper": rng.integers(0, 3, n)},
                        splits={"paper": {"train": perm[: n // 2], "val": perm[n // 2 : 3 * n // 4],
                                          "test": perm[3 * n // 4 :]}})


def write_random_hetero(path: Path, seed: int = 0, **kw) -> HeteroArrays:
    g = random_hetero(seed, **kw)
    write_hetero(path, g, parse_options({}))
    return g
