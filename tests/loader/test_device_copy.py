"""The host -> device path (issue 25): the pool's maps page-locked once each (never per batch), a map
unlocked before it is resized or unmapped, batches copied ahead of the trainer within the device
depth, each host lease ended by its copy, plan order and the history's clock kept at hand-over.

The ordering and lease logic is device-agnostic: on the CPU it runs with :class:`SyncCopyEngine`
(the copy done at once, into memory of its own) and a :class:`HostRegistry` whose lock functions
count calls; the CUDA tests run the real engine (stream, events, ``cudaHostRegister``) and skip
without a GPU."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import labelled_store, reference_rows, run

import outre_async as oa
from outre_async.loader import _resources
from outre_async.loader._batch_memory import BatchMemory
from outre_async.loader._device_copy import (
    CompletionWatcher,
    HostRegistry,
    SyncCopyEngine,
    _address,
)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


class CountingLocks:
    """``register`` / ``unregister`` that record calls and refuse what the CUDA runtime would: a range
    locked twice, or unlocking an address that is not locked."""

    def __init__(self) -> None:
        self.locked: dict[int, int] = {}
        self.calls = {"register": 0, "unregister": 0}

    def register(self, addr: int, nbytes: int) -> None:
        assert all(addr + nbytes <= a or a + n <= addr for a, n in self.locked.items()), "range locked twice"
        self.locked[addr] = nbytes
        self.calls["register"] += 1

    def unregister(self, addr: int) -> None:
        assert addr in self.locked, "unlocking an address that is not locked"
        del self.locked[addr]
        self.calls["unregister"] += 1

    def registry(self) -> HostRegistry:
        return HostRegistry(self.register, self.unregister)


def _consistent(registry: HostRegistry, locks: CountingLocks) -> None:
    """Every locked range is exactly a live map's current address and size (so no map was resized or
    moved while locked)."""
    current = {_address(block): len(block) for block, _ in registry._pinned.values()}
    assert current == locks.locked


def test_the_pool_locks_each_map_once_and_unlocks_it_before_resize_or_unmap() -> None:
    locks = CountingLocks()
    registry = locks.registry()
    pool = BatchMemory(64 << 20, 4 * 256, budget=None, registry=registry)
    rng = np.random.default_rng(0)
    live: list[tuple[Any, np.ndarray]] = []

    async def main() -> None:
        for seq in range(120):
            rows = int(rng.integers(2_000, 9_000))  # sizes vary: reuse, mremap and new maps all happen
            lease = await pool.reserve(rows, seq)
            x = pool.matrix(lease, rows, 256)
            x[:] = seq
            assert registry.is_pinned(next(b for b, _ in registry._pinned.values() if _address(b) == x.ctypes.data))
            live.append((lease, x))
            _consistent(registry, locks)
            if len(live) > 2:  # the consumer lets go of the batch before last
                old_lease, old = live.pop(0)
                old_lease.release()
                del old

    run(main())
    stats = pool.stats()
    assert stats["maps_reused"] > 0 and stats["maps_resized"] > 0  # both paths ran
    assert locks.calls["register"] == stats["pinned_registered"] <= stats["maps_new"] + stats["maps_resized"] < 120
    for lease, _ in live:
        lease.release()
    live.clear()
    pool.close()
    assert locks.locked == {} and locks.calls["register"] == locks.calls["unregister"]


def test_the_watcher_runs_callbacks_in_order_once_each_event_completes() -> None:
    class Event:
        def __init__(self) -> None:
            self.done = threading.Event()

        def synchronize(self) -> None:
            assert self.done.wait(10)

    watcher = CompletionWatcher(capacity=3)
    ran: list[int] = []
    events = [Event() for _ in range(3)]
    for i, event in enumerate(events):
        watcher.add(event, lambda i=i: ran.append(i))
    time.sleep(0.05)
    assert ran == []  # nothing completed yet
    events[0].done.set()
    deadline = time.monotonic() + 5
    while ran != [0] and time.monotonic() < deadline:
        time.sleep(0.005)
    assert ran == [0]
    events[2].done.set()
    events[1].done.set()
    watcher.close()  # drains: every callback ran, in stream order
    assert ran == [0, 1, 2]


@pytest.fixture()
def store(tmp_path: Path) -> oa.Dataset:
    return labelled_store(tmp_path / "ds", num_nodes=600, dim=20)


@pytest.fixture()
def sync_engine(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Loaders made in the test copy through a SyncCopyEngine on the CPU, with counted map locks."""
    made: dict[str, Any] = {"locks": CountingLocks()}

    def engine_for(device: torch.device, depth: int) -> SyncCopyEngine:
        made["engine"] = SyncCopyEngine("cpu", registry=made["locks"].registry())
        return made["engine"]

    monkeypatch.setattr(_resources, "copy_engine_for", engine_for)
    return made


