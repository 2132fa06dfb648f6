"""Our out-of-core neighbour sampler as a PyG ``BaseSampler``, for ``NodeLoader((fs, gs), node_sampler=...)``.

PyG's own ``NeighborSampler`` needs pyg-lib or torch-sparse and loads the whole topology from a
``GraphStore`` into RAM; this one runs our numba kernel over the dataset's CSC (``indices``
memory-mapped when it does not fit), with PyG's semantics (directed, without replacement, seeds
first, hop by hop, ``num_sampled_nodes`` / ``num_sampled_edges`` per hop: ``trim_to_layer`` works).

Batch ``k`` (counted per sampler) uses RNG stream ``k`` of ``seed``: with ``shuffle=False`` and one
worker, a run is reproducible.  Link prediction (``sample_from_edges``) is a :class:`NotSupportedError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from ..errors import ConfigError, NotSupportedError
from ..sampling._sampler import NeighborSampler
from ..store._dataset import Dataset

__all__ = ["OutreNodeSampler"]


class OutreNodeSampler(BaseSampler):
    """Samples ``num_neighbors[h]`` in-neighbours per node at hop ``h`` (``-1``: all) of ``data``.

    ``data``: a :class:`Dataset`, or the ``(feature_store, graph_store)`` pair of :func:`to_pyg`.
    """

    def __init__(self, data: Any, num_neighbors: Sequence[int], *, seed: int = 0) -> None:
        self.dataset = _dataset_of(data)
        self._sampler = NeighborSampler(self.dataset, list(num_neighbors), seed=seed)
        self._batches = itertools.count()

    @property
    def num_neighbors(self) -> tuple[int, ...]:
        return self._sampler.fanouts

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        if index.input_type is not None:
            raise NotSupportedError(f"heterogeneous graphs are not supported yet (input_type={index.input_type!r})")
        if index.time is not None:
            raise NotSupportedError("temporal sampling (input_time) is not supported yet; drop input_time")
        seeds = index.node.cpu().numpy().astype(np.int64, copy=False)
        sub = self._sampler.sample(seeds, stream=next(self._batches))
        edge_index = torch.from_numpy(sub.edge_index)
        e_id = getattr(sub, "e_id", None)  # global edge ids, where the sampler records them
        return SamplerOutput(
            node=torch.from_numpy(sub.n_id), row=edge_index[0], col=edge_index[1],
            edge=None if e_id is None else torch.as_tensor(e_id),
            num_sampled_nodes=list(sub.num_sampled_nodes), num_sampled_edges=list(sub.num_sampled_edges),
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(self, index: Any, neg_sampling: Any = None) -> SamplerOutput:
        raise NotSupportedError("link prediction (sampling from edges, LinkNeighborLoader) is not supported "
                                "yet; outre-async samples from seed nodes (NodeLoader / OutreLoader)")

    def __repr__(self) -> str:
        return f"OutreNodeSampler({str(self.dataset.path)!r}, num_neighbors={list(self.num_neighbors)})"


def _dataset_of(data: Any) -> Dataset:
    if isinstance(data, Dataset):
        return data
    if isinstance(data, tuple | list) and len(data) == 2:
        found = {getattr(store, "dataset", None) for store in data}
        if len(found) == 1 and isinstance(next(iter(found)), Dataset):
            return next(iter(found))  # type: ignore[return-value]
    raise ConfigError("OutreNodeSampler takes a Dataset or the (feature_store, graph_store) pair of "
                      f"oa.pyg.to_pyg(dataset), got {type(data).__name__}")
