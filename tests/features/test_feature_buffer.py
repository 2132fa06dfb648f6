"""The feature buffer against a plain in-memory reference: hits, shared in-flight rows, eviction, errors,
batches streamed through a buffer smaller than them, look-ahead pins."""

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


async def _batch(buf: FeatureBuffer, src: ArraySource, ids: np.ndarray, piece_rows: int | None = None) -> np.ndarray:
    out = np.full((len(ids), FEATURES.shape[1]), np.nan, dtype=np.float32)
    await buf.extract(ids, out, src, piece_rows=piece_rows)
    return out


def test_a_buffer_below_its_asked_minimum_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="smaller than"):
        FeatureBuffer(100, 10, 4, min_slots=11)
    with pytest.raises(ConfigError, match="smaller than"):
        FeatureBuffer(100, 0, 4)


def test_a_batch_larger_than_the_buffer_streams_through_it() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 8, 6), ArraySource(FEATURES)
        ids = np.arange(150, 20, -3)  # 44 rows through 8 slots
        np.testing.assert_array_equal(await _batch(buf, src, ids), FEATURES[ids])
        assert buf.stats()["pieces"] == 6 and buf.free_slots() == 8

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
    node_rec, rec = K.new_state(nodes, slots)
    slot_of = node_rec[:, K.SLOT]
    taken = [int(K.evict_lru_slot(node_rec, rec)) for _ in range(slots)]
    assert taken == [0, 1, 2, 3]  # a fresh buffer hands out slots in index order
    assert (slot_of == -1).all()  # empty slots had no node to unmap (nodes[0] untouched)
    assert K.standby_empty(rec)  # nobody released anything
    for s, node in zip(taken, [7, 0, 9, 5], strict=True):
        rec[s, K.NODE], slot_of[node] = node, s
        rec[s, K.STATE] = K.REF | 1  # held once, valid
    K.release(np.array([2, 0, 3]), node_rec, rec)  # standby order: 2, 0, 3
    assert K.evict_lru_slot(node_rec, rec) == 2
    assert slot_of[9] == -1 and slot_of[7] == 0  # only the evicted slot's node lost its mapping
    assert [int(K.evict_lru_slot(node_rec, rec)) for _ in range(2)] == [0, 3]
    assert K.standby_empty(rec)
    assert (slot_of[[7, 5]] == -1).all() and slot_of[0] == 1  # slot 1 (node 0) is still held
    rec[3, K.STATE] = K.REF  # acquire would have taken a reference on the evicted slot
    K.invalidate(np.array([3]), node_rec, rec)  # a failed read
    assert rec[3, K.NODE] == -1 and rec[3, K.STATE] == K.REF  # still held, not valid
    K.release(np.array([3]), node_rec, rec)
    assert K.evict_lru_slot(node_rec, rec) == 3
    assert slot_of[0] == 1  # evicting an empty slot leaves node 0's mapping alone


@pytest.mark.parametrize("slots", [1, 3, 7, 64])
@pytest.mark.parametrize("order", ["random", "sorted", "reversed"])
def test_streamed_batches_equal_the_source_with_duplicates_pins_and_random_delays(slots: int, order: str) -> None:
    """Every configuration: a buffer smaller than one batch, pieces of every size, duplicate ids,
    several batches in flight sharing rows; rows equal the source and nothing stays held or pinned."""

    async def body() -> None:
        rng = np.random.default_rng(slots)
        buf, src = FeatureBuffer(200, slots, 6), ArraySource(FEATURES, seed=slots)
        batches = [rng.integers(0, 60, size=int(rng.integers(1, 40))) for _ in range(24)]  # duplicates
        if order != "random":
            batches = [np.sort(b) if order == "sorted" else np.sort(b)[::-1] for b in batches]
        pins = [buf.pin(np.unique(b)) for b in batches]
        sem = asyncio.Semaphore(3)

        async def one(i: int) -> None:
            async with sem:
                ids = batches[i]
                out = np.full((len(ids), 6), np.nan, dtype=np.float32)
                await buf.extract(ids, out, src, piece_rows=int(rng.integers(1, slots + 1)))
                pins[i].release()
                np.testing.assert_array_equal(out, FEATURES[ids])

        async with asyncio.TaskGroup() as tg:
            for i in range(len(batches)):
                tg.create_task(one(i))
        assert buf.free_slots() == slots and buf.pinned_rows() == 0
        assert (buf._wanted == 0).all()
        stats = buf.stats()
        assert stats["rows"] == stats["hits"] + stats["reads"] + stats["waits"] == sum(map(len, batches))

    run(body(), timeout=30)


