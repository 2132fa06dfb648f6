"""Disk faults injected at the completion boundary (issue 34.3): a read completing with ``-EIO`` (or
EAGAIN, EINTR, or a non-transient errno) or with a short count, through io_uring and pread alike
(``_faults.FaultPlan``: the reads really happen, only the results the source is told change).

The contract: short reads are read again for the rest and never give a wrong row; transient errors
are retried ``READ_RETRIES`` (3) times, then named; any other error is named at once; the error names
the file, the failed read's byte offset and the errno, ends the request (and a loader's epoch)
cleanly: nothing left in flight, the source and the loader work again once the device does."""

from __future__ import annotations

import errno
import gc
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import labelled_store, run

import outre_async as oa
from outre_async.features import IOConfig, detect_io_uring, open_source
from outre_async.features._faults import READ_RETRIES, Fault, FaultPlan
from outre_async.features._feature_buffer import page_aligned_zeros

pytestmark = pytest.mark.timeout(120)
NEEDS_URING = pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")
DISK = [pytest.param("io_uring", marks=NEEDS_URING), "pread"]
N, DIM = 600, 128  # 512 B rows: whole sectors, so io_uring reads straight into buffer slots too
ROW = 321


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    ds = labelled_store(tmp_path_factory.mktemp("faults") / "ds", num_nodes=N, dim=DIM)
    return ds, np.array(ds.features[:])


def _read(src: oa.FeatureSource, ids: np.ndarray, into_slots: bool) -> np.ndarray:
    """``features[ids]`` through ``read_rows`` (staged) or ``read_rows_into`` (io_uring: into slots)."""

    async def go() -> np.ndarray:
        if not into_slots:
            out = np.empty((len(ids), DIM), np.float32)
            await src.read_rows(ids, out)
            return out
        buf = page_aligned_zeros(len(ids), DIM)
        await src.read_rows_into(ids, buf, np.arange(len(ids)))
        return buf

    return go()  # type: ignore[return-value]


PATHS = [pytest.param("io_uring", False, marks=NEEDS_URING, id="io_uring-staged"),
         pytest.param("io_uring", True, marks=NEEDS_URING, id="io_uring-slots"),
         pytest.param("pread", False, id="pread")]


@pytest.mark.parametrize(("backend", "into_slots"), PATHS)
def test_short_reads_are_read_again_never_a_wrong_row(store: tuple, backend: str, into_slots: bool) -> None:
    ds, x = store
    ids = np.random.default_rng(1).integers(0, N, 400)

    async def main() -> None:
        async with open_source(ds, backend, max_in_flight=8, max_read_bytes=16384) as src:
            src.faults = faults = FaultPlan(Fault(short=512, times=10**9))  # every completion: one sector
            np.testing.assert_array_equal(await _read(src, ids, into_slots), x[ids])
            assert faults.injected > 0 and src.stats()["short_reads_resubmitted"] == faults.injected
            assert src.stats()["errors"] == 0 and src._flight.now == 0

    run(main())


@pytest.mark.parametrize("err", [errno.EIO, errno.EAGAIN, errno.EINTR])
@pytest.mark.parametrize(("backend", "into_slots"), PATHS)
def test_transient_errors_are_retried_three_times(store: tuple, backend: str, into_slots: bool, err: int) -> None:
    ds, x = store
    ids = np.arange(ROW - 20, ROW + 20)
    at = ROW * ds.row_layout.stride

    async def main() -> None:
        async with open_source(ds, backend, max_in_flight=4) as src:
            src.faults = faults = FaultPlan(Fault(errno=err, at=at, times=READ_RETRIES))  # the 4th try works
            np.testing.assert_array_equal(await _read(src, ids, into_slots), x[ids])
            assert faults.injected == READ_RETRIES == src.stats()["reads_retried"] == 3
            src.faults = FaultPlan(Fault(errno=err, at=at, times=READ_RETRIES + 1))  # fails 4 times: named
            with pytest.raises(oa.errors.ExtractorError) as info:
                await _read(src, ids, into_slots)
            e = info.value
            assert (e.path, e.errno) == (ds.features_path, err) and e.offset <= at < e.offset + (128 << 10)
            assert str(e).startswith(f"{ds.features_path} at byte {e.offset}: read of ")
            assert f"failed: {os.strerror(err)} (3 retries, all failed)" in str(e)
            assert src.stats()["reads_retried"] == 6 and src._flight.now == 0
            src.faults = None  # the device works again: so does the source
            np.testing.assert_array_equal(await _read(src, ids, into_slots), x[ids])

    run(main())


