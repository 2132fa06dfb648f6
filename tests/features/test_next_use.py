"""Next-use eviction (issue 26): the feature buffer driven with a known window of queued batches reads
exactly the rows a windowed Belady reference reads, on small random sequences."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run
from fakes import ArraySource

from outre_async import ConfigError
from outre_async.features._feature_buffer import FeatureBuffer
from outre_async.features._policies import EVICTION_POLICIES as POLICIES

FEATURES = np.random.default_rng(1).standard_normal((40, 3)).astype(np.float32)


def windowed_min_reads(batches: list[np.ndarray], cache_rows: int, window: int) -> int:
    """Rows read by a cache of ``cache_rows`` that, serving batch ``t``, knows batches ``t+1..t+window``:
    a miss evicts (among rows batch ``t`` does not need) a row no known batch needs, least recently
    used first, else the row whose next use is furthest (Belady within the window, LRU beyond)."""
    last_use: dict[int, tuple[int, int]] = {}
    reads = 0
    for t, batch in enumerate(batches):
        rows = batch.tolist()
        later = [set(b.tolist()) for b in batches[t + 1 : t + 1 + window]]

        def key(r: int, later: list[set[int]] = later) -> tuple[int, int, int]:
            nxt = next((u for u, b in enumerate(later) if r in b), None)
            return (0, *last_use[r]) if nxt is None else (1, -nxt, 0)

        missing = [r for r in rows if r not in last_use]
        reads += len(missing)
        evict = len(last_use) + len(missing) - cache_rows
        if evict > 0:
            need = set(rows)
            for r in sorted((r for r in last_use if r not in need), key=key)[:evict]:
                del last_use[r]
        for pos, r in enumerate(rows):
            last_use[r] = (t, pos)
    return reads


def drive(batches: list[np.ndarray], cache_rows: int, window: int, policy: str = "next-use",
          read_ahead: int = 0) -> int:
    """Rows the buffer reads when batch ``t`` is extracted with batches ``t..t+window`` pinned (without
    read-ahead: a batch reads only its own rows, as the reference does)."""

    async def body() -> int:
        buf = FeatureBuffer(len(FEATURES), cache_rows, FEATURES.shape[1], policy=policy, read_ahead=read_ahead,
                            merge_rows=2 if read_ahead else 0)
        src = ArraySource(FEATURES)
        pins = {u: buf.pin(batches[u], u) for u in range(min(window + 1, len(batches)))}
        for t, ids in enumerate(batches):
            if t + window < len(batches) and t + window not in pins:
                pins[t + window] = buf.pin(batches[t + window], t + window)
            out = np.empty((len(ids), FEATURES.shape[1]), dtype=np.float32)
            await buf.extract(ids, out, src, pin=pins.pop(t))
            np.testing.assert_array_equal(out, FEATURES[ids])
        assert buf.pinned_rows() == 0 and buf.free_slots() == cache_rows and (buf._wanted == 0).all()
        assert not buf._pins  # every pin taken
        assert len(src.rows_read) == buf.stats()["reads"] + buf.stats()["read_ahead_rows"]
        return int(buf.stats()["reads"] + buf.stats()["read_ahead_rows"])

    return run(body(), timeout=30)


@pytest.mark.parametrize("seed", range(40))
def test_next_use_reads_what_a_windowed_belady_reads(seed: int) -> None:
    rng = np.random.default_rng(seed)
    batches = [rng.choice(len(FEATURES), size=int(rng.integers(1, 9)), replace=False) for _ in range(30)]
    cache_rows = int(rng.integers(8, 20))
    window = int(rng.integers(0, 7))
    assert drive(batches, cache_rows, window) == windowed_min_reads(batches, cache_rows, window)


def test_next_use_reads_no_more_than_lru_with_pins_on_average() -> None:
    rng = np.random.default_rng(99)
    nu = lru = 0
    for _ in range(10):
        batches = [rng.choice(len(FEATURES), size=8, replace=False) for _ in range(40)]
        nu += drive(batches, 16, 4)
        lru += drive(batches, 16, 4, policy="lru-lookahead")
    assert nu < lru


def test_a_window_deeper_than_the_buckets_still_serves_every_row() -> None:
    """Seqs more than the bucket count apart share buckets: the choice is then approximate, never wrong."""
    rng = np.random.default_rng(5)
    batches = [rng.choice(len(FEATURES), size=6, replace=False) for _ in range(300)]
    assert drive(batches, 10, 280) >= windowed_min_reads(batches, 10, 280)


def test_an_unknown_policy_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="next-use"):
        FeatureBuffer(10, 4, 2, policy="belady")
    assert set(POLICIES) == {"next-use", "lru-lookahead"}


@pytest.mark.parametrize("policy", ["next-use", "lru-lookahead"])
@pytest.mark.parametrize("seed", range(6))
def test_read_ahead_serves_the_same_rows_reading_the_next_batchs_missing_rows_with_this_one(seed: int,
                                                                                            policy: str) -> None:
    """Rows read ahead for the next queued batch come out bit-identical (``drive`` compares every batch),
    nothing stays held or pinned, and every row read is counted once, as a batch read or a read-ahead."""
    rng = np.random.default_rng(seed)
    batches = [rng.choice(len(FEATURES), size=int(rng.integers(1, 9)), replace=False) for _ in range(30)]
    for ahead in (1, 3):
        drive(batches, int(rng.integers(10, 20)), int(rng.integers(0, 6)), policy, read_ahead=ahead)
