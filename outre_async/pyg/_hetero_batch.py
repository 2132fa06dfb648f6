"""One sampled typed batch → a PyG ``HeteroData`` with the fields PyG's hetero ``NeighborLoader`` sets.

Per node type: ``x`` (float32; types without features have none: give them an ``n_id``-indexed
``torch.nn.Embedding``, as PyG's examples do), ``n_id`` (ids local to the type, the seeds first on the
input type) and ``num_sampled_nodes`` (per hop).  Per edge type: ``edge_index`` (row 0 indexes the
source type's nodes, row 1 the destination's), ``e_id`` and ``num_sampled_edges``.  On the input type:
``input_id``, ``batch_size`` and ``y`` (the label of every sampled node of the type; the first
``batch_size`` are the seeds').  So ``to_hetero`` models, ``trim_to_layer`` and the usual
``out[:batch_size]`` slicing take it as they take PyG's batches.

``e_id`` is the edge's position in the dataset's global CSC (the store's edge id), not PyG's position in
the edge type's own ``edge_index``.  Features are read in the calling thread, row by row from the
type's file (a memmap): this is the in-process path, not the streaming loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..sampling._hetero_sampler import HeteroSampledSubgraph


def to_hetero_batch(sampled: HeteroSampledSubgraph, features: Any, *, labels: Any = None,
                    input_id: Any = None) -> Any:
    """A ``HeteroData`` of ``sampled`` (a :meth:`HeteroNeighborSampler.sample` result).

    ``features``: the typed :class:`~outre_async.Dataset` it was sampled from (its per-type features
    and, on the input type, its labels), or a mapping of node type to a ``[count, dim]`` array (types
    missing from it get no ``x``).  ``labels``: the input type's labels by local id (default: the
    dataset's).  ``input_id``: what ``batch[input_type].input_id`` holds (default ``0..batch_size-1``,
    the seeds' positions as given)."""
    import torch
    from torch_geometric.data import HeteroData

    data, target = HeteroData(), sampled.input_type
    for t, ids in sampled.node.items():
        x = _rows(features, t, ids)
        if x is not None:
            data[t].x = torch.from_numpy(x)
        data[t].n_id = torch.from_numpy(ids)
        data[t].num_sampled_nodes = list(sampled.num_sampled_nodes[t])
    for et, ei in sampled.edge_index.items():
        data[et].edge_index = torch.from_numpy(ei)
        data[et].e_id = torch.from_numpy(sampled.e_id[et])
        data[et].num_sampled_edges = list(sampled.num_sampled_edges[et])
    y = _labels(features, target) if labels is None else np.asarray(labels)
    if y is not None:
        data[target].y = torch.from_numpy(np.ascontiguousarray(y[sampled.node[target]], dtype=np.int64))
    data[target].input_id = (torch.arange(sampled.batch_size) if input_id is None
                             else torch.as_tensor(np.asarray(input_id), dtype=torch.long))
    data[target].batch_size = sampled.batch_size
    return data


def _rows(features: Any, node_type: str, ids: np.ndarray) -> np.ndarray | None:
    """The feature rows ``ids`` of ``node_type`` as float32, or None for a featureless type."""
    if isinstance(features, Mapping):
        matrix = features.get(node_type)
    elif hasattr(features, "features_of"):
        matrix = features.features_of(node_type)
    else:
        raise ConfigError(f"features must be the typed Dataset or a mapping of node type to feature matrix, got "
                          f"{type(features).__name__}")
    if matrix is None:
        return None
    if len(ids) and int(ids.max()) >= len(matrix):
        raise ConfigError(f"node type {node_type!r} has {len(matrix)} feature rows, the batch reads row "
                          f"{int(ids.max())}; pass the features of the graph that was sampled")
    order = np.argsort(ids, kind="stable")  # sorted reads from a memmap, then back to batch order
    out = np.empty((len(ids), matrix.shape[1]), np.float32)
    out[order] = np.asarray(matrix[ids[order]], dtype=np.float32)
    return out


def _labels(features: Any, target: str) -> np.ndarray | None:
    """The input type's labels by local id, from a typed dataset (None otherwise)."""
    if isinstance(features, Mapping) or getattr(features, "labels", None) is None:
        return None
    offsets, t = features.node_type_offsets, features.type_index(target)
    return np.asarray(features.labels[offsets[t] : offsets[t + 1]])
