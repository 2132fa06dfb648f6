"""Feature, neighbour and historical-embedding caches and the budget split (installed as ``outre_async.cache``).

Built by the cache issues; see design §7-8.  The global neighbour cache is the partitioner issue's.
"""

from ._neighbor_cache import NeighborCache

__all__ = ["NeighborCache"]
