"""A window is read as one request per batch it serves, at that batch's priority (issue 26: the disk
idled between windows while every batch of a window waited for all of it), and large pieces are
copied off the event loop.  The request groups against a brute-force reference; batches go as their
own request lands; the io_uring source submits by priority; a cancelled copy keeps its slots until
the copy thread is done with them; ``aclose`` ends the window requests still reading."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run

import outre_async as oa
from outre_async.features import _buffer_kernels, detect_io_uring, open_source
from outre_async.features._feature_buffer import COPY_OFF_LOOP_BYTES, FeatureBuffer
from outre_async.features._read_priority import READ_PRIORITY, URGENT, read_priority
from outre_async.features._window_plan import plan_window, window_groups

pytestmark = pytest.mark.timeout(120)


def reference_groups(own: set[int], rows: list[int], missing: list[set[int]], near: int) -> list[int]:
    union = sorted(own | set(rows))
    extents, cur = [], [union[0]]
    for a, b in zip(union, union[1:], strict=False):
        if b - a <= near:
            cur.append(b)
        else:
            extents.append(cur)
            cur = [b]
    extents.append(cur)
    group = {}
    for ext in extents:
        g = 0 if own.intersection(ext) else min(k + 1 for k, m in enumerate(missing) if m.intersection(ext))
        group.update(dict.fromkeys(ext, g))
    return [group[r] for r in rows]


@pytest.mark.parametrize("seed", range(30))
def test_each_planned_row_is_read_with_the_first_batch_that_needs_its_merged_read(seed: int) -> None:
    rng = np.random.default_rng(seed)
    own = np.unique(rng.integers(0, 300, size=int(rng.integers(0, 12))))
    missing = [np.setdiff1d(np.unique(rng.integers(0, 300, size=int(rng.integers(0, 30)))), own) for _ in range(6)]
    near = int(rng.integers(1, 5))
    rows, k = plan_window(own, missing, 10**6, near)
    got = window_groups(own, rows, missing[:k], near)
    want = reference_groups(set(own.tolist()), rows.tolist(), [set(m.tolist()) for m in missing[:k]], near) if len(rows) else []
    assert got.tolist() == want


class GatedSource:
    """Reads rows into slots when the test opens the request's gate (keyed by its smallest id); records
    each request's ids and the read priority it was made at."""

    def __init__(self, features: np.ndarray) -> None:
        self.features = features
        self.requests: list[tuple[list[int], int]] = []
        self.gates: dict[int, asyncio.Event] = {}

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        self.requests.append((sorted(ids.tolist()), READ_PRIORITY.get()))
        gate = self.gates.setdefault(int(ids.min()), asyncio.Event())
        await gate.wait()
        buffer[slots] = self.features[ids]

    def open(self, first_id: int) -> None:
        self.gates.setdefault(first_id, asyncio.Event()).set()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_batches_of_a_window_go_as_their_own_request_lands() -> None:
    features = np.arange(200 * 2, dtype=np.float32).reshape(200, 2)
    # the extracting batch and three queued ones, each a pair of neighbours far from the others
    batches = [np.array([10, 11]), np.array([50, 51, 10]), np.array([90, 91]), np.array([130, 131, 50])]

    async def body() -> None:
        buf = FeatureBuffer(len(features), 64, 2, read_ahead=8, merge_rows=1)
        src = GatedSource(features)
        pins = [buf.pin(b, seq) for seq, b in enumerate(batches)]
        outs = [np.zeros((len(b), 2), np.float32) for b in batches]
        lead = asyncio.ensure_future(buf.extract(batches[0], outs[0], src, pin=pins[0]))
        await settle()
        # four requests: the piece's own, then one per queued batch, each at its batch's priority
        assert sorted(src.requests) == sorted([([10, 11], pins[0].order), ([50, 51], pins[1].order),
                                               ([90, 91], pins[2].order), ([130, 131], pins[3].order)])
        assert buf.counters["window_requests"] == 3 and buf.counters["window_batches"] == 3
        src.open(10)
        await lead
        third = asyncio.ensure_future(buf.extract(batches[2], outs[2], src, pin=pins[2]))
        second = asyncio.ensure_future(buf.extract(batches[1], outs[1], src, pin=pins[1]))
        src.open(90)
        await third  # its request landed: it goes while the second batch's is still out
        await settle()
        assert not second.done()
        src.open(50)
        src.open(130)
        await second
        await buf.extract(batches[3], outs[3], src, pin=pins[3])
        assert len(src.requests) == 4  # nothing read twice
        for b, out in zip(batches, outs, strict=True):
            assert out.tobytes() == features[b].tobytes()
        await buf.aclose()
        assert buf.free_slots() == buf.num_slots and buf.pinned_rows() == 0

    run(body(), timeout=30)


