"""Merged reads into buffer slots through bounce slots (``features._bounce``): rows equal the in-memory
reference whether a read is bounced or vectored, every slot goes back after success, failure, truncation
or cancellation, and the scatter skips the holes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run
from fakes import unreadable_source
from test_slot_reads import N, buffer_like, id_sets, write

import outre_async as oa
from outre_async.features import MemorySource, detect_io_uring, open_source
from outre_async.features._bounce import BouncePool, finish_bounced, scatter
from outre_async.features._staging import plan_reads
from outre_async.features._uring_job import UringJob

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    root = tmp_path_factory.mktemp("bounce")
    x = write(root / "ds", 128, "float32")  # 512 B rows: merged reads have a segment per row and per hole
    return oa.open_dataset(root / "ds"), x


@pytest.mark.parametrize("bounce_bytes", [None, 0, 1 << 17, 3 << 17])
@pytest.mark.parametrize("depth", [2, 64])
def test_bounced_and_vectored_reads_put_the_same_rows_in_the_slots(store: tuple, bounce_bytes: int | None,
                                                                   depth: int) -> None:
    """No pool, one slot (most reads then go vectored while it is taken), three, one per read in flight:
    the slots hold exactly the reference's rows, and every bounce slot is free again."""
    ds, x = store
    rng = np.random.default_rng(depth)

    async def main() -> None:
        ref = MemorySource(x)
        async with open_source(ds, "io_uring", max_in_flight=depth, max_gap_bytes=8192, bounce_bytes=bounce_bytes) as src:
            for name, ids in id_sets().items():
                slots = rng.permutation(2 * N)[: len(ids)]
                want, got = buffer_like(x, 2 * N), buffer_like(x, 2 * N)
                await ref.read_rows_into(ids, want, slots)
                await src.read_rows_into(ids, got, slots)
                np.testing.assert_array_equal(got, want, err_msg=name)
            stats = src.stats()
            assert (stats["bounced_reads"] > 0) == (bounce_bytes != 0)
            slot = src.config.bounce_slot_bytes
            assert slot == 128 << 10
            assert stats["bounce_slots"] == (0 if bounce_bytes == 0 else min(depth, (bounce_bytes or depth * slot) // slot))
            assert src._bounce is None or src._bounce.in_use == 0

    run(main())


def test_scatter_copies_rows_to_their_slots_and_skips_holes() -> None:
    """A read of rows 0, 1 and 3 (a 512 B hole before row 3) landed in a bounce slot; only a complete read
    is scattered, and its slot goes back."""
    plan = plan_reads(np.array([0, 1, 3]), stride=512, row_bytes=512, itemsize=4, align=512, max_read=1 << 17,
                      max_gap=4096)
    assert plan.num_reads == 1
    dest = np.zeros(8 * 512, np.uint8)
    base, sink = int(dest.ctypes.data), 1 << 40  # the sink's address is never written by scatter
    iov = np.array([[base + 5 * 512, 512], [base + 2 * 512, 512], [sink, 512], [base + 7 * 512, 512]], np.int64)
    job = UringJob.into_slots(1, plan, iov, np.array([0]), np.array([4], dtype=np.uint32))
    pool = BouncePool(2, 1 << 17)
    job.bounce_through(np.array([True]), dest.reshape(8, 512).view(np.float32))
    job.bslot[:] = pool.take(np.array([True]))
    data = np.arange(4 * 512, dtype=np.uint64).astype(np.uint8)
    pool.memory[job.bslot[0] * pool.slot_bytes :][: len(data)] = data
    tags = np.array([(1 << 32) | 0], np.uint64)
    assert finish_bounced(pool, job, tags, np.array([1000], np.int32), sink) == 0  # short: not yet
    assert job.bslot[0] >= 0 and not dest.any()
    assert finish_bounced(pool, job, tags, np.array([2048], np.int32), sink) == 0
    view = dest.reshape(8, 512)
    np.testing.assert_array_equal(view[5], data[:512])
    np.testing.assert_array_equal(view[2], data[512:1024])
    np.testing.assert_array_equal(view[7], data[1536:])  # the hole's bytes were skipped
    assert job.bslot[0] == -1 and pool.in_use == 0
    outside = np.array([[base + 9 * 512, 512]], np.int64)  # past the slot memory: counted, not written
    assert scatter(np.array([0]), np.array([0]), pool.memory, pool.slot_bytes, outside, np.array([0]),
                   np.array([1]), sink, dest, base) == 1


def test_a_failed_or_truncated_bounced_read_gives_its_slot_back(store: tuple, tmp_path: Path) -> None:
    ds, x = store

    async def failing() -> None:
        async with unreadable_source(ds, "io_uring", max_in_flight=4, max_gap_bytes=8192) as src:
            buf = buffer_like(x, 4)
            with pytest.raises(oa.ExtractorError):
                await src.read_rows_into(np.array([320, 321, 323]), buf, np.array([0, 1, 2]))
            assert src._bounce.in_use == 0 and src.stats()["bounced_reads"] == 1
            src.heal()
            await src.read_rows_into(np.array([320, 321, 323]), buf, np.array([0, 1, 2]))
            np.testing.assert_array_equal(buf[:3], x[[320, 321, 323]])

    run(failing())
    y = write(tmp_path / "short", 128, "float32", n=600)
    short = oa.open_dataset(tmp_path / "short")

    async def truncated() -> None:
        async with open_source(short, "io_uring", max_gap_bytes=8192) as src:
            os.truncate(short.features_path, 300 * 512 + 100)
            buf = buffer_like(y, 4)
            with pytest.raises(oa.ExtractorError, match="truncated"):
                await src.read_rows_into(np.array([297, 298, 300]), buf, np.array([0, 1, 2]))
            assert src._bounce.in_use == 0 and src._flight.now == 0 and not src._jobs

    run(truncated())


def test_a_cancelled_read_gives_every_bounce_slot_back(store: tuple) -> None:
    ds, x = store
    ids = np.sort(np.random.default_rng(0).choice(N, 400, replace=False))

    async def main() -> None:
        async with open_source(ds, "io_uring", max_in_flight=2, max_gap_bytes=2048, max_read_bytes=4096) as src:
            buf = buffer_like(x, len(ids))
            task = asyncio.create_task(src.read_rows_into(ids, buf, np.arange(len(ids))))
            while src._flight.now == 0:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert src._flight.now == 0 and not src._jobs and src._bounce.in_use == 0
            await src.read_rows_into(ids, buf, np.arange(len(ids)))
            np.testing.assert_array_equal(buf, x[ids])

    run(main())
