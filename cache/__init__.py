"""Feature, neighbour and historical-embedding caches and the budget split (installed as ``outre_async.cache``).

Built by the cache issues; see design §7-8.  The global neighbour cache is the partitioner issue's.
"""

from ._history import HistoryDecision, HistoryTable
from ._history_config import HistoryConfig, history_bytes
from ._neighbor_cache import NeighborCache

__all__ = ["HistoryConfig", "HistoryDecision", "HistoryTable", "NeighborCache", "history_bytes"]
