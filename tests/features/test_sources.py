"""Feature sources: io_uring and pread against the in-memory reference, plus the failure contracts
(errors, truncation, cancellation, close) that a disk reader must keep."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import LOOPS, run
from fakes import unreadable_source

import outre_async as oa
from outre_async.features import (
    FeatureFile,
    IOConfig,
    MemorySource,
    PreadSource,
    _disk_source,
    detect_io_uring,
    open_source,
)
from outre_async.features._staging import plan_reads, resume_at, row_spans, split_by_bytes

pytestmark = pytest.mark.timeout(120)

HAVE_URING = detect_io_uring()
NEEDS_URING = pytest.mark.skipif(not HAVE_URING, reason="io_uring unavailable here")
DISK_BACKENDS = [pytest.param("io_uring", marks=NEEDS_URING), "pread"]
# (dim, dtype, layout the writer picks): padded, packed (last row's span passes EOF), padded wide
CASES = [(100, "float32", "padded"), (129, "float32", "packed"), (602, "float32", "padded"),
         (129, "float16", "packed"), (100, "float16", "packed")]
N = 1000


def write(path: Path, n: int = N, dim: int = 129, dtype: str = "float32") -> np.ndarray:
    x = np.random.default_rng(dim).standard_normal((n, dim)).astype(dtype)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, feature_dtype=dtype,
                          num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        for start in range(0, n, 300):
            w.append_features(x[start : start + 300])
    return x


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], tuple]:
    """One small dataset per case, shared by the module: (dataset, the array written)."""
    root = tmp_path_factory.mktemp("sources")
    out = {}
    for dim, dtype, layout in CASES:
        x = write(root / f"d{dim}{dtype}", dim=dim, dtype=dtype)
        ds = oa.open_dataset(root / f"d{dim}{dtype}")
        assert ds.row_layout.layout == layout
        out[dim, dtype] = (ds, x)
    return out


@pytest.fixture
def ds129(datasets: dict) -> tuple[oa.Dataset, np.ndarray]:
    return datasets[129, "float32"]


def id_sets(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "random": rng.integers(0, n, 300),
        "sorted": np.sort(rng.choice(n, 200, replace=False)),
        "duplicates": np.repeat(rng.integers(0, n, 40), 3)[::-1],
        "single": np.array([n // 2]),
        "first": np.array([0]),
        "last": np.array([n - 1]),
        "all": np.arange(n),
        "empty": np.array([], dtype=np.int64),
        "int32": rng.integers(0, n, 50).astype(np.int32),
    }


# -- equality with the reference ----------------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("backend", DISK_BACKENDS)
@pytest.mark.parametrize(("dim", "dtype"), [(d, t) for d, t, _ in CASES])
def test_disk_backends_equal_memory(datasets: dict, backend: str, loop: str, dim: int,
                                    dtype: str) -> None:
    ds, x = datasets[dim, dtype]

    async def main() -> None:
        ref, src = open_source(ds, "memory"), open_source(ds, backend, max_in_flight=8)
        async with ref, src:
            assert src.backend == backend
            for name, ids in id_sets(ds.num_nodes).items():
                for out_dtype in {np.dtype(np.float32), np.dtype(dtype)}:
                    got = np.full((len(ids), dim), np.nan, dtype=out_dtype)
                    want = np.full((len(ids), dim), np.nan, dtype=out_dtype)
                    await src.read_rows(ids, got)
                    await ref.read_rows(ids, want)
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} {out_dtype}")
                    np.testing.assert_array_equal(got, x[ids].astype(out_dtype), err_msg=name)
            assert src.stats()["short_reads_resubmitted"] == 0
            assert src.stats()["errors"] == 0

    run(main(), loop)


@pytest.mark.parametrize("backend", ["memory", *DISK_BACKENDS])
def test_read_rows_into_fills_exactly_the_given_slots(ds129: tuple, backend: str) -> None:
    """The batched hook's contract, for every backend: row ``ids[i]`` lands in ``buffer[slots[i]]``,
    every other slot keeps what it held, and it counts as one call like ``read_rows``."""
    ds, x = ds129
    rng = np.random.default_rng(17)
    ids = rng.integers(0, ds.num_nodes, 120)
    slots = rng.permutation(300)[: len(ids)]

    async def main() -> None:
        async with open_source(ds, backend) as src:
            buffer = np.full((300, 129), np.nan, dtype=np.float32)
            await src.read_rows_into(ids, buffer, slots)
            np.testing.assert_array_equal(buffer[slots], x[ids])
            others = np.setdiff1d(np.arange(300), slots)
            assert np.isnan(buffer[others]).all()
            assert (src.stats()["calls"], src.stats()["rows"]) == (1, len(ids))
            bad = [(ids, buffer, slots[:-1]), (ids, buffer, slots + 300), (ids, buffer, -slots - 1),
                   (ids, buffer[:, :100], slots), (ids, buffer.astype(np.float64), slots),
                   (ids, buffer, slots.astype(np.float32))]
            for args in bad:
                with pytest.raises(oa.ConfigError):
                    await src.read_rows_into(*args)

    run(main())


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_last_row_of_packed_file_reads_past_eof_once(ds129: tuple, backend: str) -> None:
    """The aligned span of the packed file's last row ends past EOF: the short read at EOF is the
    expected end, not something to resubmit."""
    ds, x = ds129
    lo, hi = ds.row_layout.span(ds.num_nodes - 1)
    assert lo + hi > ds.num_nodes * ds.row_layout.stride  # the span really passes EOF

    async def main() -> dict:
        async with open_source(ds, backend) as src:
            out = np.empty((1, 129), np.float32)
            await src.read_rows(np.array([ds.num_nodes - 1]), out)
            np.testing.assert_array_equal(out[0], x[-1])
            return src.stats()

    stats = run(main())
    assert (stats["reads_submitted"], stats["short_reads_resubmitted"]) == (1, 0)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_concurrent_calls_share_the_in_flight_budget(ds129: tuple, backend: str, loop: str) -> None:
    ds, x = ds129
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, ds.num_nodes, int(rng.integers(1, 120))) for _ in range(20)]

    async def one(src: oa.OutreError, ids: np.ndarray) -> np.ndarray:
        out = np.empty((len(ids), 129), np.float32)
        await src.read_rows(ids, out)
        return out

    async def main() -> dict:
        async with open_source(ds, backend, max_in_flight=4, max_gap_bytes=0) as src:
            outs = await asyncio.gather(*(one(src, ids) for ids in batches))
            for ids, out in zip(batches, outs, strict=True):
                np.testing.assert_array_equal(out, x[ids])
            return src.stats()

    stats = run(main(), loop)
    assert stats["in_flight_peak"] <= 4
    assert stats["calls"] == 20


@NEEDS_URING
def test_io_uring_keeps_the_queue_full_across_concurrent_calls(ds129: tuple) -> None:
    ds, _ = ds129
    batches = [np.arange(i, ds.num_nodes, 7) for i in range(7)]

    async def main() -> dict:
        async with open_source(ds, "io_uring", max_in_flight=4, max_gap_bytes=0,
                               max_read_bytes=4096) as src:
            outs = [np.empty((len(b), 129), np.float32) for b in batches]
            await asyncio.gather(*(src.read_rows(b, o) for b, o in zip(batches, outs, strict=True)))
            return src.stats()

    stats = run(main())
    assert stats["in_flight_peak"] == 4
    assert stats["in_flight_mean"] > 2  # reads of other calls fill the slots a finishing call frees


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_coalescing_reduces_the_read_count(datasets: dict, backend: str) -> None:
    ds, x = datasets[100, "float32"]  # padded: one 512-byte sector per row

    async def reads(ids: np.ndarray, **opts: Any) -> int:
        async with open_source(ds, backend, **opts) as src:
            out = np.empty((len(ids), 100), np.float32)
            await src.read_rows(ids, out)
            np.testing.assert_array_equal(out, x[ids])
            return src.stats()["reads_submitted"]

    dense = np.arange(ds.num_nodes)
    every_other = np.arange(0, ds.num_nodes, 2)
    assert run(reads(dense)) == -(-ds.num_nodes * 512 // (128 << 10))  # 128 KiB reads
    assert run(reads(dense, max_read_bytes=4096)) == ds.num_nodes // 8
    assert run(reads(every_other, max_gap_bytes=0)) == len(every_other)  # holes are not read
    assert run(reads(every_other, max_gap_bytes=512)) < len(every_other) // 10


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_failed_read_reaches_the_caller(ds129: tuple, backend: str) -> None:
    """The kernel fails reads with EBADF (the file is open write-only, ``tests/fakes.py``): the
    caller gets ExtractorError(path, offset of the failed read, errno), nothing hangs, nothing is
    left in flight, and once the descriptor is readable again the source reads correctly."""
    ds, x = ds129
    row = 321
    fault, _ = ds.row_layout.span(row)

    async def main() -> None:
        async with unreadable_source(ds, backend, max_in_flight=4) as src:
            out = np.empty((1, 129), np.float32)
            with pytest.raises(oa.errors.ExtractorError) as info:
                await src.read_rows(np.array([row]), out)
            assert (info.value.path, info.value.offset, info.value.errno) == (
                ds.features_path, fault, errno.EBADF)
            many = np.arange(row, ds.num_nodes, 3)  # the first read covers the row's offset
            with pytest.raises(oa.errors.ExtractorError) as info:
                await src.read_rows(many, np.empty((len(many), 129), np.float32))
            assert info.value.offset <= fault < info.value.offset + (128 << 10) + 1024
            assert src._flight.now == 0
            src.heal()
            ok = np.array([0, 5, ds.num_nodes - 1])  # the source still works
            out = np.empty((3, 129), np.float32)
            await src.read_rows(ok, out)
            np.testing.assert_array_equal(out, x[ok])
            assert src.stats()["errors"] >= 2

    run(main())


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_file_truncated_under_an_open_source(tmp_path: Path, backend: str) -> None:
    x = write(tmp_path / "ds", n=600, dim=129)
    ds = oa.open_dataset(tmp_path / "ds")

    async def main() -> None:
        async with open_source(ds, backend) as src:
            os.truncate(ds.features_path, 300 * 516 + 100)  # mid-row, mid-sector
            out = np.empty((2, 129), np.float32)
            with pytest.raises(oa.errors.ExtractorError, match="truncated") as info:
                await src.read_rows(np.array([10, 500]), out)
            assert info.value.path == ds.features_path
            with pytest.raises(oa.errors.ExtractorError):
                await src.read_rows(np.array([300]), out[:1])  # the row cut in half
            await src.read_rows(np.array([1, 299]), out)  # rows still complete read fine
            np.testing.assert_array_equal(out, x[[1, 299]])

    run(main())


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_opening_a_truncated_file_is_a_dataset_error(tmp_path: Path, backend: str) -> None:
    write(tmp_path / "ds", n=100, dim=8)
    ds = oa.open_dataset(tmp_path / "ds")
    os.truncate(ds.features_path, 100)
    with pytest.raises(oa.errors.DatasetCorruptError, match="expected"):
        open_source(ds, backend)


# -- cancellation and close ---------------------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_cancelled_read_drains_its_reads_and_the_source_still_works(ds129: tuple, backend: str,
                                                                    loop: str) -> None:
    ds, x = ds129
    ids = np.arange(0, ds.num_nodes, 2)

    async def main() -> None:
        src = open_source(ds, backend, max_in_flight=2, max_gap_bytes=0, max_read_bytes=4096)
        async with src:
            in_flight_at_release = []
            release = src._pool.release

            def checked_release(arena: Any) -> None:
                in_flight_at_release.append(src._flight.now)
                release(arena)

            src._pool.release = checked_release
            out = np.empty((len(ids), 129), np.float32)
            task = asyncio.create_task(src.read_rows(ids, out))
            while src._flight.now == 0:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert src._flight.now == 0  # nothing in flight once the cancelled call returns
            assert in_flight_at_release == [0]  # staging memory released only after the drain
            assert src.stats()["reads_submitted"] < len(ids)  # it stopped submitting
            if backend == "io_uring":
                assert not src._jobs and not src._queue
            few = ids[:50]
            await src.read_rows(few, out[:50])
            np.testing.assert_array_equal(out[:50], x[few])

    run(main(), loop)


@NEEDS_URING
def test_cancelled_twice_while_draining_still_drains(ds129: tuple) -> None:
    ds, _ = ds129
    ids = np.arange(0, ds.num_nodes, 2)

    async def main() -> None:
        async with open_source(ds, "io_uring", max_in_flight=2, max_gap_bytes=0) as src:
            task = asyncio.create_task(src.read_rows(ids, np.empty((len(ids), 129), np.float32)))
            while src._flight.now == 0:
                await asyncio.sleep(0)
            task.cancel()
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert src._flight.now == 0 and not src._jobs

    run(main())


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_aclose_releases_fds_and_reader(ds129: tuple, backend: str, loop: str) -> None:
    ds, _ = ds129

    async def main() -> None:
        before = _fds()
        src = open_source(ds, backend)
        await src.read_rows(np.array([1, 2, 3]), np.empty((3, 129), np.float32))
        assert _fds() > before
        efd = getattr(src, "_efd", -1)
        await src.aclose()
        await src.aclose()  # idempotent
        assert _fds() == before
        if backend == "io_uring":
            assert src._ring is None and src._efd == -1
            selector = getattr(asyncio.get_running_loop(), "_selector", None)
            if selector is not None:  # the default loop: no reader left on the eventfd
                assert efd not in selector.get_map()
        with pytest.raises(oa.errors.PipelineClosed):
            await src.read_rows(np.array([1]), np.empty((1, 129), np.float32))

    run(main(), loop)


@NEEDS_URING
def test_aclose_with_reads_pending_fails_them_without_hanging(ds129: tuple) -> None:
    ds, _ = ds129
    ids = np.arange(0, ds.num_nodes, 2)

    async def main() -> None:
        src = open_source(ds, "io_uring", max_in_flight=1, max_gap_bytes=0)
        task = asyncio.create_task(src.read_rows(ids, np.empty((len(ids), 129), np.float32)))
        while src._flight.now == 0:
            await asyncio.sleep(0)
        await src.aclose()
        with pytest.raises(oa.errors.PipelineClosed):
            await task

    run(main())


@NEEDS_URING
def test_one_source_across_two_event_loops(ds129: tuple) -> None:
    ds, x = ds129
    src = open_source(ds, "io_uring")

    async def read() -> np.ndarray:
        out = np.empty((2, 129), np.float32)
        await src.read_rows(np.array([4, 9]), out)
        return out

    np.testing.assert_array_equal(run(read()), x[[4, 9]])
    np.testing.assert_array_equal(run(read()), x[[4, 9]])  # ring re-created in the new loop
    run(src.aclose())


# -- backend choice, fallbacks, configuration ---------------------------------------------------
def test_auto_picks_io_uring_when_available(ds129: tuple) -> None:
    ds, _ = ds129

    async def main() -> str:
        async with open_source(ds) as src:
            return src.backend

    assert run(main()) == ("io_uring" if HAVE_URING else "pread")
    sysctl = Path("/proc/sys/kernel/io_uring_disabled")
    if sysctl.exists() and sysctl.read_text().strip() == "0":
        assert HAVE_URING  # io_uring is enabled here: detection must not silently lose it


@pytest.mark.parametrize("refusal", ["open", "probe-read"])
@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_buffered_fallback_where_o_direct_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     backend: str, refusal: str) -> None:
    """Filesystems without O_DIRECT refuse it at open (EINVAL) or at the first read (EINVAL); both
    fall back to buffered reads, recorded in stats, instead of failing.  (tmpfs accepts O_DIRECT
    since Linux 6.6, so the refusal is simulated.)"""
    x = write(tmp_path / "ds", n=200, dim=129)
    ds = oa.open_dataset(tmp_path / "ds")
    if refusal == "open":
        real_open = os.open

        def fake_open(path: Any, flags: int, *args: Any) -> int:
            if flags & os.O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument")
            return real_open(path, flags, *args)

        monkeypatch.setattr(_disk_source.os, "open", fake_open)
    else:
        monkeypatch.setattr(_disk_source, "_probe_direct", lambda fd: 0)
    before = _fds()

    async def main() -> dict:
        async with open_source(ds, backend) as src:
            ids = np.array([0, 7, 199, 7])
            out = np.empty((4, 129), np.float32)
            await src.read_rows(ids, out)
            np.testing.assert_array_equal(out, x[ids])
            return src.stats()

    assert run(main())["direct"] is False
    assert _fds() == before  # the refused O_DIRECT descriptor was closed


def test_o_direct_is_used_where_the_filesystem_allows_it(ds129: tuple) -> None:
    async def main() -> dict:
        async with open_source(ds129[0], "pread") as src:
            return src.stats()

    probe = os.open(ds129[0].features_path, os.O_RDONLY | os.O_DIRECT)
    os.close(probe)
    assert run(main())["direct"] is True


@pytest.mark.parametrize("backend", DISK_BACKENDS)
def test_large_request_is_staged_in_bounded_chunks(datasets: dict, backend: str) -> None:
    ds, x = datasets[602, "float32"]
    ids = np.random.default_rng(5).integers(0, ds.num_nodes, 3000)

    async def main() -> dict:
        src = open_source(ds, backend, max_stage_bytes=64 << 10, max_read_bytes=16 << 10)
        async with src:
            out = np.empty((len(ids), 602), np.float32)
            await src.read_rows(ids, out)
            np.testing.assert_array_equal(out, x[ids])
            return src.stats()

    stats = run(main())
    assert stats["staging_arenas"] <= 3  # two chunks in flight, arenas reused


def test_memory_source_from_array_and_validation() -> None:
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    src = MemorySource(x)

    async def main() -> None:
        out = np.empty((3, 4), np.float32)
        await src.read_rows(np.array([9, 0, 9]), out)
        np.testing.assert_array_equal(out, x[[9, 0, 9]])
        bad_ids = [np.array([10]), np.array([-1]), np.array([1.0]), np.zeros((1, 1), np.int64)]
        for ids in bad_ids:
            with pytest.raises(oa.ConfigError):
                await src.read_rows(ids, np.empty((len(ids), 4), np.float32))
        bad_out = [np.empty((2, 4), np.float32), np.empty((1, 5), np.float32),
                   np.empty((1, 4), np.float64), np.empty((1, 8), np.float32)[:, ::2], [[0.0] * 4]]
        for out in bad_out:
            with pytest.raises(oa.ConfigError):
                await src.read_rows(np.array([1]), out)
        await src.aclose()
        with pytest.raises(oa.errors.PipelineClosed):
            await src.read_rows(np.array([1]), np.empty((1, 4), np.float32))

    run(main())


@pytest.mark.parametrize("opts", [{"max_in_flight": 0}, {"max_read_bytes": 1000},
                                  {"max_gap_bytes": -1},
                                  {"max_stage_bytes": 4096, "max_read_bytes": 8192}])
def test_bad_io_config_is_a_config_error(opts: dict) -> None:
    with pytest.raises(oa.ConfigError):
        IOConfig(**opts)


@pytest.mark.parametrize(("backend", "default"), [pytest.param("io_uring", 256, marks=NEEDS_URING),
                                                 ("pread", 32)])
def test_depth_defaults_per_backend_and_can_be_set(ds129: tuple, backend: str, default: int) -> None:
    async def main() -> tuple[int, int]:
        async with open_source(ds129[0], backend) as a, open_source(ds129[0], backend, max_in_flight=5) as b:
            return a.stats()["max_in_flight"], b.stats()["max_in_flight"]

    assert run(main()) == (default, 5)


def test_bad_backend_name(ds129: tuple) -> None:
    with pytest.raises(oa.ConfigError, match="backend"):
        open_source(ds129[0], "mmap")  # type: ignore[arg-type]
    with pytest.raises(oa.ConfigError, match="no options"):
        open_source(ds129[0], "memory", max_in_flight=3)


def test_sources_accept_a_bare_feature_file(ds129: tuple) -> None:
    ds, x = ds129
    f = FeatureFile.of(ds)

    async def main() -> None:
        async with PreadSource(f, max_in_flight=2) as src:
            out = np.empty((2, 129), np.float32)
            await src.read_rows(np.array([3, 1]), out)
            np.testing.assert_array_equal(out, x[[3, 1]])

    run(main())


# -- the planner --------------------------------------------------------------------------------
@pytest.mark.parametrize(("stride", "row_bytes"),
                         [(512, 400), (516, 516), (2560, 2408), (258, 258), (28, 28)])
@pytest.mark.parametrize("max_gap", [0, 512, 4096])
def test_plan_covers_every_row_with_aligned_bounded_reads(stride: int, row_bytes: int,
                                                          max_gap: int) -> None:
    n = 5000
    unique = np.unique(np.random.default_rng(stride + max_gap).integers(0, n, 1500))
    plan = plan_reads(unique, stride=stride, row_bytes=row_bytes, itemsize=2, align=512,
                      max_read=8192, max_gap=max_gap)
    assert (plan.offsets % 512 == 0).all() and (plan.lengths % 512 == 0).all()
    assert (plan.stage % 512 == 0).all() and plan.nbytes == plan.lengths.sum()
    lo, hi = row_spans(unique, stride=stride, row_bytes=row_bytes, align=512)
    assert plan.lengths.max() <= 8192 + (hi - lo).max()
    assert (np.diff(plan.offsets) > 0).all()
    # every row lies inside the read that stages it, at the element offset the plan says
    read = np.searchsorted(plan.stage, plan.row_elems * 2, side="right") - 1
    start = unique * stride
    assert (start >= plan.offsets[read]).all()
    assert (start + row_bytes <= plan.offsets[read] + plan.lengths[read]).all()
    assert (plan.row_elems * 2 - plan.stage[read] == start - plan.offsets[read]).all()
    assert (plan.needs <= plan.lengths).all() and (plan.needs > plan.lengths - 512).all()


def test_resume_at_resubmits_short_reads_and_stops_at_eof() -> None:
    assert resume_at(4096, 4096, 4096, 4096, 512) is None  # complete
    assert resume_at(4096, 4096, 4096, 1536, 512) == 4096 + 1536  # short: continue where it stopped
    assert resume_at(4096, 4096, 4096, 1600, 512) == 4096 + 1536  # partial sector: aligned re-read
    assert resume_at(4096, 1000, 4096, 1000, 512) is None  # the file ends where the row ends
    with pytest.raises(EOFError):
        resume_at(4096, 4096, 4096, 0, 512)  # nothing at all
    with pytest.raises(EOFError):
        resume_at(4096, 4096, 5632, 64, 512)  # re-read from 5632 gave the same partial sector


def test_split_by_bytes_bounds_each_chunk() -> None:
    unique = np.arange(0, 10000, 3)
    chunks = split_by_bytes(unique, stride=512, row_bytes=512, align=512, max_bytes=64 << 10)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(unique)
    assert all(b > a for a, b in chunks)
    assert all(b == c for (_, b), (c, _) in zip(chunks, chunks[1:], strict=False))
    assert max(b - a for a, b in chunks) * 512 <= 64 << 10
    assert split_by_bytes(unique[:0], stride=512, row_bytes=512, align=512, max_bytes=4096) == []


@NEEDS_URING
def test_io_uring_reads_pin_no_new_objects(ds129: tuple) -> None:
    """The binding's Iovec never releases the memoryview it reads into; reads must reuse the
    arena's block slices, so live memoryviews stay flat however many reads are made."""
    import gc

    ds, x = ds129
    rng = np.random.default_rng(11)

    def live_views() -> int:
        gc.collect()
        return sum(type(o) is memoryview for o in gc.get_objects())

    async def main() -> list[int]:
        counts = []
        async with open_source(ds, "io_uring", max_gap_bytes=0) as src:
            for _round in range(3):
                for _ in range(10):
                    ids = rng.integers(0, ds.num_nodes, 200)
                    out = np.empty((len(ids), 129), np.float32)
                    await src.read_rows(ids, out)
                    np.testing.assert_array_equal(out, x[ids])
                counts.append(live_views())
        return counts

    counts = run(main())
    assert counts[2] - counts[0] < 100, f"memoryviews grow with reads: {counts}"
