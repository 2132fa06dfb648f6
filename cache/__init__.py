"""The neighbour-list and historical-embedding caches (installed as ``outre_async.cache``; design §7-8).

``_neighbor_cache``: the global neighbour cache partition mode samples through (hot nodes' lists
held in memory); ``_history_config``: :class:`HistoryConfig` and the history's byte formula;
``_history``: the slot table of h^(L-1) rows (on the host or the training device), candidate ranking and
the per-batch pull/push decision; ``_device_fence``: the events that order a device table's rows between
the loader's and the trainer's CUDA streams.
The feature caches (the buffer, the profile's static rows) are ``features/``; the split of one memory
budget between all of them is ``plan/``; the loader owns the history's loop-thread side (``loader/_history``).
"""

from ._history import HistoryDecision, HistoryTable
from ._history_config import HistoryConfig, history_bytes
from ._neighbor_cache import NeighborCache

__all__ = ["HistoryConfig", "HistoryDecision", "HistoryTable", "NeighborCache", "history_bytes"]