@pytest.mark.parametrize("ordered", [False, True])
def test_batches_copied_ahead_are_the_sources_rows_and_each_lease_ends_with_its_copy(
        store: oa.Dataset, sync_engine: dict[str, Any], ordered: bool) -> None:
    feats = reference_rows(store)
    pinned_calls = []
    original = torch.Tensor.pin_memory
    torch.Tensor.pin_memory = lambda self, *a, **k: pinned_calls.append(1) or original(self, *a, **k)  # type: ignore[method-assign]
    try:
        with oa.OutreLoader(store, fanouts=[4, 3], batch_size=32, ordered=ordered, 
                            seed=1, pipeline=oa.PipelineOptions(device_depth=3), io=oa.IOOptions(backend="memory")) as loader:
            seqs = []
            for batch in loader:
                s = loader.stats()["device"]
                assert s["leases_ended_by_copy"] == s["copied"]  # the lease ended at the copy, not at the next batch
                torch.testing.assert_close(batch.x, feats[batch.n_id], rtol=0, atol=0)
                assert batch.y is not None and batch.edge_index.max() < len(batch.n_id)
                seqs.append(batch.seq)
            stats = loader.stats()
    finally:
        torch.Tensor.pin_memory = original  # type: ignore[method-assign]
    assert pinned_calls == []  # no per-batch pinned copy
    assert sorted(seqs) == list(range(len(loader))) and (not ordered or seqs == sorted(seqs))
    dev = stats["device"]
    assert dev["copied"] == len(seqs) and 1 <= dev["most_ahead"] <= 3 and dev["depth"] == 3
    mats = stats["batch_matrices"]
    assert sync_engine["locks"].calls["register"] == mats["pinned_registered"] <= mats["maps_new"] + mats["maps_resized"]
    assert sync_engine["locks"].locked == {}  # all unlocked at close
    assert stats["copy_engine"]["copies"] == len(seqs)


def test_history_under_the_copier_keeps_the_clock_and_the_staleness_bound(
        store: oa.Dataset, sync_engine: dict[str, Any]) -> None:
    """The copier fetches batches ahead, but the history's clock ticks and rows are pulled at
    hand-over: two epochs with pushes between steps keep every realised age within the bound."""
    cfg = oa.HistoryConfig(staleness=6, dim=8, warmup=0)
    with oa.OutreLoader(store, fanouts=[-1, -1], batch_size=32, history=cfg, io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(device_depth=2)) as loader:
        for _ in range(2):
            for batch in loader:
                batch.history.exchange(torch.zeros(len(batch.n_id), 8))
        h = loader.stats()["history"]
    assert h["batches"] == 2 * len(loader) and h["pulled"] > 0
    assert max(h["realised_staleness"]) <= 6


def test_device_depth_is_checked(store: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="device_depth=0 must be an int >= 1"):
        oa.OutreLoader(store, fanouts=[3], batch_size=8, pipeline=oa.PipelineOptions(device_depth=0))


@pytest.mark.parametrize("device", DEVICES)
def test_an_early_break_releases_everything(store: oa.Dataset, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if device == "cpu":
        monkeypatch.setattr(_resources, "copy_engine_for", lambda d, depth: SyncCopyEngine("cpu"))
    with oa.OutreLoader(store, fanouts=[4, 3], batch_size=16, device=device, io=oa.IOOptions(backend="memory")) as loader:
        for i, _ in enumerate(loader):
            if i == 2:
                break
        for _ in loader:  # the next epoch runs whole after the break
            pass
        stats = loader.stats()
    assert stats["batch_matrices"]["used"] == 0  # every lease came back: queued, copied or held


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_come_from_locked_maps_on_a_side_stream(store: oa.Dataset) -> None:
    feats = reference_rows(store)
    pinned_calls = []
    original = torch.Tensor.pin_memory
    torch.Tensor.pin_memory = lambda self, *a, **k: pinned_calls.append(1) or original(self, *a, **k)  # type: ignore[method-assign]
    try:
        with oa.OutreLoader(store, fanouts=[4, 3], batch_size=32, device="cuda", io=oa.IOOptions(backend="memory")) as loader:
            for batch in loader:
                assert batch.x.is_cuda and batch.edge_index.is_cuda and batch.y.is_cuda
                torch.testing.assert_close(batch.x.cpu(), feats[batch.n_id.cpu()], rtol=0, atol=0)
        stats = loader.stats()  # after the close, which unlocks the maps (read inside, 9 of 16 were still locked)
    finally:
        torch.Tensor.pin_memory = original  # type: ignore[method-assign]
    assert pinned_calls == []
    mats = stats["batch_matrices"]
    assert 0 < mats["pinned_registered"] <= mats["maps_new"] + mats["maps_resized"]
    assert mats["pinned_registered"] == mats["pinned_unregistered"]  # unlocked at close
    assert stats["copy_engine"]["engine"] == "cuda" and stats["copy_engine"]["copies"] == len(loader)
    assert stats["device"]["leases_ended_by_copy"] == len(loader)
