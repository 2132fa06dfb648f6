"""The synchronous baseline: what "PyG + mmap" does, one batch at a time, in the caller's thread.

Per batch: sample (numba kernel) -> gather the feature rows from the memory-mapped matrix with numpy
fancy indexing (measured faster than a numba row-copy kernel on the strided memmap view, and what
a PyG user would write) -> wrap as a PyG ``Data``.  Nothing overlaps, nothing is cached beyond the
OS page cache: this is the honest reference the async loader is measured against, not a straw man.

The seed ids (``sampling._plan.seed_ids``), the epoch plan (``sampling._plan.plan_epoch``) and the
sampling streams (``epoch * len(plan) + seq``) are the async loader's, so for the same seed both
loaders yield the same batches.  Iterating again
starts the next epoch (epoch 0, 1, ...), reshuffled from ``(seed, epoch)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch_geometric.data import Data

from .._rng import check_seed
from ..sampling._plan import num_batches, plan_epoch, seed_ids
from ..sampling._sampler import NeighborSampler, SampledSubgraph
from ..features._decode import RowDecoder, as_tensor
from ..store._dataset import Dataset
from ..store._row_format import RowFormat
from ._config import check_count

__all__ = ["SyncLoader"]

_STAT_KEYS = ("batches", "seeds", "sampled_nodes", "sampled_edges", "sample_seconds",
              "gather_seconds")


class SyncLoader:
    """Iterate PyG mini-batches of ``split`` (a split name or an explicit array of unique node ids).

    Each batch is a ``torch_geometric.data.Data`` with ``x`` (float32, decoded from the stored words),
    ``edge_index``, ``y`` (labels of every sampled node, when the store has labels), ``n_id``,
    ``batch_size`` and the per-hop ``num_sampled_nodes``/``num_sampled_edges``; the first
    ``batch_size`` rows are the seeds.  ``len(loader)`` is the number of batches per epoch.
    """

    def __init__(self, dataset: Dataset, *, split: str | ArrayLike = "train", fanouts: Sequence[int],
                 batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        self.dataset = dataset
        self.batch_size = check_count("batch_size", batch_size)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), check_seed(seed), bool(drop_last)
        self.sampler = NeighborSampler(dataset, fanouts, seed=self.seed)
        self._seeds = seed_ids(dataset, split)
        self._features = dataset.features
        self._decoder = RowDecoder(dataset.row_format)  # stored words -> float32 (``features._decode``)
        self._labels = dataset.labels
        self._epoch = 0
        self._stats: dict[str, float] = dict.fromkeys(_STAT_KEYS, 0)

    @property
    def fanouts(self) -> tuple[int, ...]:
        return self.sampler.fanouts

    def __len__(self) -> int:
        return num_batches(len(self._seeds), self.batch_size, self.drop_last)

    def __iter__(self) -> Iterator[Data]:
        """One epoch; each new iteration is the next epoch (plan fixed when iteration starts)."""
        epoch = self._epoch
        self._epoch += 1
        plan = plan_epoch(self._seeds, self.batch_size, shuffle=self.shuffle, seed=self.seed,
                          epoch=epoch, drop_last=self.drop_last)
        return self._batches(plan, epoch * max(len(plan), 1))

    def _batches(self, plan: list[np.ndarray], stream_base: int) -> Iterator[Data]:
        for seq, seeds in enumerate(plan):
            yield self._make_batch(seeds, stream_base + seq)

    def _make_batch(self, seeds: np.ndarray, stream: int) -> Data:
        start = time.perf_counter()
        sub = self.sampler.sample(seeds, stream)
        sampled = time.perf_counter()
        self.dataset.check_mapped()  # the feature map: a file truncated since is a named error, not SIGBUS
        x = gather_features(self._features, sub.n_id, self._decoder)
        y = None if self._labels is None else torch.from_numpy(self._labels[sub.n_id])
        self._count(sub, sampled - start, time.perf_counter() - sampled)
        return to_data(sub, x, y)

    def _count(self, sub: SampledSubgraph, sample_s: float, gather_s: float) -> None:
        s = self._stats
        s["batches"] += 1
        s["seeds"] += sub.batch_size
        s["sampled_nodes"] += sub.num_nodes
        s["sampled_edges"] += sub.num_edges
        s["sample_seconds"] += sample_s
        s["gather_seconds"] += gather_s

    def stats(self) -> dict[str, Any]:
        """Totals since construction: batches, seeds, sampled nodes and edges, seconds spent
        sampling and gathering, epochs started."""
        out: dict[str, Any] = dict(self._stats)
        out["epochs_started"] = self._epoch
        return out

    def __repr__(self) -> str:
        return (f"SyncLoader({len(self._seeds)} seeds, fanouts={list(self.fanouts)}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, seed={self.seed})")


def gather_features(features: np.ndarray, n_id: np.ndarray, decoder: RowDecoder | None = None) -> torch.Tensor:
    """Rows ``n_id`` of the (memory-mapped, possibly strided) matrix as a float32 tensor, decoded by
    ``decoder`` (``features._decode``; None: the stored words of a float32 or float16 matrix, cast)."""
    rows = features[n_id]  # fancy indexing copies into a fresh C-contiguous array
    if decoder is None:
        decoder = RowDecoder(RowFormat(dim=rows.shape[1], stored=rows.dtype))
    return as_tensor(decoder.decode_matrix(rows))


def to_data(sub: SampledSubgraph, x: torch.Tensor, y: torch.Tensor | None) -> Data:
    """A PyG ``Data`` mini-batch in NeighborLoader's conventions (seeds first, per-hop counts)."""
    data = Data(x=x, edge_index=torch.from_numpy(sub.edge_index), n_id=torch.from_numpy(sub.n_id),
                batch_size=sub.batch_size, num_sampled_nodes=list(sub.num_sampled_nodes),
                num_sampled_edges=list(sub.num_sampled_edges))
    if sub.e_id is not None:
        data.e_id = torch.from_numpy(sub.e_id)
    if y is not None:
        data.y = y
    return data

