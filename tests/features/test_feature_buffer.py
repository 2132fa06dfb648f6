"""The feature buffer against a plain in-memory reference: hits, shared in-flight rows, eviction, errors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import run
from fakes import ArraySource

from outre_async import ConfigError
from outre_async.features import _buffer_kernels as K
from outre_async.features._feature_buffer import FeatureBuffer

FEATURES = np.random.default_rng(0).standard_normal((200, 6)).astype(np.float32)


async def _batch(buf: FeatureBuffer, src: ArraySource, ids: np.ndarray) -> np.ndarray:
    acq = await buf.acquire(ids)
    try:
        await buf.fill(acq, src)
        return buf.gather(acq)
    finally:
        buf.release(acq)


def test_undersized_buffer_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="smaller than"):
        FeatureBuffer(100, 10, 4, min_slots=11)

    async def body() -> None:
        buf = FeatureBuffer(200, 8, 6)
        with pytest.raises(ConfigError, match="cannot fit"):
            await buf.acquire(np.arange(9))

    run(body())


def test_rows_are_correct_and_reused_without_io() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 50, 6), ArraySource(FEATURES)
        ids = np.array([5, 9, 1, 100])
        np.testing.assert_array_equal(await _batch(buf, src, ids), FEATURES[ids])
        np.testing.assert_array_equal(await _batch(buf, src, ids[::-1]), FEATURES[ids[::-1]])
        assert sorted(src.rows_read) == sorted(ids.tolist())  # the second batch was all hits
        assert buf.stats()["hits"] == 4 and buf.free_slots() == 50

    run(body())


def test_rows_in_flight_for_another_batch_are_awaited_not_reread() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 60, 6), ArraySource(FEATURES, seed=3)
        a, b = np.arange(0, 30), np.arange(20, 50)
        xa, xb = await asyncio.gather(_batch(buf, src, a), _batch(buf, src, b))
        np.testing.assert_array_equal(xa, FEATURES[a])
        np.testing.assert_array_equal(xb, FEATURES[b])
        assert sorted(src.rows_read) == list(range(50))
        assert buf.stats()["waits"] == 10

    run(body())


def test_full_buffer_waits_for_a_release_then_evicts_lru() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 10, 6), ArraySource(FEATURES)
        held = await buf.acquire(np.arange(10))
        await buf.fill(held, src)
        waiting = asyncio.ensure_future(_batch(buf, src, np.arange(100, 105)))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        buf.release(held)
        np.testing.assert_array_equal(await waiting, FEATURES[100:105])
        assert buf.stats()["acquire_waits"] >= 1
        # rows 5..9 survived eviction (the 5 least recently released slots went first)
        before = len(src.rows_read)
        await _batch(buf, src, np.arange(5, 10))
        assert len(src.rows_read) == before

    run(body())


def test_read_error_reaches_reader_and_waiters_and_leaves_buffer_usable() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 40, 6), ArraySource(FEATURES, fail_on={7})
        results = await asyncio.gather(
            _batch(buf, src, np.arange(0, 10)), _batch(buf, src, np.arange(5, 15)), return_exceptions=True
        )
        assert all(isinstance(r, OSError) for r in results)
        assert buf.free_slots() == 40
        src.fail_on.clear()
        np.testing.assert_array_equal(await _batch(buf, src, np.arange(0, 15)), FEATURES[:15])

    run(body())


def test_random_workload_matches_reference_and_frees_everything() -> None:
    async def body() -> None:
        rng = np.random.default_rng(1)
        buf, src = FeatureBuffer(200, 64, 6), ArraySource(FEATURES, seed=1)
        batches = [np.unique(rng.integers(0, 200, size=int(rng.integers(1, 20)))) for _ in range(60)]
        sem = asyncio.Semaphore(3)

        async def one(ids: np.ndarray) -> None:
            async with sem:
                np.testing.assert_array_equal(await _batch(buf, src, ids), FEATURES[ids])

        async with asyncio.TaskGroup() as tg:
            for ids in batches:
                tg.create_task(one(ids))
        assert buf.free_slots() == 64
        stats = buf.stats()
        assert stats["rows"] == stats["hits"] + stats["reads"] + stats["waits"]
        assert stats["hits"] > 0

    run(body())


def test_cancelled_fill_does_not_strand_waiters() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 40, 6), ArraySource(FEATURES)
        first = asyncio.ensure_future(_batch(buf, src, np.arange(10)))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        second = asyncio.ensure_future(_batch(buf, src, np.arange(10)))
        await asyncio.sleep(0)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        with pytest.raises(asyncio.CancelledError):
            await second  # its rows were being read by the cancelled batch
        assert buf.free_slots() == 40
        np.testing.assert_array_equal(await _batch(buf, src, np.arange(10)), FEATURES[:10])

    run(body())


def test_evict_lru_slot_takes_the_least_recently_released_slot_and_unmaps_its_node() -> None:
    slots, nodes = 4, 10
    slot_of, node_of = np.full(nodes, -1, np.int64), np.full(slots, -1, np.int64)
    prev, next_ = np.empty(slots + 1, np.int64), np.empty(slots + 1, np.int64)
    K.lru_init(prev, next_)
    refs = np.ones(slots, np.int32)
    taken = [int(K.evict_lru_slot(slot_of, node_of, prev, next_)) for _ in range(slots)]
    assert taken == [0, 1, 2, 3]  # a fresh buffer hands out slots in index order
    assert (slot_of == -1).all()  # empty slots had no node to unmap (slot_of[0] untouched)
    assert next_[slots] == slots  # nobody released anything: the standby list is empty
    for s, node in zip(taken, [7, 0, 9, 5], strict=True):
        node_of[s], slot_of[node] = node, s
    K.release(np.array([2, 0, 3]), refs, prev, next_)  # standby order: 2, 0, 3
    assert K.evict_lru_slot(slot_of, node_of, prev, next_) == 2
    assert slot_of[9] == -1 and slot_of[7] == 0  # only the evicted slot's node lost its mapping
    assert [int(K.evict_lru_slot(slot_of, node_of, prev, next_)) for _ in range(2)] == [0, 3]
    assert next_[slots] == slots
    assert (slot_of[[7, 5]] == -1).all() and slot_of[0] == 1  # slot 1 (node 0) is still held
    K.invalidate(np.array([3]), slot_of, node_of, np.zeros(slots, np.uint8))  # a failed read
    refs[3] = 1  # acquire would have taken a reference on the evicted slot
    K.release(np.array([3]), refs, prev, next_)
    assert K.evict_lru_slot(slot_of, node_of, prev, next_) == 3
    assert slot_of[0] == 1  # evicting an empty slot leaves node 0's mapping alone
