"""Neighbour sampling: the numba sampler kernels, the :class:`NeighborSampler` around them (and the
per-edge-type :class:`HeteroNeighborSampler` of typed datasets), the epoch plan, and the batch items it
is made of (:class:`BatchItem`, planned by an :class:`Items`)."""

from ._edge_items import EdgeItems, EdgeTargets, NegativeSpec
from ._hetero_sampler import HeteroNeighborSampler, HeteroSampledSubgraph
from ._items import BatchItem, Items, MacroRef, NodeTargets, SeedItems
from ._plan import plan_epoch
from ._sampler import NeighborSampler, SampledSubgraph, sample_neighbors

__all__ = ["BatchItem", "EdgeItems", "EdgeTargets", "HeteroNeighborSampler", "HeteroSampledSubgraph", "Items", "MacroRef",
           "NegativeSpec", "NeighborSampler", "NodeTargets", "SampledSubgraph", "SeedItems", "plan_epoch", "sample_neighbors"]