@pytest.mark.parametrize(("backend", "into_slots"), PATHS)
def test_other_errors_fail_at_once(store: tuple, backend: str, into_slots: bool) -> None:
    ds, _ = store
    at = ROW * ds.row_layout.stride

    async def main() -> None:
        async with open_source(ds, backend, max_in_flight=4) as src:
            src.faults = faults = FaultPlan(Fault(errno=errno.EINVAL, at=at, times=10))
            with pytest.raises(oa.errors.ExtractorError, match=f"failed: {os.strerror(errno.EINVAL)}$") as info:
                await _read(src, np.arange(N), into_slots)
            assert info.value.errno == errno.EINVAL and info.value.offset <= at
            assert faults.injected == 1 and src.stats()["reads_retried"] == 0 and src._flight.now == 0

    run(main())


def _threads_and_fds() -> tuple[int, int]:
    gc.collect()
    return threading.active_count(), len(os.listdir("/proc/self/fd"))


def _epoch_rows_right(loader: oa.OutreLoader, x: np.ndarray) -> int:
    n = 0
    for batch in loader:
        np.testing.assert_array_equal(batch.x.numpy(), x[batch.n_id.numpy()])
        n += 1
    return n


@pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")  # a small buffer: rows keep coming from disk
@pytest.mark.parametrize("backend", DISK)
def test_a_failing_device_ends_the_epoch_cleanly(store: tuple, backend: str) -> None:
    """EIO on every try of one row's read: the epoch ends with the named error, nothing hangs or leaks,
    the next epoch (device healed) delivers every batch with the right rows; short reads all along
    change no row either."""
    ds, x = store
    at = ROW * ds.row_layout.stride

    def loader() -> oa.OutreLoader:
        return oa.OutreLoader(ds, fanouts=[4, 4], batch_size=50, 
                              io=oa.IOOptions(backend=backend, source_options={"max_read_bytes": 16384}), cache=oa.CacheOptions(buffer_rows=200))

    with loader() as warm:  # one-time process state (numba caches, uvloop's wake-up pipe)
        _epoch_rows_right(warm, x)
    before = _threads_and_fds()
    with loader() as lo:
        lo.start()
        src = lo._res.source
        src.faults = FaultPlan(Fault(errno=errno.EIO, times=10**9, at=at))
        with pytest.raises(oa.errors.ExtractorError, match="Input/output error") as info:
            _epoch_rows_right(lo, x)
        assert (info.value.path, info.value.errno) == (ds.features_path, errno.EIO)
        assert info.value.offset <= at < info.value.offset + 16384
        assert src.stats()["reads_retried"] >= READ_RETRIES and src._flight.now == 0
        src.faults = FaultPlan(Fault(short=4096, times=10**9))  # healed, but every read comes back short
        assert _epoch_rows_right(lo, x) == len(lo)
        assert src.faults.injected > 0
    assert _threads_and_fds() == before


def test_fault_plan_refuses_what_a_device_cannot_do() -> None:
    for bad in ({}, {"errno": errno.EIO, "short": 512}, {"short": 100}, {"errno": -5}, {"errno": 5, "times": 0}):
        with pytest.raises(oa.ConfigError):
            Fault(**bad)  # type: ignore[arg-type]
    plan = FaultPlan(Fault(short=512, at=1000))
    assert plan.result(0, 4096, 512) == 512  # already that short: nothing injected
    assert plan.result(4096, 4096, 4096) == 4096  # does not cover byte 1000
    assert (plan.result(0, 4096, 4096), plan.injected) == (512, 1)
    assert plan.result(0, 4096, 4096) == 4096  # its one time is spent
    assert IOConfig().max_read_bytes == 128 << 10  # the offset bound the tests above use
