"""Merged reads into buffer slots through bounce pages (``features._bounce``): rows equal the in-memory
reference whether a read is bounced or vectored, every page goes back after success, failure or
truncation (cancellation: ``test_slot_reads``), and the scatter crosses pages and skips the holes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run
from fakes import unreadable_source
from test_slot_reads import N, buffer_like, id_sets, write

import outre_async as oa
from outre_async.features import MemorySource, detect_io_uring, open_source
from outre_async.features._bounce import PAGE_BYTES, BouncePool, finish_bounced, scatter
from outre_async.features._disk_source import IOConfig
from outre_async.features._staging import plan_reads
from outre_async.features._uring_job import UringJob

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    root = tmp_path_factory.mktemp("bounce")
    x = write(root / "ds", 128, "float32")  # 512 B rows: merged reads have a segment per row and per hole
    return oa.open_dataset(root / "ds"), x


@pytest.mark.parametrize("bounce_bytes", [None, 0, 1 << 15, 3 << 15, 1 << 20])
@pytest.mark.parametrize("depth", [2, 64])
def test_bounced_and_vectored_reads_put_the_same_rows_in_the_slots(store: tuple, bounce_bytes: int | None,
                                                                   depth: int) -> None:
    """No pool, one page (only short reads fit, and most go vectored while it is taken), three, 32, two per
    read in flight: the slots hold exactly the reference's rows, and every page is free again."""
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
            pages = 0 if bounce_bytes == 0 else (2 * depth if bounce_bytes is None else bounce_bytes // PAGE_BYTES)
            assert stats["bounce_pages"] == pages
            assert src._bounce is None or (src._bounce.in_use == 0 and 0 < src._bounce.peak <= pages)

    run(main())


def test_scatter_copies_rows_across_pages_and_skips_holes() -> None:
    """A read of rows 0, 1 and 3 (a 512 B hole before row 3) landed in two 1 KiB pages, taken in an order
    other than the pages' own; only a complete read is scattered, and its pages go back."""
    plan = plan_reads(np.array([0, 1, 3]), stride=512, row_bytes=512, itemsize=4, align=512, max_read=1 << 17,
                      max_gap=4096)
    assert plan.num_reads == 1
    dest = np.zeros(8 * 512, np.uint8)
    base, sink = int(dest.ctypes.data), 1 << 40  # the sink's address is never written by scatter
    iov = np.array([[base + 5 * 512, 512], [base + 2 * 512, 512], [sink, 512], [base + 7 * 512, 512]], np.int64)
    job = UringJob.into_slots(1, plan, iov, np.array([0]), np.array([4], dtype=np.uint32))
    pool = BouncePool(5, 1024)
    pool.take(np.array([1024]), np.array([True]), 1)  # page 0 taken first: the read gets pages 1 and 2
    job.bounce_through(np.array([True]), dest.reshape(8, 512).view(np.float32), 2)
    pages, segs = pool.take(plan.lengths, np.array([True]), 2)
    np.testing.assert_array_equal(pages, [[1, 2]])
    np.testing.assert_array_equal(segs[0, :, 1], [1024, 1024])
    job.bpages[:], job.biov[:], job.bcount[:] = pages, segs, 2
    data = np.arange(4 * 512, dtype=np.uint64).astype(np.uint8)
    pool.memory[1024:3072] = data
    tags = np.array([(1 << 32) | 0], np.uint64)
    assert finish_bounced(pool, job, tags, np.array([1000], np.int32), sink) == 0  # short: not yet
    assert job.bcount[0] == 2 and not dest.any()
    assert finish_bounced(pool, job, tags, np.array([2048], np.int32), sink) == 0
    view = dest.reshape(8, 512)
    np.testing.assert_array_equal(view[5], data[:512])
    np.testing.assert_array_equal(view[2], data[512:1024])
    np.testing.assert_array_equal(view[7], data[1536:])  # the hole's bytes were skipped
    assert job.bcount[0] == 0 and (job.bpages == -1).all() and pool.in_use == 1
    outside = np.array([[base + 9 * 512, 512]], np.int64)  # past the slot memory: counted, not written
    assert scatter(np.array([0]), np.array([[1, 2]]), pool.memory, pool.page_bytes, outside, np.array([0]),
                   np.array([1]), sink, dest, base) == 1


def test_pages_are_given_in_order_while_enough_are_free() -> None:
    pool = BouncePool(4, 1024)
    pages, segs = pool.take(np.array([3000, 500, 1500, 100]), np.array([True, False, True, True]), 3)
    assert (pages[0] >= 0).sum() == 3 and (pages[1] == -1).all() and (pages[2] == -1).all()
    assert (pages[3] >= 0).sum() == 0  # the first read that does not fit stops the rest
    np.testing.assert_array_equal(segs[0, :, 1], [1024, 1024, 952])
    assert pool.in_use == 3
    pool.give(pages)
    assert pool.in_use == 0


def test_a_failed_or_truncated_bounced_read_gives_its_slot_back(store: tuple, tmp_path: Path) -> None:
    ds, x = store

    async def failing() -> None:
        async with unreadable_source(ds, "io_uring", max_in_flight=4, max_gap_bytes=8192) as src:
            buf = buffer_like(x, 4)
            with pytest.raises(oa.errors.ExtractorError):
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
            with pytest.raises(oa.errors.ExtractorError, match="truncated"):
                await src.read_rows_into(np.array([297, 298, 300]), buf, np.array([0, 1, 2]))
            assert src._bounce.in_use == 0 and src._flight.now == 0 and not src._jobs

    run(truncated())


def test_a_negative_bounce_budget_is_a_named_error() -> None:
    with pytest.raises(oa.ConfigError, match="bounce_bytes must be >= 0"):
        IOConfig(bounce_bytes=-1)
    assert IOConfig(bounce_bytes=0).bounce_bytes == 0  # 0: merged reads go vectored