# an int64 dtype equal to numpy's but not its singleton object, as a cached numba kernel returns
# (the sampler's n_id): np.ascontiguousarray(..., dtype=np.int64) makes a new view of such arrays
_DISTINCT_INT64 = np.dtype("<i8").newbyteorder("=")


@pytest.mark.parametrize("dtype", [np.dtype(np.int64), _DISTINCT_INT64], ids=["numpy", "numba-like"])
@pytest.mark.parametrize("slots", [1, 5, 40])
def test_a_batch_taking_its_own_pinned_ids_unpins_them_as_it_goes(slots: int, dtype: np.dtype) -> None:
    """The loader's case: the pin counts the batch's own id array, so acquire withdraws the rows it
    takes in the same pass (no second withdraw pass, whatever int64 dtype object the ids carry); the
    counts stay equal to the pinned rows at every step."""

    async def body() -> None:
        rng = np.random.default_rng(slots + 1)
        buf, src = FeatureBuffer(200, slots, 6), ArraySource(FEATURES, seed=slots)
        batches = [rng.choice(80, size=int(rng.integers(1, 50)), replace=False).astype(np.int64).view(dtype)
                   for _ in range(16)]
        assert dtype is np.dtype(np.int64) or batches[0].dtype is not np.dtype(np.int64)
        pins = [buf.pin(b) for b in batches]
        assert all(p.ids is b for p, b in zip(pins, batches, strict=True))

        def slow_path(ids: np.ndarray) -> None:
            raise AssertionError("the batch's own pinned ids were withdrawn in a second pass")

        buf._withdraw = slow_path  # type: ignore[method-assign]
        sem = asyncio.Semaphore(3)

        async def one(i: int) -> None:
            async with sem:
                out = np.full((len(batches[i]), 6), np.nan, dtype=np.float32)
                await buf.extract(batches[i], out, src, piece_rows=int(rng.integers(1, slots + 1)), pin=pins[i])
                assert pins[i].taken == len(batches[i])
                assert buf.pinned_rows() == int(buf._wanted.sum()) and (buf._wanted >= 0).all()
                np.testing.assert_array_equal(out, FEATURES[batches[i]])

        async with asyncio.TaskGroup() as tg:
            for i in range(len(batches)):
                tg.create_task(one(i))
        assert buf.free_slots() == slots and buf.pinned_rows() == 0 and (buf._wanted == 0).all()

    run(body(), timeout=30)


def test_rows_a_queued_batch_needs_are_evicted_last() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 10, 6), ArraySource(FEATURES)
        await _batch(buf, src, np.arange(10))  # standby, least recent first: 0..9
        pin = buf.pin(np.arange(5))  # a queued batch will need rows 0..4 (the oldest)
        await _batch(buf, src, np.arange(100, 105))  # evicts 5..9, not the LRU rows 0..4
        before = len(src.rows_read)
        out = np.empty((5, 6), np.float32)
        await buf.extract(np.arange(5), out, src, pin=pin)
        assert len(src.rows_read) == before and pin.taken == 5 and buf.pinned_rows() == 0
        np.testing.assert_array_equal(out, FEATURES[:5])
        await _batch(buf, src, np.arange(5, 10))  # 5..9 were evicted: read again
        assert sorted(src.rows_read[before:]) == list(range(5, 10))

    run(body())


def test_a_pin_never_makes_a_batch_wait() -> None:
    """Only wanted rows on standby: the next batch evicts them (the newest first) instead of waiting
    for a release that nothing would send."""

    async def body() -> None:
        buf, src = FeatureBuffer(200, 4, 6), ArraySource(FEATURES)
        await _batch(buf, src, np.arange(4))
        pin = buf.pin(np.arange(4))
        np.testing.assert_array_equal(await _batch(buf, src, np.arange(50, 56)), FEATURES[50:56])
        assert buf.stats()["acquire_waits"] == 0
        pin.release()
        pin.release()  # idempotent
        assert buf.pinned_rows() == 0 and (buf._wanted == 0).all()

    run(body(), timeout=10)


