"""Foreseen rows in the feature buffer (issue 26, ``loader._foresight``): their place in the eviction order
(after cold rows, before pinned ones), the counts packed beside the pins, and rows that stay equal to the
source whatever is foreseen."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import run
from fakes import ArraySource

from outre_async import ConfigError
from outre_async.features import _buffer_kernels as K
from outre_async.features._feature_buffer import FeatureBuffer

FEATURES = np.random.default_rng(1).standard_normal((300, 5)).astype(np.float32)


async def _batch(buf: FeatureBuffer, src: ArraySource, ids: np.ndarray) -> np.ndarray:
    out = np.full((len(ids), FEATURES.shape[1]), np.nan, dtype=np.float32)
    await buf.extract(ids, out, src)
    return out


def _raw_counts(buf: FeatureBuffer) -> np.ndarray:
    return buf._nodes[:, K.WANTED]


def test_foreseen_rows_are_evicted_after_cold_rows_and_kept_where_lru_would_evict_them() -> None:
    """Rows 0..4 are the least recently used; a batch beyond the queue will need them, so a new batch
    evicts the cold rows 5..9 instead, and the foreseen batch finds 0..4 without a read.  Without the
    foresight the same steps evict 0..4 (the test fails if foresee does nothing)."""

    async def body(foresee: bool) -> list[int]:
        buf, src = FeatureBuffer(300, 10, 5), ArraySource(FEATURES)
        await _batch(buf, src, np.arange(10))
        hold = buf.foresee(np.arange(5)) if foresee else None
        await _batch(buf, src, np.arange(100, 105))
        before = len(src.rows_read)
        np.testing.assert_array_equal(await _batch(buf, src, np.arange(5)), FEATURES[:5])
        if hold is not None:
            hold.release()
            hold.release()  # idempotent
        assert buf.foreseen_rows() == 0 and (_raw_counts(buf) == 0).all()
        return src.rows_read[before:]

    assert run(body(True)) == []
    assert sorted(run(body(False))) == list(range(5))


def test_pinned_rows_outlast_foreseen_ones_and_foresight_never_makes_a_batch_wait() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(300, 6, 5), ArraySource(FEATURES)
        await _batch(buf, src, np.arange(6))
        pin = buf.pin(np.arange(3))  # queued: rows 0..2
        hold = buf.foresee(np.arange(3, 6))  # beyond the queue: rows 3..5
        await _batch(buf, src, np.arange(200, 203))  # no cold row: evicts the foreseen ones, not the pinned
        assert (buf._nodes[np.arange(3), K.SLOT] >= 0).all()
        assert (buf._nodes[np.arange(3, 6), K.SLOT] < 0).all()
        await _batch(buf, src, np.arange(210, 216))  # only pinned rows on standby: evicted, no wait
        assert buf.stats()["acquire_waits"] == 0
        pin.release()
        hold.release()
        assert buf.pinned_rows() == 0 and buf.foreseen_rows() == 0 and (_raw_counts(buf) == 0).all()

    run(body(), timeout=10)


def test_a_row_pinned_and_foreseen_goes_to_the_foreseen_list_when_its_batch_takes_it() -> None:
    """The loader's order: a batch beyond the queue is foreseen, then pinned when sampled (its hold
    dropped), and a later foreseen batch needs the same row: after the taking batch releases it the
    row is foreseen, not cold, so a cold row goes first."""

    async def body() -> None:
        buf, src = FeatureBuffer(300, 5, 5), ArraySource(FEATURES)
        await _batch(buf, src, np.array([7, 8, 9]))  # cold: two empty slots, then 7, 8, 9
        later = buf.foresee(np.array([1]))  # a batch further ahead needs row 1
        early = buf.foresee(np.array([1, 2]))
        pin = buf.pin(np.array([1, 2]))
        early.release()  # pinned now: the hold is redundant
        assert _raw_counts(buf)[1] == 1 + K.FORESEE and _raw_counts(buf)[2] == 1
        out = np.empty((2, 5), np.float32)
        await buf.extract(np.array([1, 2]), out, src, pin=pin)  # into the empty slots; released 1 then 2
        assert buf.stats()["free_slots"] == 5
        await _batch(buf, src, np.array([50, 51, 52]))  # evicts 7, 8, 9
        assert buf._nodes[1, K.SLOT] >= 0 and buf._nodes[2, K.SLOT] >= 0
        await _batch(buf, src, np.array([60]))  # cold had 1 before 2 were 1 cold; 1 is foreseen, so 2 goes
        assert buf._nodes[1, K.SLOT] >= 0 and buf._nodes[2, K.SLOT] < 0
        later.release()
        assert (_raw_counts(buf) == 0).all() and buf.foreseen_rows() == 0

    run(body(), timeout=10)


def test_foreseen_slots_count_as_room_for_windows_and_int32_ids_are_kept_as_they_are() -> None:
    buf = FeatureBuffer(300, 8, 5)
    hold = buf.foresee(np.arange(4, dtype=np.int32))
    assert hold.ids.dtype == np.int32 and buf.foreseen_rows() == 4
    assert buf.cold_slots() == 8  # empty slots; a foreseen row without a slot takes none
    hold.release()
    assert (_raw_counts(buf) == 0).all()


def test_next_use_eviction_refuses_foresight_with_a_named_error() -> None:
    buf = FeatureBuffer(300, 8, 5, policy="next-use")
    with pytest.raises(ConfigError, match="lru-lookahead"):
        buf.foresee(np.arange(3))


@pytest.mark.parametrize("slots", [1, 4, 32])
def test_rows_equal_the_source_with_pins_and_foresights_coming_and_going(slots: int) -> None:
    """Random batches extracted concurrently while holds are taken and dropped in the loader's order
    (foresee, pin, drop the hold, extract): every row equals the source, and nothing stays counted."""

    async def body() -> None:
        rng = np.random.default_rng(slots)
        buf, src = FeatureBuffer(300, slots, 5), ArraySource(FEATURES, seed=slots)
        batches = [np.unique(rng.integers(0, 80, size=int(rng.integers(1, 30)))) for _ in range(30)]
        holds = {i: buf.foresee(batches[i].astype(np.int32)) for i in range(0, 30, 3)}
        sem = asyncio.Semaphore(3)

        async def one(i: int) -> None:
            async with sem:
                pin = buf.pin(batches[i], i)
                if i in holds:
                    holds.pop(i).release()
                out = np.full((len(batches[i]), 5), np.nan, dtype=np.float32)
                await buf.extract(batches[i], out, src, piece_rows=int(rng.integers(1, slots + 1)), pin=pin)
                np.testing.assert_array_equal(out, FEATURES[batches[i]])

        async with asyncio.TaskGroup() as tg:
            for i in range(len(batches)):
                tg.create_task(one(i))
        assert not holds and buf.free_slots() == slots
        assert buf.pinned_rows() == 0 and buf.foreseen_rows() == 0 and (_raw_counts(buf) == 0).all()

    run(body(), timeout=30)
