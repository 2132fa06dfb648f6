"""The loaders: :class:`OutreLoader` (asyncio pipeline: sample and extract stages, bounded channels,
reorder buffer, the sync bridge's loop thread, partition-mode batching) and the :class:`SyncLoader`
baseline."""

from ._batch import OutreBatch
from ._config import LoaderConfig
from ._history import HistoryRecord
from ._loader import OutreLoader
from ._profile_api import profile
from ._sync_loader import SyncLoader

__all__ = ["HistoryRecord", "LoaderConfig", "OutreBatch", "OutreLoader", "SyncLoader", "profile"]
