"""PyG's interfaces over our store: ``FeatureStore`` / ``GraphStore`` adapters and our sampler as a
``BaseSampler``, so ``NodeLoader((feature_store, graph_store), node_sampler=...)`` reads an on-disk
dataset through our sources.  It sits beside the loader (``pyg -> loader, features, sampling ->
store``): it reuses the loader's loop thread for synchronous reads."""

from __future__ import annotations

from typing import Any

from ..store._dataset import Dataset
from ._feature_store import OutreFeatureStore
from ._graph_store import OutreGraphStore
from ._hetero_batch import to_hetero_batch
from ._node_sampler import OutreNodeSampler

__all__ = ["OutreFeatureStore", "OutreGraphStore", "OutreNodeSampler", "to_hetero_batch", "to_pyg"]


def to_pyg(dataset: Dataset, **feature_options: Any) -> tuple[OutreFeatureStore, OutreGraphStore]:
    """``(feature_store, graph_store)`` over ``dataset``; ``feature_options`` go to :class:`OutreFeatureStore`
    (``backend=``, ``IOConfig`` fields).  Close the feature store when done."""
    return OutreFeatureStore(dataset, **feature_options), OutreGraphStore(dataset)
