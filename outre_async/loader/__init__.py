"""The loaders: :class:`OutreLoader` (asyncio pipeline: sample and extract stages, bounded channels,
reorder buffer, the sync bridge's loop thread, partition-mode batching) and the :class:`SyncLoader`
baseline."""

from typing import Any

from .. import _lazy_attribute
from ._batch import OutreBatch
from ._config import LoaderConfig
from ._history_record import HistoryRecord
from ._loader import OutreLoader
from ._options import CacheOptions, IOOptions, PartitionOptions, PipelineOptions, RankOptions
from ._sync_loader import SyncLoader

__all__ = ["CacheOptions", "HistoryRecord", "IOOptions", "LoaderConfig", "OutreBatch", "OutreLoader",
           "PartitionOptions", "PipelineOptions", "RankOptions", "SyncLoader", "profile"]


def __getattr__(name: str) -> Any:
    """``outre_async.loader.profile``, kept where it was published: it lives in the ``profiling``
    room above the loader (which builds on the loader's setup), so it is resolved on first use."""
    return _lazy_attribute(__name__, {"profile": "..profiling"}, name)