def test_cancelled_extract_leaves_no_slot_held() -> None:
    async def body() -> None:
        buf, src = FeatureBuffer(200, 3, 6), ArraySource(FEATURES, seed=5)
        out = np.empty((40, 6), np.float32)
        pin = buf.pin(np.arange(40))
        task = asyncio.ensure_future(buf.extract(np.arange(40), out, src, piece_rows=2, pin=pin))
        others = [asyncio.ensure_future(_batch(buf, src, np.arange(30, 50), piece_rows=1)) for _ in range(2)]
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pin.release()
        for o in others:  # the others finish (or see the cancelled reads they waited for), never hang
            try:
                np.testing.assert_array_equal(await o, FEATURES[30:50])
            except asyncio.CancelledError:
                pass
        assert buf.free_slots() == 3 and buf.pinned_rows() == 0
        np.testing.assert_array_equal(await _batch(buf, src, np.arange(40)), FEATURES[:40])

    run(body(), timeout=10)


class _ReferenceBookkeeping:
    """Plain-Python model of the kernels: a cold and a wanted standby list in release order; eviction
    takes the cold list's oldest, else the wanted list's newest."""

    def __init__(self, slots: int) -> None:
        self.cold: dict[int, None] = dict.fromkeys(range(slots))
        self.wanted_list: dict[int, None] = {}
        self.slot_of: dict[int, int] = {}
        self.node_of = [-1] * slots
        self.refs = [0] * slots
        self.wanted: dict[int, int] = {}

    def acquire(self, ids: list[int], limit: int) -> list[int]:
        out: list[int] = []
        for v in ids[:limit]:
            s = self.slot_of.get(v, -1)
            if s >= 0:
                self.cold.pop(s, None), self.wanted_list.pop(s, None)
            else:
                if not self.cold and not self.wanted_list:
                    break
                if self.cold:  # least recently released cold row, else the newest wanted row
                    s = next(iter(self.cold))
                    del self.cold[s]
                else:
                    s = next(reversed(self.wanted_list))
                    del self.wanted_list[s]
                if self.node_of[s] >= 0:
                    del self.slot_of[self.node_of[s]]
                self.node_of[s], self.slot_of[v] = v, s
            self.refs[s] += 1
            out.append(s)
        return out

    def release(self, slots: list[int]) -> None:
        for s in slots:
            self.refs[s] -= 1
            if self.refs[s] == 0:
                node = self.node_of[s]
                (self.wanted_list if node >= 0 and self.wanted.get(node, 0) else self.cold)[s] = None

    def count(self, ids: list[int], step: int) -> None:
        for v in ids:
            self.wanted[v] = self.wanted.get(v, 0) + step
            s = self.slot_of.get(v, -1)
            if s >= 0 and self.refs[s] == 0 and self.wanted[v] == (1 if step > 0 else 0):
                self.cold.pop(s, None), self.wanted_list.pop(s, None)
                (self.wanted_list if step > 0 else self.cold)[s] = None


def test_kernels_match_a_plain_python_model_of_the_two_standby_lists() -> None:
    slots, nodes = 6, 20
    rng = np.random.default_rng(7)
    ref = _ReferenceBookkeeping(slots)
    node_rec, rec = K.new_state(nodes, slots)
    held: list[np.ndarray] = []
    pins: list[np.ndarray] = []
    for _ in range(400):
        op = rng.integers(0, 4)
        if op == 0:
            ids = rng.choice(nodes, size=int(rng.integers(1, 5)), replace=False)
            limit = int(rng.integers(1, 5))
            out, act = np.empty(min(len(ids), limit), np.int64), np.empty(min(len(ids), limit), np.int8)
            n = int(K.acquire(ids, node_rec, rec, out, act, limit))
            assert out[:n].tolist() == ref.acquire(ids.tolist(), limit)
            K.mark_valid(out[:n], rec)  # the reads succeeded (fill's job)
            held.append(out[:n])
        elif op == 1 and held:
            slots_ = held.pop(int(rng.integers(0, len(held))))
            K.release(slots_, node_rec, rec)
            ref.release(slots_.tolist())
        elif op == 2:
            ids = rng.choice(nodes, size=int(rng.integers(1, 6)), replace=False)
            K.announce(ids, node_rec, rec)
            ref.count(ids.tolist(), +1)
            pins.append(ids)
        elif op == 3 and pins:
            ids = pins.pop(int(rng.integers(0, len(pins))))
            K.withdraw(ids, node_rec, rec)
            ref.count(ids.tolist(), -1)
        assert (rec[:slots, K.STATE] // K.REF).tolist() == ref.refs and rec[:slots, K.NODE].tolist() == ref.node_of
