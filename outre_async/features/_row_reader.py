"""Synchronous row reads through an asynchronous :class:`FeatureSource`, for PyG's synchronous APIs.

PyG calls ``FeatureStore.multi_get_tensor`` from plain code (a ``NodeLoader``'s collate, possibly in a
notebook whose own loop is running), while our sources are coroutines bound to one event loop (an
io_uring ring per loop).  So the reader owns one :class:`LoopThread`, opens the source *on* it and
waits for each read there: the caller's thread never runs a loop, so a running loop in the caller is
no obstacle.  ``close()`` closes the source on its loop, then stops and joins the thread; a
garbage-collection finalizer does the same for a reader nobody closed.

Forked processes (a PyG ``DataLoader`` with ``num_workers > 0``): the child inherits this object but
not its thread, so waiting on the inherited loop would hang forever.  The reader remembers the pid
that opened it; in another process it opens a fresh thread and source of its own on first use and
leaves the parent's alone (the child never touches the parent's loop, not even to close it).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from ..errors import PipelineClosed
from ..aio._loop_thread import LoopThread
from ._source import FeatureSource


class RowReader:
    """Reads rows of one feature source synchronously; ``open_fn`` opens the source (on the loop)."""

    def __init__(self, open_fn: Callable[[], FeatureSource], name: str = "outre-rows") -> None:
        self._open_fn, self._name = open_fn, name
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._thread = LoopThread(self._name)
        try:
            self.source: FeatureSource = self._thread.call(_opened(self._open_fn))
        except BaseException:
            self._thread.close()
            raise
        self._finalizer = weakref.finalize(self, _shutdown, self._thread, self.source, self._pid)

    def _in_this_process(self) -> None:
        """After a fork: drop the parent's loop (never waited on here) and open our own."""
        if self._pid != os.getpid() and not self._thread.closed:
            self._finalizer.detach()
            self._start()

    @property
    def dim(self) -> int:
        return self.source.dim

    @property
    def num_rows(self) -> int:
        return self.source.num_rows

    def read(self, ids: np.ndarray) -> np.ndarray:
        """``features[ids]`` as a new float32 array ``[len(ids), dim]``."""
        return self.read_many([ids])[0]

    def read_many(self, id_lists: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One array per id list, all read concurrently on the loop (one wait for the caller)."""
        if self._thread.closed:
            raise PipelineClosed("this feature reader is closed; open a new feature store")
        self._in_this_process()
        outs = [np.empty((len(np.asarray(ids)), self.source.dim), dtype=np.float32) for ids in id_lists]

        async def read_all() -> None:
            await asyncio.gather(*(self.source.read_rows(np.asarray(ids), out)
                                   for ids, out in zip(id_lists, outs, strict=True)))

        self._thread.call(read_all)
        return outs

    def close(self) -> None:
        """Close the source on its loop, then stop and join the loop thread (idempotent)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._thread.closed


def _opened(open_fn: Callable[[], FeatureSource]) -> Callable[[], Awaitable[FeatureSource]]:
    async def run() -> FeatureSource:
        return open_fn()

    return run


def _shutdown(thread: LoopThread, source: FeatureSource, pid: int) -> None:
    if thread.closed or pid != os.getpid():  # a forked child must not wait on its parent's loop
        return
    try:
        thread.call(source.aclose)
    finally:
        thread.close()
