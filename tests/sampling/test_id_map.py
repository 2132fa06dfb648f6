"""The node id hash table (``_id_map``, ``_id_map_kernels``) against a dict on random insert / lookup /
delete sequences, full tables and keys that all share one home bucket (also run with NUMBA_DISABLE_JIT=1 by tox)."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from outre_async.sampling import _id_map_kernels as K
from outre_async.sampling._id_map import IdMap

JIT = not numba.config.DISABLE_JIT  # plain Python runs fewer examples (tox's kernels-nojit)
OPS = st.lists(st.tuples(st.sampled_from("ipd"), st.lists(st.integers(0, 63), max_size=12)), max_size=40)


def check_same(m: IdMap, ref: dict[int, tuple[int, ...]], probe: np.ndarray) -> None:
    got = m.get(probe)
    want = np.array([ref.get(int(v), (m.fill,) * m.width) for v in probe], np.int32).reshape(len(probe), m.width)
    np.testing.assert_array_equal(got, want)
    assert len(m) == len(ref) == int((m.keys != K.EMPTY).sum())
    ids, vals = m.items()
    assert dict(zip(ids.tolist(), map(tuple, vals.tolist()), strict=True)) == ref


def run_ops(m: IdMap, ops, rng: np.random.Generator, key_of=lambda v: v) -> None:
    ref: dict[int, tuple[int, ...]] = {}
    for op, raw in ops:
        ids = np.array([key_of(v) for v in raw], np.int64)
        if op == "i":
            vals = rng.integers(-5, 1 << 20, (len(ids), m.width)).astype(np.int32)
            m.put(ids, vals)
            for v, row in zip(ids.tolist(), vals.tolist(), strict=True):
                ref[v] = tuple(row)
        elif op == "d":
            m.delete(ids)
            for v in ids.tolist():
                ref.pop(v, None)
        check_same(m, ref, np.array(sorted({key_of(v) for v in range(64)}), np.int64))
        assert m.capacity >= 2 * len(m)


@settings(max_examples=150 if JIT else 12, deadline=None)
@given(ops=OPS, width=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_matches_a_dict(ops, width, seed):
    run_ops(IdMap(width), ops, np.random.default_rng(seed))


@settings(max_examples=60 if JIT else 6, deadline=None)
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_large_and_sparse_ids(ops, seed):
    """Ids far apart (up to 2**40): the hash spreads them, nothing is indexed by the id."""
    run_ops(IdMap(2), ops, np.random.default_rng(seed), key_of=lambda v: v * 17_179_869_143 + 5)


def colliding_keys(capacity: int, count: int) -> np.ndarray:
    """``count`` ids whose probe runs all start at bucket 0 of a ``capacity``-bucket table."""
    cand = np.arange(200_000, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = cand * np.uint64(0x9E3779B97F4A7C15)
    homes = (h ^ (h >> np.uint64(32))) & np.uint64(capacity - 1)
    out = cand[homes == 0][:count].astype(np.int64)
    assert all(K.home(v, capacity - 1) == 0 for v in out.tolist())  # the kernel's hash, recomputed
    assert len(out) == count
    return out


@pytest.mark.parametrize("seed", range(6))
def test_colliding_keys(seed):
    """Every key starts its probe at one bucket: deletion must shift the run back, lookups stay exact."""
    rng = np.random.default_rng(seed)
    keys = colliding_keys(64, 30)
    m = IdMap(1, entries=30)
    assert m.capacity == 64
    ref: dict[int, tuple[int, ...]] = {}
    for _ in range(200 if JIT else 40):
        pick = rng.choice(keys, rng.integers(1, 6), replace=False)
        if rng.random() < 0.55:
            vals = rng.integers(0, 1000, (len(pick), 1)).astype(np.int32)
            m.put(pick, vals)
            ref.update({int(v): (int(x),) for v, x in zip(pick, vals[:, 0], strict=True)})
        else:
            m.delete(pick)
            for v in pick.tolist():
                ref.pop(v, None)
        assert m.capacity == 64  # 30 keys at most: never grows
        check_same(m, ref, np.concatenate([keys, [keys.max() + 1]]))


def test_full_table_refuses_instead_of_looping():
    keys, vals = K.new_table(8, 1)
    ids = np.arange(8, dtype=np.int64)
    assert K.insert_many(keys, vals, ids, ids.reshape(-1, 1).astype(np.int32)) == 8
    assert K.place(keys, 99) == -1
    assert K.find(keys, 99) == -1
    assert K.insert_many(keys, vals, np.array([3, 99], np.int64), np.zeros((2, 1), np.int32)) == -2
    assert [vals[K.find(keys, v), 0] for v in range(8)] == [0, 1, 2, 0, 4, 5, 6, 7]  # 3 was replaced before 99
    assert K.remove_many(keys, vals, np.array([5, 99], np.int64)) == 1
    assert K.find(keys, 5) == -1 and all(K.find(keys, v) >= 0 for v in (0, 1, 2, 3, 4, 6, 7))


def test_grows_and_is_sized_by_entries():
    m = IdMap(2)
    m.put(np.arange(1000, dtype=np.int64) * 7919, np.ones((1000, 2), np.int32))
    assert len(m) == 1000 and m.capacity == 2048
    assert m.nbytes == IdMap.planned_bytes(1000, 2) == 2048 * 16
    m.reserve(5000)
    assert m.capacity == 16384 and len(m) == 1000
    np.testing.assert_array_equal(m.get(np.array([7919 * 999, 1], np.int64)), [[1, 1], [-1, -1]])


@pytest.mark.parametrize(("entries", "cap"), [(0, 8), (4, 8), (5, 16), (1000, 2048), (1024, 2048), (1025, 4096)])
def test_capacity_is_the_power_of_two_above_twice_the_entries(entries, cap):
    assert K.capacity_for(entries) == cap


def test_negative_ids_are_refused():
    with pytest.raises(ValueError, match="node ids must be >= 0"):
        IdMap().put(np.array([3, -1]), np.array([1, 2]))