def test_aclose_ends_window_requests_still_reading_and_frees_their_slots() -> None:
    features = np.arange(200 * 2, dtype=np.float32).reshape(200, 2)
    batches = [np.array([10, 11]), np.array([50, 51]), np.array([90, 91])]

    async def body() -> None:
        buf = FeatureBuffer(len(features), 64, 2, read_ahead=8, merge_rows=1)
        src = GatedSource(features)
        pins = [buf.pin(b, seq) for seq, b in enumerate(batches)]
        out = np.zeros((2, 2), np.float32)
        lead = asyncio.ensure_future(buf.extract(batches[0], out, src, pin=pins[0]))
        await settle()
        src.open(10)
        await lead
        assert len(buf._window_reads) == 2  # the queued batches' requests, never opened
        for p in pins:
            p.release()
        await buf.aclose()
        assert not buf._window_reads and buf.free_slots() == buf.num_slots

    run(body(), timeout=30)


@pytest.mark.skipif(not detect_io_uring(), reason="no io_uring")
def test_io_uring_submits_the_earlier_batchs_reads_first(tmp_path: Path) -> None:
    n, dim = 512, 1024
    x = np.random.default_rng(5).standard_normal((n, dim)).astype(np.float32)
    with oa.DatasetWriter(tmp_path / "d", num_nodes=n, feature_dim=dim, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        w.append_features(x)
    ds = oa.open_dataset(tmp_path / "d")

    async def body() -> list[str]:
        done: list[str] = []
        async with open_source(ds, "io_uring", max_in_flight=1, max_gap_bytes=0) as src:
            async def read(ids: np.ndarray, priority: int, name: str) -> None:
                out = np.empty((len(ids), dim), np.float32)
                with read_priority(priority):
                    await src.read_rows(ids, out)
                assert out.tobytes() == x[ids].tobytes()
                done.append(name)

            late = asyncio.ensure_future(read(np.arange(0, n, 4), 10, "late"))  # 128 reads, one at a time
            await asyncio.sleep(0)
            early = asyncio.ensure_future(read(np.array([1, 3]), 1, "early"))
            await asyncio.gather(late, early)
        return done

    assert run(body()) == ["early", "late"]  # first come, first served would finish "late" first
    assert READ_PRIORITY.get() == URGENT


def test_a_cancelled_piece_keeps_its_slots_until_the_copy_thread_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    dim = 1024
    rows = COPY_OFF_LOOP_BYTES // (4 * dim) + 8  # a piece large enough to be copied off the loop
    features = np.random.default_rng(1).standard_normal((rows * 2, dim)).astype(np.float32)
    entered, go = threading.Event(), threading.Event()
    real = _buffer_kernels.gather_rows

    def slow_gather(data: np.ndarray, slots: np.ndarray, out: np.ndarray) -> None:
        assert threading.current_thread().name.startswith("outre-copy")
        entered.set()
        go.wait(10)
        real(data, slots, out)

    monkeypatch.setattr(_buffer_kernels, "gather_rows", slow_gather)

    class Memory:
        async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
            buffer[slots] = features[ids]

    async def body() -> None:
        buf = FeatureBuffer(len(features), rows, dim)
        ids = np.arange(rows)
        out = np.empty((rows, dim), np.float32)
        task = asyncio.ensure_future(buf.extract(ids, out, Memory()))
        while not entered.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        await settle()
        assert not task.done() and buf.free_slots() == 0  # the copy still reads the slots
        go.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert buf.free_slots() == rows
        assert out.tobytes() == features[ids].tobytes()  # the copy ran to its end
        await buf.aclose()
        assert buf._copier is None

    run(body(), timeout=30)


def test_small_pieces_are_copied_on_the_loop() -> None:
    features = np.arange(40, dtype=np.float32).reshape(20, 2)

    class Memory:
        async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
            buffer[slots] = features[ids]

    async def body() -> Any:
        buf = FeatureBuffer(20, 20, 2)
        out = np.empty((5, 2), np.float32)
        await buf.extract(np.array([3, 1, 4, 1, 5]), out, Memory())
        assert out.tobytes() == features[[3, 1, 4, 1, 5]].tobytes()
        return buf._copier

    assert run(body()) is None
