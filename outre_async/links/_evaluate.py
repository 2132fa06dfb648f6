"""``oa.evaluate_links``: rank each held-out pair against its candidates, out of core.

Step one is every node's embedding, by the layer-wise inference the node tasks use
(:func:`outre_async.inference`: full neighbourhoods, one layer at a time, spilled to disk between
layers): N x D floats in RAM, whatever the number of candidates.  Step two scores the pairs in
chunks of at most ``chunk_pairs``: first every query's positive, then its candidates
(``_candidates``), each chunk folded into the streaming metrics (``_ranking``) and dropped, so the
scoring holds ``chunk_pairs x (2 D + 3)`` numbers at a time and 1,000 candidates or all N cost time,
not memory.  A query block of ``chunk_pairs // c`` queries takes all its columns at once; with more
candidates than ``chunk_pairs`` (``"all"`` on a large graph) one query's columns are cut in pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .._rng import check_seed
from ..errors import ConfigError
from ..layerwise import inference
from ..store._dataset import Dataset
from ._candidates import Candidates
from ._ranking import Ranking, check_metrics

Decoder = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_NEGATIVES = ("auto", "stored", "uniform")


def dot(h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
    """The dot-product decoder: ``(h_src * h_dst).sum(-1)``."""
    return (h_src * h_dst).sum(-1)


@torch.no_grad()
def evaluate_links(model: nn.Module | torch.Tensor, dataset: Dataset, *, split: str = "test",
                   candidates: int | str = 100, metrics: str | tuple[str, ...] = ("mrr", "hits@10", "auc"),
                   decoder: Decoder | None = None, negatives: str = "auto", seed: int = 0,
                   chunk_pairs: int = 1 << 16, memory_budget: int | str | None = None, backend: str = "auto",
                   device: str | torch.device = "cpu", tmp_dir: str | Path | None = None,
                   progress: bool = False) -> dict[str, Any]:
    """Rank the edge split ``split``'s pairs, each against ``candidates`` others (an int, or ``"all"``
    nodes), and return ``metrics`` (``mrr``, ``hits@K``, ``auc``) with ``queries``, ``candidates`` and
    the ``negatives`` used.  ``model``: an encoder with the layer-wise protocol of
    :func:`~outre_async.inference` (its output rows are the embeddings), or the ``[N, D]`` embeddings
    themselves.  ``decoder(h_src, h_dst) -> scores`` (default: dot).  ``negatives``: ``"stored"`` (the
    split's fixed negatives), ``"uniform"`` (drawn from ``seed``) or ``"auto"`` (stored when the
    split has at least ``candidates`` per pair, else uniform)."""
    names = check_metrics(metrics)
    queries = dataset.edge_split(split)
    source = _candidates(dataset, split, queries, candidates, negatives, check_seed(seed))
    if isinstance(chunk_pairs, bool) or not isinstance(chunk_pairs, int) or chunk_pairs < 1:
        raise ConfigError(f"chunk_pairs={chunk_pairs!r} must be an int >= 1 (pairs scored at once)")
    if isinstance(model, torch.Tensor):
        h = _checked_embeddings(model, dataset.num_nodes)
    else:
        h = inference(model, dataset, backend=backend, device=device, tmp_dir=tmp_dir,  # type: ignore[arg-type]
                      progress=progress, memory_budget=memory_budget)
    if isinstance(decoder, nn.Module):
        decoder.eval()
    score = _scorer(h.to(device), decoder or dot)
    ranking = Ranking(_positives(score, queries, chunk_pairs))
    _rank(ranking, score, source, chunk_pairs)
    return {**ranking.result(names), "queries": queries.shape[1], "candidates": source.per_query,
            "negatives": source.kind}


def _candidates(ds: Dataset, split: str, queries: np.ndarray, candidates: int | str, negatives: str,
                seed: int) -> Candidates:
    """Which candidates: the stored negatives, uniform draws or all nodes (see :func:`evaluate_links`)."""
    if negatives not in _NEGATIVES:
        raise ConfigError(f"negatives must be one of {_NEGATIVES}, got {negatives!r}")
    q, n = queries.shape[1], ds.num_nodes
    if q == 0:
        raise ConfigError(f"edge split {split!r} of {ds.path} holds no pairs; there is nothing to rank")
    if candidates == "all":
        if negatives == "stored":
            raise ConfigError("candidates='all' ranks against every node; it takes no stored negatives (negatives='auto')")
        return Candidates(kind="all", per_query=n - 1, queries=queries, num_nodes=n)
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise ConfigError(f"candidates={candidates!r} must be an int >= 1 or 'all'")
    neg = f"{split}_neg"
    stored = ds.edge_split(neg) if neg in ds.edge_split_names and negatives != "uniform" else None
    per = stored.shape[1] // q if stored is not None and stored.shape[1] % q == 0 else 0
    if negatives == "stored" and per < candidates:
        have = "none" if stored is None else f"{stored.shape[1]} for {q} pairs"
        raise ConfigError(f"negatives='stored' needs {candidates} stored negatives per {split!r} pair, {neg} holds "
                          f"{have}; pass candidates <= what is stored, negatives='uniform', or re-split with "
                          f"oa.split_edges(..., eval_negatives={candidates})")
    if stored is not None and per >= candidates:
        return Candidates(kind="stored", per_query=candidates, queries=queries, num_nodes=n, stored=stored)
    return Candidates(kind="uniform", per_query=candidates, queries=queries, num_nodes=n, seed=seed)


def _checked_embeddings(h: torch.Tensor, num_nodes: int) -> torch.Tensor:
    if h.dim() != 2 or h.shape[0] != num_nodes or not h.is_floating_point():
        raise ConfigError(f"embeddings must be a float tensor [num_nodes={num_nodes}, D], got {h.dtype} "
                          f"{list(h.shape)}; pass the encoder, or the output of oa.inference(encoder, ds)")
    return h.detach()


def _scorer(h: torch.Tensor, decoder: Decoder) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``score(src, dst)``: the decoder on the rows of ``h`` (arrays of any shape, scores the same shape)."""
    index_device = h.device

    def score(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        s = torch.from_numpy(np.array(src, dtype=np.int64).ravel()).to(index_device)  # a copy: src may be a
        d = torch.from_numpy(np.array(dst, dtype=np.int64).ravel()).to(index_device)  # read-only view
        out = decoder(h[s], h[d]).reshape(-1)
        if out.numel() != s.numel():
            raise ConfigError(f"decoder returned {out.numel()} scores for {s.numel()} pairs; it must return one per pair")
        return out.float().cpu().numpy().reshape(np.shape(src))

    return score


def _positives(score: Callable[[np.ndarray, np.ndarray], np.ndarray], queries: np.ndarray, chunk: int) -> np.ndarray:
    q = queries.shape[1]
    return np.concatenate([score(queries[0, a:a + chunk], queries[1, a:a + chunk]) for a in range(0, q, chunk)])


def _rank(ranking: Ranking, score: Callable[[np.ndarray, np.ndarray], np.ndarray], source: Candidates,
          chunk: int) -> None:
    """Score every query's candidates in blocks of at most ``chunk`` pairs and fold them in."""
    q, c = source.queries.shape[1], source.per_query
    rows_per_block, cols_per_block = max(1, chunk // c), min(c, chunk)
    for a in range(0, q, rows_per_block):
        rows = np.arange(a, min(q, a + rows_per_block), dtype=np.int64)
        for j0 in range(0, c, cols_per_block):
            src, dst = source.block(rows, j0, min(c, j0 + cols_per_block))
            ranking.add(rows, score(src, dst))
