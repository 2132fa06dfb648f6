"""Reads straight into feature-buffer slots (io_uring's vectored reads, one copy per row) against
pread and the in-memory reference, and the failure contracts of that path: short reads, injected
errors, cancellation with reads in flight."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run
from fakes import unreadable_source

import outre_async as oa
from outre_async.features import MemorySource, detect_io_uring, open_source
from outre_async.features._feature_buffer import page_aligned_zeros
from outre_async.features._staging import plan_reads

pytestmark = pytest.mark.timeout(120)
NEEDS_URING = pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")
N = 700
# (dim, dtype): rows of whole sectors (read into slots), then rows that straddle sectors or need a
# float16 -> float32 conversion (staged, copied once)
CASES = [(128, "float32"), (256, "float32"), (256, "float16"), (129, "float32"), (100, "float32"),
         (100, "float16")]


def write(path: Path, dim: int, dtype: str, n: int = N) -> np.ndarray:
    x = np.random.default_rng(dim).standard_normal((n, dim)).astype(dtype)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, feature_dtype=dtype, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        w.append_features(x)
    return x


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], tuple[oa.Dataset, np.ndarray]]:
    root = tmp_path_factory.mktemp("slots")
    out = {}
    for dim, dtype in CASES:
        x = write(root / f"d{dim}{dtype}", dim, dtype)
        out[dim, dtype] = (oa.open_dataset(root / f"d{dim}{dtype}"), x)
    return out


def id_sets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"random": rng.integers(0, N, 300), "sorted": np.sort(rng.choice(N, 250, replace=False)),
            "duplicates": np.repeat(rng.integers(0, N, 60), 3)[::-1], "last": np.array([N - 1]),
            "all": rng.permutation(N), "neighbours": np.array([5, 6, 7, 9, 40, 41, N - 2, N - 1])}


def buffer_like(x: np.ndarray, rows: int) -> np.ndarray:
    """A page-aligned buffer of float32 or the stored dtype, NaN outside the slots read."""
    if x.dtype == np.float32:
        buf = page_aligned_zeros(rows, x.shape[1])
    else:  # float16 rows of an even dim: the same page-aligned memory, viewed as float16
        buf = page_aligned_zeros(rows, x.shape[1] // 2).view(x.dtype)
    buf[...] = np.nan
    return buf


@pytest.mark.parametrize("backend", [pytest.param("io_uring", marks=NEEDS_URING), "pread"])
@pytest.mark.parametrize(("dim", "dtype"), CASES)
def test_reads_into_slots_equal_memory(stores: dict, backend: str, dim: int, dtype: str) -> None:
    """Row ``ids[i]`` lands in ``buffer[slots[i]]`` exactly as the in-memory source puts it there,
    other slots untouched; io_uring reads whole-sector rows straight into the slots (no staging
    copy: ``rows_into_slots``, copies only for repeated ids) and stages the others."""
    ds, x = stores[dim, dtype]
    rng = np.random.default_rng(dim)

    async def main() -> None:
        ref = MemorySource(x)
        async with open_source(ds, backend) as src:
            for name, ids in id_sets().items():
                slots = rng.permutation(2 * N)[: len(ids)]
                for out_dtype in {np.dtype(np.float32), x.dtype}:
                    want = buffer_like(x.astype(out_dtype), 2 * N)
                    got = buffer_like(x.astype(out_dtype), 2 * N)
                    await ref.read_rows_into(ids, want, slots)
                    await src.read_rows_into(ids, got, slots)
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} {out_dtype}")
            stats = src.stats()
            direct = backend == "io_uring" and dim * np.dtype(dtype).itemsize % 512 == 0
            assert (stats.get("rows_into_slots", 0) > 0) == direct
            if direct:  # slot reads copy only repeated ids; the float32 buffer of float16 rows is staged
                sets = id_sets().values()
                dups = sum(len(ids) - len(np.unique(ids)) for ids in sets)
                staged = sum(len(ids) for ids in sets) if dtype != "float32" else 0
                assert stats["row_copies"] == dups + staged

    run(main())


@NEEDS_URING
def test_slot_reads_coalesce_neighbours_through_a_sink(stores: dict) -> None:
    """Neighbouring rows are one vectored read (holes between them land in the sink)."""
    ds, x = stores[128, "float32"]

    async def main() -> None:
        async with open_source(ds, "io_uring", max_gap_bytes=4096) as src:
            ids = np.array([10, 11, 13, 20])  # 512 B rows: one run with holes of 512 and 3 KiB
            buf = buffer_like(x, 8)
            await src.read_rows_into(ids, buf, np.array([7, 0, 3, 5]))
            np.testing.assert_array_equal(buf[[7, 0, 3, 5]], x[ids])
            assert src.stats()["reads_submitted"] == 1

    run(main())


@NEEDS_URING
def test_short_read_into_slots_is_resubmitted_from_the_segment_it_stopped_in(stores: dict) -> None:
    """``rest_of``: the segments left after ``done`` bytes, the partial one cut at the right byte."""
    from outre_async.features._uring_job import UringJob as _Job

    ds, _ = stores[128, "float32"]
    unique = np.array([0, 1, 3])
    plan = plan_reads(unique, stride=512, row_bytes=512, itemsize=4, align=512, max_read=1 << 17,
                      max_gap=4096)
    iov = np.array([[1000, 512], [2000, 512], [9000, 512], [3000, 512]], dtype=np.int64)
    job = _Job.into_slots(1, plan, iov, np.array([0]), np.array([4], dtype=np.uint32))
    job.done[0] = 1024
    np.testing.assert_array_equal(job.rest_of(0), [[9000, 512], [3000, 512]])
    job.done[0] = 1536
    np.testing.assert_array_equal(job.rest_of(0), [[3000, 512]])


@NEEDS_URING
def test_truncated_file_under_slot_reads_is_an_extractor_error(tmp_path: Path) -> None:
    x = write(tmp_path / "ds", 128, "float32", n=600)
    ds = oa.open_dataset(tmp_path / "ds")

    async def main() -> None:
        async with open_source(ds, "io_uring") as src:
            os.truncate(ds.features_path, 300 * 512 + 100)  # mid-row
            buf = buffer_like(x, 4)
            with pytest.raises(oa.errors.ExtractorError, match="truncated") as info:
                await src.read_rows_into(np.array([10, 500]), buf, np.array([0, 1]))
            assert info.value.path == ds.features_path and info.value.offset == 500 * 512
            await src.read_rows_into(np.array([1, 299]), buf, np.array([2, 3]))  # complete rows
            np.testing.assert_array_equal(buf[[2, 3]], x[[1, 299]])
            assert src._flight.now == 0 and not src._jobs

    run(main())


@NEEDS_URING
def test_failed_slot_read_reaches_the_caller(stores: dict) -> None:
    ds, x = stores[128, "float32"]

    async def main() -> None:
        async with unreadable_source(ds, "io_uring", max_in_flight=4) as src:
            buf = buffer_like(x, 4)
            with pytest.raises(oa.errors.ExtractorError) as info:
                await src.read_rows_into(np.array([321]), buf, np.array([2]))
            assert (info.value.path, info.value.offset, info.value.errno) == (
                ds.features_path, 321 * 512, errno.EBADF)
            assert src._flight.now == 0 and not src._jobs
            src.heal()
            await src.read_rows_into(np.array([321]), buf, np.array([2]))
            np.testing.assert_array_equal(buf[2], x[321])

    run(main())


@NEEDS_URING
@pytest.mark.parametrize("gap", [0, 2048], ids=["vectored", "bounced"])
def test_cancelled_slot_read_drains_before_returning(stores: dict, gap: int) -> None:
    """Cancelled with reads in flight: it stops submitting, returns only once nothing writes into
    the slots any more, leaves no job behind (merged reads: no bounce page held either, ``_bounce``),
    and the source still works."""
    ds, x = stores[128, "float32"]
    ids = np.arange(0, N, 2)

    async def main() -> None:
        async with open_source(ds, "io_uring", max_in_flight=2, max_gap_bytes=gap, max_read_bytes=4096) as src:
            buf = buffer_like(x, len(ids))
            task = asyncio.create_task(src.read_rows_into(ids, buf, np.arange(len(ids))))
            while src._flight.now == 0:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert src._flight.now == 0 and not src._jobs and not src._queue
            assert src.stats()["reads_submitted"] < len(ids)
            assert (src._bounce is not None and src._bounce.in_use == 0) == (gap > 0)
            await src.read_rows_into(ids[:20], buf, np.arange(20))
            np.testing.assert_array_equal(buf[:20], x[ids[:20]])

    run(main())
