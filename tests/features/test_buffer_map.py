"""The feature buffer's node -> slot map as a hash table against the direct array it replaces: the same
random sequences of pins, foresights, batches and failed reads leave both buffers in the same state
at every step (slots, actions, records, standby lists), and the table holds only the nodes with a
slot or a count, at most half full."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import run
from fakes import ArraySource

from outre_async.sampling._id_map_kernels import EMPTY
from outre_async.features import _buffer_kernels as K
from outre_async.features._feature_buffer import FeatureBuffer

N, DIM = 3000, 4
FEATURES = np.random.default_rng(2).standard_normal((N, DIM)).astype(np.float32)


class SteadySource(ArraySource):
    """No random delays: the order in which window reads and pieces finish is the event loop's alone, so
    both buffers see the same order whatever the machine's load."""

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await asyncio.sleep(0)
        if self.fail_on.intersection(ids.tolist()):
            raise OSError("injected read failure")
        out[:] = self.features[ids]


def same_state(a: FeatureBuffer, t: FeatureBuffer) -> None:
    assert isinstance(a._map, np.ndarray) and isinstance(t._map, tuple)
    np.testing.assert_array_equal(a._nodes, t._nodes)
    np.testing.assert_array_equal(a._rec, t._rec)
    assert a.stats() == t.stats() and a.cold_slots() == t.cold_slots()
    keys, vals = t._map
    held = keys != EMPTY
    busy = (a._map[:, K.SLOT] >= 0) | (a._map[:, K.WANTED] != 0)
    assert sorted(keys[held].tolist()) == np.flatnonzero(busy).tolist()  # nothing idle is kept
    assert 2 * int(held.sum()) <= len(keys)


@pytest.mark.parametrize("seed", range(8))
def test_hash_map_buffer_moves_like_the_array_buffer(seed: int) -> None:
    async def body() -> None:
        rng = np.random.default_rng(seed)
        slots = int(rng.integers(1, 200))
        merge = int(rng.integers(0, 3))  # > 0: windows read rows of queued batches ahead
        bufs = [FeatureBuffer(N, slots, DIM, merge_rows=merge), FeatureBuffer(N, slots, DIM, merge_rows=merge, map_entries=0)]
        assert len(bufs[1]._map[0]) == K.capacity_for(slots)  # grows as pins and foresights come
        srcs = [SteadySource(FEATURES, fail_on={7, 8}), SteadySource(FEATURES, fail_on={7, 8})]
        hot = rng.choice(N, 400, replace=False)  # a small set, so rows are shared and reused
        queued: list[tuple[np.ndarray, list]] = []
        seen: list[list] = []
        for _step in range(60):
            op = rng.random()
            if op < 0.35 or not queued:
                ids = rng.choice(hot, int(rng.integers(1, 120)), replace=False).astype(np.int64)
                queued.append((ids, [b.pin(ids) for b in bufs]))
            elif op < 0.5:
                ids = rng.choice(hot, int(rng.integers(1, 80)), replace=False).astype(np.int64)
                seen.append([b.foresee(ids) for b in bufs])
            elif op < 0.6 and seen:
                for hold in seen.pop(int(rng.integers(len(seen)))):
                    hold.release()
            elif op < 0.65:
                ids, pins = queued.pop(int(rng.integers(len(queued))))
                for p in pins:
                    p.release()  # dropped on shutdown
            else:
                ids, pins = queued.pop(0)
                piece = int(rng.integers(1, slots + 1))
                outs = []
                for b, s, p in zip(bufs, srcs, pins, strict=True):
                    out = np.full((len(ids), DIM), np.nan, np.float32)
                    try:
                        await b.extract(ids, out, s, piece_rows=piece, pin=p)
                    except OSError:
                        p.release()
                        out = None
                    outs.append(out)
                if outs[0] is None:
                    assert outs[1] is None
                else:
                    np.testing.assert_array_equal(outs[0], FEATURES[ids])
                    np.testing.assert_array_equal(outs[1], FEATURES[ids])
            for b in bufs:  # windows read in tasks of their own: settle them before comparing
                await asyncio.gather(*b._window_reads, return_exceptions=True)
            same_state(*bufs)
        for ids, pins in queued:
            for p in pins:
                p.release()
        for holds in seen:
            for h in holds:
                h.release()
        same_state(*bufs)
        assert bufs[1].pinned_rows() == bufs[1].foreseen_rows() == 0
        keys, vals = bufs[1]._map
        assert int((keys != EMPTY).sum()) == int((bufs[0]._map[:, K.SLOT] >= 0).sum())  # mapped slots only
        for b in bufs:
            await b.aclose()

    run(body(), timeout=120)


def test_the_buffer_picks_the_smaller_map() -> None:
    """A table for the entries the plan names where that is smaller than 8 bytes a node; the array else
    (and always for next-use, whose kernels index the array)."""
    small = FeatureBuffer(100_000, 64, 4, map_entries=1000)
    assert isinstance(small._map, tuple) and small.map_nbytes == K.hash_map_bytes(1000, 100_000) == 12 * 2048
    assert small._map[0].dtype == np.int32  # node ids fit int32: 12 bytes a bucket
    assert K.map_bytes(100_000, 1000) == 12 * 2048 and K.map_bytes(100_000, None) == 800_000
    big = FeatureBuffer(1000, 64, 4, map_entries=1000)
    assert isinstance(big._map, np.ndarray) and big.map_nbytes == K.map_bytes(1000, 1000) == 8000
    nu = FeatureBuffer(100_000, 64, 4, map_entries=1000, policy="next-use")
    assert isinstance(nu._map, np.ndarray)
