"""Neighbour sampling: the numba sampler kernels, the :class:`NeighborSampler` around them, the epoch plan."""

from ._plan import plan_epoch
from ._sampler import NeighborSampler, SampledSubgraph, sample_neighbors

__all__ = ["NeighborSampler", "SampledSubgraph", "plan_epoch", "sample_neighbors"]
