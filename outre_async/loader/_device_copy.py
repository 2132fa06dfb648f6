"""Host -> device: batches copied on their own stream, ahead of the trainer, from page-locked matrices.

Three parts, so that the ordering and the leases are the same code on every device and tested on
the CPU; only the stream and event calls need a GPU:

- :class:`HostRegistry` page-locks the maps of the batch-matrix pool (``_batch_memory``) *once per
  map* (``cudaHostRegister``), and unlocks a map before it is resized (``mremap``) or unmapped.  A
  batch matrix is then DMA-able where the extractor wrote it: no per-batch ``pin_memory()`` (which
  allocated a pinned tensor and copied the whole matrix into it before the real copy;
  ``tests/loader/test_device_copy.py`` checks no such copy is made).
  Why not allocate the pool as pinned torch tensors instead: torch's caching host allocator rounds
  every block up to a power of two and never gives pages back, while
  the pool's own maps are sized to the batch, resized in place and unmapped past the budget.
- :class:`CopyEngine` issues a batch's copies and says when they are done.  :class:`CudaCopyEngine`:
  copies on a dedicated stream, an event recorded after them; the consumer's stream waits on the
  event (``wait_event``, no host sync) and the tensors are marked used on it (``record_stream``) so
  the caching allocator does not hand their memory out while the trainer still reads it.
  :class:`SyncCopyEngine`: the same contract done synchronously (the copy is complete on return),
  which is what the CPU tests drive.
- :class:`CompletionWatcher`: one thread owned by the engine runs each copy's callback once its event
  has completed (events complete in stream order, so one FIFO suffices); the callback gives the
  batch's host lease back on the loop thread.  So a host matrix returns to the pool as soon as its
  bytes are on the device, not when the next batch reaches the trainer.

Device memory: with ``device_depth = d`` batches copied ahead, at most ``d`` batches are being copied
or queued on the device, one is the trainer's and one more is the previous batch its loop variable
still holds while ``next()`` runs: ``(d + 2) x`` the largest batch's device bytes (docs/tutorials/gpu.md, "Device
memory").
"""

from __future__ import annotations

import ctypes
import mmap
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._history_record import HistoryRecord

_BATCH_KEYS = ("x", "edge_index", "n_id", "e_id", "input_id", "y")


class HostRegistry:
    """Which pool maps are page-locked; ``register(addr, nbytes)`` / ``unregister(addr)`` do the work
    (``cudaHostRegister`` / ``cudaHostUnregister`` on CUDA, see :func:`cuda_registry`).

    Only the loop thread calls :meth:`pin` and :meth:`unpin` (the pool's owner), so no lock."""

    def __init__(self, register: Callable[[int, int], None], unregister: Callable[[int], None]) -> None:
        self._register, self._unregister = register, unregister
        self._pinned: dict[int, tuple[mmap.mmap, int]] = {}  # id(map) -> (map, address registered)
        self.counters = {"registered": 0, "unregistered": 0, "bytes": 0}

    def pin(self, block: mmap.mmap) -> None:
        """Page-lock ``block`` unless it is already (a recycled map costs nothing)."""
        if id(block) in self._pinned or len(block) == 0:
            return
        addr = _address(block)
        self._register(addr, len(block))
        self._pinned[id(block)] = (block, addr)
        self.counters["registered"] += 1
        self.counters["bytes"] += len(block)

    def unpin(self, block: mmap.mmap) -> None:
        """Unlock ``block`` before it is resized or unmapped (a no-op for a map never pinned)."""
        entry = self._pinned.pop(id(block), None)
        if entry is not None:
            self._unregister(entry[1])
            self.counters["unregistered"] += 1
            self.counters["bytes"] -= len(block)

    def unpin_all(self) -> None:
        """At the pool's close: live matrices keep their maps, but no longer locked."""
        for block, _ in list(self._pinned.values()):
            self.unpin(block)

    def is_pinned(self, block: mmap.mmap) -> bool:
        return id(block) in self._pinned


def _address(block: mmap.mmap) -> int:
    """The map's address.  The ctypes view exports the buffer only for this expression: a map with
    an export could not be resized or closed later."""
    return ctypes.addressof(ctypes.c_char.from_buffer(block))


def cuda_registry() -> HostRegistry:
    """A registry that page-locks through the CUDA runtime (flags 0: portable to the current context)."""
    cudart = torch.cuda.cudart()

    def register(addr: int, nbytes: int) -> None:
        torch.cuda.check_error(cudart.cudaHostRegister(addr, nbytes, 0))

    def unregister(addr: int) -> None:
        torch.cuda.check_error(cudart.cudaHostUnregister(addr))

    return HostRegistry(register, unregister)


@dataclass(slots=True)
class Transfer:
    """One batch's copies: its tensors on the device, and what the consumer waits for."""

    tensors: dict[str, torch.Tensor]
    event: Any = None                        # torch.cuda.Event; None: complete on return (SyncCopyEngine)
    waited: bool = field(default=False)


Decode = Callable[[torch.Tensor], torch.Tensor]


class CopyEngine:
    """Contract: :meth:`submit` issues the copies of ``host`` (tensors by name) and returns at once;
    ``decode`` (``features._decode.RowDecoder.decode``), when given, turns the copied ``x`` (held
    words) into the delivered dtype on the device, ordered after its copy and before the batch's
    completion, so a trainer waiting for the copy waits for its decode too; ``on_done`` runs (on any
    thread) once they are complete; :meth:`wait` makes the calling thread's work wait for them (call
    it on the consumer's thread); :meth:`close` waits for every copy issued and stops the engine's thread."""

    device: torch.device
    registry: HostRegistry | None = None

    def submit(self, host: dict[str, torch.Tensor], on_done: Callable[[], None], decode: Decode | None = None) -> Transfer:
        raise NotImplementedError

    def wait(self, transfer: Transfer) -> None:
        transfer.waited = True

    def close(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}


