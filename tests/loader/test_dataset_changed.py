"""A dataset file rewritten under a live loader is a named error, never batches of old and new bytes
mixed (issue 34.2).  Before: ``features.bin`` rewritten in place at the same size under a pread or
io_uring loader gave later batches the new bytes and raised nothing.

Timing: each rewrite comes at least ``2 x WATCH_INTERVAL_S`` after the previous check and the
dataset's write, so the check is due and a coarse timestamp clock has moved on (no timing assert)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import labelled_store

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.store._watch import WATCH_INTERVAL_S, FileWatch, Fingerprint
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(120)

DISK = [pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")),
        "pread"]


def _pause() -> None:
    time.sleep(2 * WATCH_INTERVAL_S)


def _rewrite_in_place(path: Path) -> None:
    """Every byte flipped, same file, same size (what ``dd conv=notrunc`` or a careless script does)."""
    _pause()
    data = np.fromfile(path, dtype=np.uint8)
    with open(path, "r+b") as f:
        f.write((data ^ 0x5A).tobytes())


def _replace(path: Path) -> None:
    """Same bytes, a new inode put in place by a rename (what an atomic rewrite does)."""
    _pause()
    tmp = path.with_suffix(".new")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)


def _loader(ds: oa.Dataset, backend: str, **kw: object) -> oa.OutreLoader:
    return oa.OutreLoader(ds, **group_knobs(dict(fanouts=[3, 3], batch_size=20, backend=backend, num_samplers=1, num_extractors=1,
                          ready_queue=1, extract_queue=1, **kw)))  # type: ignore[arg-type]


def _check_rows(batch: oa.OutreBatch, old: np.ndarray) -> None:
    np.testing.assert_array_equal(batch.x.numpy(), old[batch.n_id.numpy()])


@pytest.mark.parametrize("change", ["rewrite", "replace"])
@pytest.mark.parametrize("backend", DISK)
def test_features_changed_mid_epoch_end_it(tmp_path: Path, backend: str, change: str) -> None:
    ds = labelled_store(tmp_path / "ds")
    old = np.array(ds.features[:])
    with _loader(ds, backend) as loader:
        it = iter(loader)
        for _ in range(3):
            _check_rows(next(it), old)  # before the change: the bytes the dataset was opened with
        (_rewrite_in_place if change == "rewrite" else _replace)(ds.features_path)
        with pytest.raises(oa.errors.DatasetChangedError) as info:
            for batch in it:  # at most the batches read before the change come first
                _check_rows(batch, old)
        assert info.value.path == ds.features_path
        assert ("written in place" if change == "rewrite" else "replaced") in str(info.value)
        assert "open the dataset again" in str(info.value)
        with pytest.raises(oa.errors.DatasetChangedError):  # the next epoch refuses at its start
            next(iter(loader))
    fresh = oa.open_dataset(tmp_path / "ds")  # what the message says to do: the new bytes, whole epochs
    new = np.array(fresh.features[:])
    with _loader(fresh, backend) as loader:
        assert sum(1 for b in loader if _check_rows(b, new) is None) == len(loader)


def test_memory_backend_keeps_the_rows_it_copied(tmp_path: Path) -> None:
    """``memory`` copied ``features.bin`` at open and never reads it again: a rewrite cannot mix into its
    batches, so nothing is raised and every batch carries the bytes of the open."""
    ds = labelled_store(tmp_path / "ds")
    old = np.array(ds.features[:])
    with _loader(ds, "memory") as loader:
        it = iter(loader)
        _check_rows(next(it), old)
        _rewrite_in_place(ds.features_path)
        assert sum(1 for b in it if _check_rows(b, old) is None) == len(loader) - 1
        assert sum(1 for b in loader if _check_rows(b, old) is None) == len(loader)


def test_mapped_indices_are_watched(tmp_path: Path) -> None:
    """A memory-mapped ``indices`` is read on every batch: rewriting it is caught like the features."""
    labelled_store(tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds", indices_in_ram=False)
    with _loader(ds, "memory") as loader:
        it = iter(loader)
        next(it)
        _rewrite_in_place(ds.path / ds.manifest.indices.file)
        with pytest.raises(oa.errors.DatasetChangedError, match="indices"):
            list(it)


@pytest.mark.parametrize("backend", DISK)
def test_an_unchanged_dataset_is_not_disturbed(tmp_path: Path, backend: str) -> None:
    ds = labelled_store(tmp_path / "ds")
    old = np.array(ds.features[:])
    (tmp_path / "ds" / "notes.txt").write_text("a file the loader does not read")  # changed: no matter
    with _loader(ds, backend) as loader:
        for _ in range(2):
            n = 0
            for batch in loader:
                _check_rows(batch, old)
                n += 1
                if n % 8 == 0:
                    _pause()  # the check is due: it runs mid-epoch, and passes
            assert n == len(loader)
        watch = loader._res.watch
        assert watch is not None and watch.files == {ds.features_path: Fingerprint.of(ds.features_path)}
        assert watch.checks >= 2 + 2  # two epoch starts, and mid-epoch checks


def test_fingerprint_sees_size_times_set_back_and_removal(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    before = os.stat(path)

    def watch() -> FileWatch:
        return FileWatch({path: Fingerprint.of(path)}, interval_s=3600.0)

    w = watch()
    w.check_due()  # not due: no stat
    assert w.checks == 0
    w.check()
    _pause()
    with open(path, "r+b") as f:
        f.write(b"y")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime set back: ctime still moved
    with pytest.raises(oa.errors.DatasetChangedError, match="ctime"):
        w.check()
    w = watch()
    os.truncate(path, 100)
    with pytest.raises(oa.errors.DatasetChangedError, match="from 4096 to 100 bytes"):
        w.check()
    w = watch()
    path.unlink()
    with pytest.raises(oa.errors.DatasetChangedError, match="removed"):
        w.check()
