"""Generic asyncio tools that know nothing of graphs: bounded channels with close semantics, the
reorder buffer that restores seed order, a thread that owns an event loop (the sync bridge, the row
reader), and per-thread CPU metering.  The loader is their first user, not their only one (the
feature row reader behind PyG's FeatureStore and layer-wise inference owns a LoopThread too), so
they live apart from it, below every room that needs them; they import nothing of outre_async but
the error tree."""

from ._channel import Channel, ChannelStats, EndOfChannel
from ._cpu_meter import CpuMeter, metered, thread_cpu_call
from ._loop_thread import LoopThread
from ._reorder import ReorderBuffer

__all__ = ["Channel", "ChannelStats", "CpuMeter", "EndOfChannel", "LoopThread", "ReorderBuffer", "metered",
           "thread_cpu_call"]