class SyncCopyEngine(CopyEngine):
    """The contract done synchronously on ``device`` (the CPU in tests): each tensor is copied into
    memory of its own (so the host matrix can go back to the pool) and ``on_done`` runs before
    :meth:`submit` returns."""

    def __init__(self, device: torch.device | str = "cpu", registry: HostRegistry | None = None) -> None:
        self.device, self.registry = torch.device(device), registry
        self.counters = {"copies": 0, "bytes": 0}

    def submit(self, host: dict[str, torch.Tensor], on_done: Callable[[], None], decode: Decode | None = None) -> Transfer:
        tensors = _decoded({k: t.to(self.device, copy=True) for k, t in host.items()}, decode)
        self.counters["copies"] += 1
        self.counters["bytes"] += sum(t.numel() * t.element_size() for t in host.values())
        on_done()
        return Transfer(tensors)

    def stats(self) -> dict[str, Any]:
        return {"engine": "sync", **self.counters}


class CompletionWatcher:
    """One thread that waits for each event in turn and then runs its callback.  Bounded: the loader
    never has more than ``capacity`` copies outstanding (its device depth), so :meth:`add` never waits;
    a full queue is a bug, reported as such."""

    def __init__(self, capacity: int) -> None:
        self._queue: queue.Queue[tuple[Any, Callable[[], None]] | None] = queue.Queue(capacity + 1)
        self._thread = threading.Thread(target=self._run, name="outre-copy-watcher", daemon=True)
        self._thread.start()

    def add(self, event: Any, callback: Callable[[], None]) -> None:
        try:
            self._queue.put_nowait((event, callback))
        except queue.Full:
            raise ConfigError("more host->device copies outstanding than the device depth allows; "
                              "this is a bug in the loader, please report it") from None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            event, callback = item
            event.synchronize()  # releases the GIL while it waits
            callback()

    def close(self) -> None:
        """Run the callbacks of every copy issued, then stop the thread."""
        self._queue.put(None)
        self._thread.join()


class CudaCopyEngine(CopyEngine):
    """Copies on a dedicated CUDA stream (see the module); ``registry`` page-locks the pool's maps."""

    def __init__(self, device: torch.device, depth: int) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.registry = cuda_registry()
        self.watcher = CompletionWatcher(depth + 2)
        self.counters = {"copies": 0, "bytes": 0, "pageable_tensors": 0}

    def submit(self, host: dict[str, torch.Tensor], on_done: Callable[[], None], decode: Decode | None = None) -> Transfer:
        with torch.cuda.stream(self.stream):
            tensors = _decoded({k: t.to(self.device, non_blocking=True) for k, t in host.items()}, decode)
            event = torch.cuda.Event()
            event.record(self.stream)
        self.counters["copies"] += 1
        self.counters["bytes"] += sum(t.numel() * t.element_size() for t in host.values())
        # small index tensors come from pageable numpy memory: their copy is staged by the driver
        self.counters["pageable_tensors"] += sum(not t.is_pinned() for t in host.values())
        def done() -> None:  # holds ``host`` until the copy is complete: the matrix goes back to the pool after
            on_done()
            host.clear()

        self.watcher.add(event, done)
        return Transfer(tensors, event)

    def wait(self, transfer: Transfer) -> None:
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_event(transfer.event)
        for t in transfer.tensors.values():
            t.record_stream(consumer)
        transfer.waited = True

    def close(self) -> None:
        self.watcher.close()
        self.stream.synchronize()

    def stats(self) -> dict[str, Any]:
        return {"engine": "cuda", **self.counters}


def _decoded(tensors: dict[str, torch.Tensor], decode: Decode | None) -> dict[str, torch.Tensor]:
    """``tensors`` with ``x`` decoded on its device (on the engine's stream: see :class:`CopyEngine`)."""
    if decode is not None and "x" in tensors:
        tensors["x"] = decode(tensors["x"])
    return tensors


def copy_engine_for(device: torch.device, depth: int) -> CopyEngine | None:
    """The engine of a loader on ``device``: None on the CPU (batches stay where they were built)."""
    if device.type == "cuda":
        return CudaCopyEngine(device, depth)
    return None


def wait_on_own_stream(transfer: Transfer | None, record: HistoryRecord | None, engine: CopyEngine) -> None:
    """The sync bridge's consumer thread: when it trains on a CUDA stream other than the device's
    default one (which already waits for the copy, at hand-over), that stream waits for a batch's
    ``transfer`` too, and its history ``record`` follows (``BatchHandles``)."""
    device = engine.device
    if transfer is None or device.type != "cuda":
        return
    if torch.cuda.current_stream(device) != torch.cuda.default_stream(device):
        engine.wait(transfer)
        if record is not None:  # its arrays came over in one non_blocking copy on the loop's stream
            record.follow()


def host_tensors(batch: Any) -> dict[str, torch.Tensor]:
    """The tensors of a batch that go to the device, by name."""
    out = {}
    for key in _BATCH_KEYS:
        value = getattr(batch, key, None)
        if isinstance(value, torch.Tensor):
            out[key] = value
    return out
