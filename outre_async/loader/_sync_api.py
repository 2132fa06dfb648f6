"""The loader from synchronous code: ``for batch in loader``, ``loader.start()``, ``with loader``.

The pipeline runs on an event loop; synchronous callers get one owned loop thread (the sync bridge,
``aio._loop_thread``) per loader, made on first use under a lock (two threads' first iterations make
one bridge) and closed by :meth:`SyncIteration.close`, ``with``, or the garbage-collection finalizer.
Each ``for`` hands its epoch's batches across the bridge one at a time (bounded), and on a device
waits on the trainer's own stream for each batch's copy.  The loader itself supplies what this mixin
declares below (its resources, the open and epoch coroutines, the fork check).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncGenerator, Iterator
from typing import Self

from ..errors import ConfigError
from ..aio._loop_thread import LoopThread
from ..store._dataset import Dataset
from ..store._safe_read import fd_exhausted
from ._batch import OutreBatch, batch_handles
from ._device_copy import wait_on_own_stream
from ._epoch_rule import EpochToken
from ._resources import ResourceBox, Resources


class SyncIteration:
    """The sync half of :class:`~outre_async.OutreLoader` (a mixin: the loader sets the fields below)."""

    dataset: Dataset
    _bridge: LoopThread | None
    _bridge_lock: threading.Lock
    _finalizer: weakref.finalize | None
    _box: ResourceBox

    @property
    def _res(self) -> Resources | None:
        return self._box.res

    async def open(self) -> None:
        raise NotImplementedError  # the loader's

    def _check_process(self) -> None:
        raise NotImplementedError  # the loader's

    def _one_epoch(self, token: EpochToken) -> AsyncGenerator[OutreBatch, None]:
        raise NotImplementedError  # the loader's

    def __iter__(self) -> Iterator[OutreBatch]:
        return self._sync_epoch(self._sync_bridge())

    def start(self) -> Self:
        """Open the resources now, from synchronous code (``await loader.open()`` is the async
        form); otherwise the first batch does it.  What it costs, e.g. reading a profile's static
        feature cache, is then paid before the training loop starts rather than inside its first epoch."""
        self._sync_bridge().call(self.open)
        return self

    def _sync_bridge(self) -> LoopThread:
        with self._bridge_lock:
            return self._bridge_locked()

    def _bridge_locked(self) -> LoopThread:
        self._check_process()
        if self._res is not None and self._bridge is None:
            raise ConfigError("this loader is open in async mode; use `async for`, or a separate loader")
        if self._bridge is None:
            try:
                self._bridge = LoopThread()
            except OSError as exc:  # the loop's selector and self-pipe need descriptors too
                named = fd_exhausted(exc, f"starting a loader of {self.dataset.path}")
                if named is None:
                    raise
                raise named from exc
            self._finalizer = weakref.finalize(self, close_bridge, self._bridge, self._box)
        return self._bridge

    def _sync_epoch(self, bridge: LoopThread) -> Iterator[OutreBatch]:
        agen = bridge.call(self._make_epoch)
        try:
            while True:
                try:
                    batch = bridge.call(agen.__anext__)
                except StopAsyncIteration:
                    return
                if self._res is not None and self._res.engine is not None:
                    handles = batch_handles(batch)
                    wait_on_own_stream(handles.transfer, handles.history, self._res.engine)
                yield batch
        finally:
            if not bridge.closed:
                bridge.call(agen.aclose)

    async def _make_epoch(self) -> AsyncGenerator[OutreBatch, None]:
        return self._one_epoch(EpochToken())  # the sync generator closes it when dropped

    def close(self) -> None:
        """Shut down the sync bridge: resources closed on its loop, thread joined (idempotent)."""
        bridge, self._bridge = self._bridge, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if bridge is not None:
            close_bridge(bridge, self._box)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_bridge(bridge: LoopThread, box: ResourceBox) -> None:
    """Close the resources on the bridge's loop, then stop and join it (also the GC finalizer, which
    may run on any thread, the loop's own included: ``LoopThread.close`` handles both)."""
    bridge.close(box.close)
