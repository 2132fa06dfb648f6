"""The byte pool of batch matrices in flight: first come first served, oversized batches, cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import run

import outre_async as oa
from outre_async.loader._batch_memory import BatchMemory


def test_reservations_wait_in_order_and_releases_wake_them() -> None:
    async def body() -> None:
        pool = BatchMemory(100, 10, budget=1000)
        a = await pool.reserve(6, 0)
        big = asyncio.ensure_future(pool.reserve(8, 1))   # 60 + 80 > 100: waits
        small = asyncio.ensure_future(pool.reserve(1, 2))  # would fit, but waits behind the big one
        await asyncio.sleep(0)
        assert not big.done() and not small.done() and pool.used == 60
        a.release()
        a.release()  # idempotent
        b = await big
        await asyncio.sleep(0)
        assert small.done() and pool.used == 90
        b.release()
        (await small).release()
        assert pool.used == 0 and pool.stats()["peak"] == 90

    run(body(), timeout=10)


def test_a_batch_that_could_never_fit_names_its_bytes_and_the_budget_that_holds_it() -> None:
    async def body() -> None:
        with pytest.raises(oa.ConfigError, match=r"batch 7 has 20 unique rows, a 200 B matrix.*at least 1.1 KiB"):
            await BatchMemory(100, 10, budget=1000).reserve(20, 7)
        pool = BatchMemory(100, 10, budget=1000)
        held = await pool.reserve(6, 0)
        held.hand_over()  # the consumer's batch: it goes only once the next batch is in hand
        with pytest.raises(oa.ConfigError, match=r"batch 1 has 5 unique rows, a 50 B matrix while the consumer holds "
                                                 r"a 60 B batch.*at least 1010 B"):
            await pool.reserve(5, 1)
        queued = await pool.reserve(4, 2)  # fits beside it
        waiting = asyncio.ensure_future(pool.reserve(5, 3))  # waits for the queued batch ...
        await asyncio.sleep(0)
        assert not waiting.done()
        held.release()  # ... which reaches the consumer (the previous batch goes first): 40 + 50 fits
        queued.hand_over()
        (await waiting).release()
        queued.release()
        assert pool.used == 0
        unbudgeted = BatchMemory(100, 10, budget=None)  # no budget: it waits until it is alone, then goes
        first = await unbudgeted.reserve(5, 0)
        alone = asyncio.ensure_future(unbudgeted.reserve(20, 1))
        await asyncio.sleep(0)
        assert not alone.done()
        first.release()
        (await alone).release()
        assert unbudgeted.used == 0

    run(body(), timeout=10)


def test_a_cancelled_reservation_takes_nothing() -> None:
    async def body() -> None:
        pool = BatchMemory(100, 10, budget=None)
        held = await pool.reserve(10, 0)
        waiting = asyncio.ensure_future(pool.reserve(5, 1))
        behind = asyncio.ensure_future(pool.reserve(1, 2))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        held.release()
        (await behind).release()
        held = await pool.reserve(10, 3)
        raced = asyncio.ensure_future(pool.reserve(5, 4))
        await asyncio.sleep(0)
        held.release()  # grants the waiter its bytes ...
        raced.cancel()  # ... which is cancelled before it resumes: it must give them back
        with pytest.raises(asyncio.CancelledError):
            await raced
        assert pool.used == 0

    run(body(), timeout=10)


def test_a_dead_matrix_map_serves_the_next_batch_within_the_capacity() -> None:
    import gc

    import numpy as np

    async def body() -> None:
        row = 4 * 1024  # one page per row
        pool = BatchMemory(6 * 1024 * row, row, budget=1 << 30)
        lease = await pool.reserve(1000, 0)
        x = pool.matrix(lease, 1000, 1024)
        x[:] = 7.0
        lease.release()
        del x
        gc.collect()
        lease = await pool.reserve(900, 1)  # fits the dead map (1000 <= 1.25 x 900): its extra rows are counted
        y = pool.matrix(lease, 900, 1024)
        assert y.shape == (900, 1024) and pool.stats()["maps_reused"] == 1
        assert lease.nbytes == pool.used == 1000 * row
        y[:] = 1.0  # writable, and a fresh view of the old map
        assert np.all(y == 1.0)
        lease.release()
        del y
        gc.collect()
        lease = await pool.reserve(500, 2)  # too small to lend the dead map its extra rows ...
        z = pool.matrix(lease, 500, 1024)  # ... so the map is shrunk to the batch, not replaced
        assert pool.stats()["maps_new"] == 1 and pool.stats()["maps_resized"] == 1
        assert lease.nbytes == pool.used == 500 * row and pool.stats()["spare"] == 0
        lease.release()
        del z
        gc.collect()
        small = await pool.reserve(100, 3)
        v = pool.matrix(small, 100, 1024)  # shrunk again
        v[:] = 2.0
        small.release()
        del v
        gc.collect()
        lease = await pool.reserve(500, 4)
        z = pool.matrix(lease, 500, 1024)  # grown: only its tail is new memory
        assert pool.stats()["maps_new"] == 1 and pool.stats()["maps_resized"] == 3
        z[:] = 4.0
        assert np.all(z == 4.0) and lease.nbytes == pool.used == 500 * row
        big = await pool.reserve(5000, 5)  # nothing spare: a new map
        w = pool.matrix(big, 5000, 1024)
        assert pool.stats()["spare"] == 0 and pool.stats()["maps_new"] == 2
        assert pool.used + pool.stats()["spare"] <= pool.capacity
        big.release()
        lease.release()
        del z, w
        gc.collect()
        pool.matrix(await pool.reserve(1, 4), 1, 1024)  # takes the returned maps into the spares first
        assert pool.used + pool.stats()["spare"] <= pool.capacity
        pool.close()
        assert pool.stats()["spare"] == 0

    run(body(), timeout=10)


def test_a_full_pool_recycles_the_dead_batchs_map_for_its_successor() -> None:
    """Steady state: the pool is full, the consumer lets go of a batch, its bytes are reserved at
    once for the next batch, and then the dead matrix's map comes back.  It must serve that next
    batch, not be unmapped for "not fitting" beside the reservation made with its own bytes (which
    made every matrix a new, kernel-zeroed map on igb-like)."""
    import gc

    async def body() -> None:
        row = 4 * 1024
        pool = BatchMemory(3000 * row, row, budget=1 << 30)
        leases = [await pool.reserve(1000, i) for i in range(3)]  # full: 3 x 1000 rows
        mats = [pool.matrix(lease, 1000, 1024) for lease in leases]
        for seq in range(3, 12):
            leases[0].release()  # the consumer has the next batch: the oldest goes ...
            nxt = await pool.reserve(950 + seq, seq)  # ... and its bytes are reserved at once
            del mats[0]
            gc.collect()  # ... then its matrix dies
            mats.append(pool.matrix(nxt, 950 + seq, 1024))
            leases = [*leases[1:], nxt]
            assert pool.used + pool.stats()["spare"] <= pool.capacity
        assert pool.stats()["maps_reused"] == 9 and pool.stats()["maps_new"] == 3
        for lease in leases:
            lease.release()
        pool.close()

    run(body(), timeout=10)


def test_a_new_matrix_is_zeroed_and_goes_back_with_its_last_view() -> None:
    import gc
    import mmap
    import weakref

    from outre_async.loader._batch_memory import new_matrix

    x = new_matrix(3000, 256)
    assert x.shape == (3000, 256) and x.dtype.name == "float32" and x.flags.writeable and not x.any()
    mm = x.base
    while not isinstance(mm, mmap.mmap):
        mm = mm.obj if isinstance(mm, memoryview) else mm.base
    x[:] = 1.0
    assert new_matrix(3000, 256).sum() == 0  # a fresh matrix, never a recycled one
    ref = weakref.ref(mm)
    del x, mm
    gc.collect()
    assert ref() is None  # the map is unmapped when the batch dies (its bytes go back)
    assert new_matrix(0, 4).shape == (0, 4)


def test_a_view_that_outlives_its_matrix_keeps_the_map_from_the_next_batch() -> None:
    """A numpy slice of a batch matrix is not a view of the matrix object but of the flat array
    under it: the map must stay out of the spares until that slice dies too, or the next batch
    would be written under it."""
    import gc

    import numpy as np

    async def body() -> None:
        row = 4 * 64
        pool = BatchMemory(64 * row, row, budget=1 << 30)
        lease = await pool.reserve(10, 0)
        x = pool.matrix(lease, 10, 64)
        x[:] = 3.0
        head = x[:4]
        lease.release()
        del x
        gc.collect()
        y = pool.matrix(await pool.reserve(10, 1), 10, 64)
        assert pool.stats()["maps_reused"] == 0
        y[:] = 5.0
        assert np.all(head == 3.0)
        pool.close()  # the map under ``head`` is not a spare: nothing to unmap under it

    run(body(), timeout=10)


def test_a_batch_held_at_interpreter_exit_is_not_unmapped_under_it(tmp_path: Path) -> None:
    """``for batch in loader: ...`` then exit while ``batch`` is still bound: the matrix finalizers
    must not hand live maps back (atexit), or closing the loader at exit raises BufferError."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from conftest import labelled_store
        from pathlib import Path
        import outre_async as oa
        ds = labelled_store(Path({str(tmp_path)!r}) / "g")
        loader = oa.OutreLoader(ds, fanouts=[3, 3], batch_size=64, memory_budget="16MiB", io=oa.IOOptions(backend="pread"))
        for batch in loader:
            pass
        print("ok", batch.x.shape[0] > 0)
    """)
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok True", done.stderr[-2000:]
    assert "Error" not in done.stderr, done.stderr[-2000:]
