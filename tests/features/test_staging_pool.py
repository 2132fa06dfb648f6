"""The staging pool: a cap on what it holds, arenas given back at close, pinned arenas reused."""

from __future__ import annotations

import pytest

from outre_async.features import _staging
from outre_async.features._staging import MIN_ARENA, StagingPool, arena_bytes


def test_arena_sizes_are_powers_of_two_from_min_arena() -> None:
    assert arena_bytes(1) == MIN_ARENA
    assert arena_bytes(MIN_ARENA + 1) == 2 * MIN_ARENA
    assert arena_bytes(1 << 20) == 1 << 20


def test_the_pool_caches_within_its_cap_and_gives_the_rest_back() -> None:
    pool = StagingPool(max_bytes=3 * MIN_ARENA)
    a, b, c = (pool.acquire(MIN_ARENA) for _ in range(3))
    assert pool.held == pool.peak == 3 * MIN_ARENA
    for arena in (a, b, c):
        pool.release(arena)
    assert pool.held == 3 * MIN_ARENA  # all cached: within the cap
    big = pool.acquire(2 * MIN_ARENA)  # makes room by giving back two cached arenas
    assert pool.held == 3 * MIN_ARENA and big.nbytes == 2 * MIN_ARENA
    assert pool.acquire(MIN_ARENA) is not None and pool.allocated == 4
    assert pool.peak <= 4 * MIN_ARENA


@pytest.fixture(autouse=True)
def fresh_empty_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees its own process-wide empty list (sources of other tests leave arenas there)."""
    monkeypatch.setattr(_staging, "_EMPTY", {})


def test_close_unmaps_arenas_nothing_exports() -> None:
    pool = StagingPool(max_bytes=1 << 30)
    arena = pool.acquire(100)
    pool.release(arena)
    pool.close()
    assert arena.mm.closed and pool.held == 0


def test_pinned_arenas_drop_their_pages_and_are_reused_with_their_slices() -> None:
    liburing = pytest.importorskip("liburing")
    size = 1 << 21
    pool = StagingPool(max_bytes=1 << 30)
    arena = pool.acquire(size)
    blocks = arena.blocks(4096)
    liburing.Iovec(blocks[:4])  # the binding pins these slices: the arena can't be unmapped
    arena.mm[:4] = b"data"
    pool.release(arena)
    pool.close()
    assert not arena.mm.closed and arena.mm[:4] == b"\0\0\0\0"  # pages given back (read as zeros)
    again = StagingPool(max_bytes=1 << 30).acquire(size)
    assert again is arena and again.blocks(4096) is blocks  # no new mapping, no new slices


@pytest.mark.parametrize("nbytes", [0, 1, 1 << 20])
def test_acquire_holds_what_it_gives(nbytes: int) -> None:
    pool = StagingPool(max_bytes=0)
    arena = pool.acquire(nbytes)
    assert arena.nbytes >= max(nbytes, 1) and pool.held == arena.nbytes
    pool.release(arena)  # over the cap: given back at once
    assert pool.held == 0
