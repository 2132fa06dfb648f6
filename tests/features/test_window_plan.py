"""The window plan (issue 26 item 2): the missing rows of a tumbling window of queued batches read
together.  The pure plan against a brute-force reference (which rows merge, the longest prefix of
batches that fits, never more rows than the room), and the feature buffer driven with windows: the
rows come out bit-identical (in memory and through the disk sources), a window never takes more
slots than its piece's share or the slots no queued batch needs, and it reads in fewer I/Os."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run
from fakes import ArraySource

import outre_async as oa
from outre_async.features import detect_io_uring, open_source
from outre_async.features._feature_buffer import Acquisition, FeatureBuffer, Pin
from outre_async.features._window_plan import merged_rows, plan_window

pytestmark = pytest.mark.timeout(120)
DISK_BACKENDS = [pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(), reason="no io_uring")),
                 "pread"]


def reference_merged(own: set[int], queued: set[int], near: int) -> set[int]:
    rows = own | queued
    return {r for r in queued if near >= 1 and any(0 < abs(r - o) <= near for o in rows)}


@pytest.mark.parametrize("seed", range(30))
def test_the_rows_planned_are_the_queued_rows_that_share_a_read(seed: int) -> None:
    rng = np.random.default_rng(seed)
    own = np.unique(rng.integers(0, 200, size=int(rng.integers(0, 20))))
    queued = np.setdiff1d(np.unique(rng.integers(0, 200, size=int(rng.integers(0, 40)))), own)
    near = int(rng.integers(0, 6))
    got = merged_rows(own, queued, near)
    assert set(got.tolist()) == reference_merged(set(own.tolist()), set(queued.tolist()), near)
    assert (np.diff(got) > 0).all()


@pytest.mark.parametrize("seed", range(30))
def test_a_window_is_the_longest_prefix_of_batches_that_fits_the_room(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    own = np.unique(rng.integers(0, 300, size=10))
    missing = [np.setdiff1d(np.unique(rng.integers(0, 300, size=int(rng.integers(0, 30)))), own) for _ in range(8)]
    room, near = int(rng.integers(0, 60)), int(rng.integers(1, 5))
    rows, k = plan_window(own, missing, room, near)
    assert len(rows) <= room  # the plan never exceeds its budget
    prefix = set().union(*(set(m.tolist()) for m in missing[:k]))
    assert set(rows.tolist()) == reference_merged(set(own.tolist()), prefix, near)
    if k < len(missing):  # one batch more would not fit
        more = set().union(*(set(m.tolist()) for m in missing[: k + 1]))
        assert len(reference_merged(set(own.tolist()), more, near)) > room


class Recording(FeatureBuffer):
    """Records, per window read, its slots beside the piece's room and the cold slots it had."""

    windows: list[tuple[int, int, int]]

    def _read_ahead(self, pin: Pin | None, room: int, own: np.ndarray, source: Any) -> Acquisition | None:
        cold, before = self.cold_slots(), self.counters["read_ahead_rows"]
        acq = super()._read_ahead(pin, room, own, source)
        rows = self.counters["read_ahead_rows"] - before  # every request of the window, the piece's and the rest
        if rows:
            self.windows.append((rows, room, cold))
        return acq


def drive(features: np.ndarray, batches: list[np.ndarray], slots: int, source: Any, *, read_ahead: int,
          merge_rows: int, extractors: int = 2) -> Recording:
    """Extract ``batches`` in order through a buffer with every batch pinned when queued (the whole
    epoch queued, as a deep extract queue does), pieces of ``slots / extractors`` rows."""

    async def body() -> Recording:
        buf = Recording(len(features), slots, features.shape[1], read_ahead=read_ahead, merge_rows=merge_rows)
        buf.windows = []
        pins = [buf.pin(b, seq) for seq, b in enumerate(batches)]
        for seq, ids in enumerate(batches):
            out = np.empty((len(ids), features.shape[1]), dtype=np.float32)
            await buf.extract(ids, out, source, piece_rows=slots // extractors, pin=pins[seq])
            assert out.tobytes() == features[ids].tobytes()
        assert buf.pinned_rows() == 0 and buf.free_slots() == slots
        return buf

    return run(body(), timeout=60)


def partition_like_batches(rng: np.random.Generator, n: int, count: int) -> list[np.ndarray]:
    """Batches that each take a few random rows of one contiguous block plus a few rows anywhere."""
    out = []
    for _ in range(count):
        lo = int(rng.integers(0, n - 64))
        block = lo + rng.choice(64, size=12, replace=False)
        out.append(np.unique(np.concatenate([block, rng.integers(0, n, size=4)])).astype(np.int64))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_windows_serve_every_row_and_stay_within_their_room(seed: int) -> None:
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((400, 3)).astype(np.float32)
    batches = partition_like_batches(rng, len(features), 40)
    buf = drive(features, batches, int(rng.integers(20, 120)), ArraySource(features, seed), read_ahead=6, merge_rows=3)
    assert buf.windows  # windows ran: the bounds below could fail
    for taken, room, cold in buf.windows:
        assert taken <= min(room, cold)  # a window never evicts a row a queued batch will take


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    path: Path = tmp_path_factory.mktemp("window") / "d"
    n, dim = 2000, 1024  # 4 KiB rows: one per sector, so merges are the gap rule's alone
    x = np.random.default_rng(3).standard_normal((n, dim)).astype(np.float32)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        w.append_features(x)
    return oa.open_dataset(path), x


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_window_reads_from_disk_are_bit_identical_and_fewer(dataset: Any, backend: str) -> None:
    ds, x = dataset
    batches = partition_like_batches(np.random.default_rng(11), ds.num_nodes, 60)

    async def reads(read_ahead: int) -> tuple[int, int, int]:
        async with open_source(ds, backend, max_in_flight=8, max_gap_bytes=16 << 10) as src:
            assert src.merge_rows == 5  # a 16 KiB hole is 4 rows: ids 5 apart share a read
            buf = await _extract_all(x, batches, src, read_ahead)
            s = src.stats()
            return s["reads_submitted"], s["unique_rows"], len(buf.windows)

    async def _extract_all(x: np.ndarray, batches: list[np.ndarray], src: Any, read_ahead: int) -> Recording:
        buf = Recording(len(x), 600, x.shape[1], read_ahead=read_ahead, merge_rows=src.merge_rows)
        buf.windows = []
        pins = [buf.pin(b, seq) for seq, b in enumerate(batches)]
        for seq, ids in enumerate(batches):
            out = np.empty((len(ids), x.shape[1]), dtype=np.float32)
            await buf.extract(ids, out, src, piece_rows=300, pin=pins[seq])
            assert out.tobytes() == x[ids].tobytes()
        return buf

    alone_ios, alone_rows, none = run(reads(0))
    window_ios, window_rows, windows = run(reads(8))
    assert none == 0 < windows
    assert window_ios < alone_ios  # the union of a window's missing rows merges into fewer reads
    assert window_rows <= alone_rows + len(batches) * 4  # early reads cost few re-reads here


def test_without_merging_reads_nothing_is_read_ahead() -> None:
    """A source whose reads never merge (merge_rows 0: memory) gains nothing from early reads."""
    rng = np.random.default_rng(2)
    features = rng.standard_normal((300, 2)).astype(np.float32)
    buf = drive(features, partition_like_batches(rng, 300, 20), 50, ArraySource(features), read_ahead=6, merge_rows=0)
    assert buf.windows == [] and buf.counters["read_ahead_rows"] == 0
