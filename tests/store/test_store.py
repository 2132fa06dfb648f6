"""The on-disk store: writer → reader round trip, row layout, atomicity, and every bad input."""

from __future__ import annotations

import json
import mmap
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

import outre_async as oa
from outre_async.store._layout import SECTOR, choose_row_layout, mean_sectors


def _graph(n: int = 50, avg_deg: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 2 * avg_deg, size=n)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, n, size=int(indptr[-1])).astype(np.int64)
    return indptr, indices


def _write(path: Path, *, n: int = 50, dim: int = 8, dtype: str = "float32", **kw) -> dict:
    indptr, indices = _graph(n)
    x = np.random.default_rng(1).standard_normal((n, dim)).astype(dtype) if dim else None
    y = np.arange(n) % 3
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, feature_dtype=dtype, num_classes=3, **kw) as w:
        w.write_csc(indptr, indices, chunk_edges=17)
        if x is not None:
            for start in range(0, n, 7):
                w.append_features(x[start : start + 7])
        w.write_labels(y)
        w.write_split("train", np.arange(0, n // 2))
        w.write_split("val", np.arange(n // 2, n - 5))
        w.write_split("test", np.arange(n - 5, n))
    return {"indptr": indptr, "indices": indices, "x": x, "y": y}


def test_round_trip_gives_identical_arrays(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds")
    assert (ds.num_nodes, ds.num_edges, ds.feature_dim, ds.num_classes) == (50, len(ref["indices"]), 8, 3)
    np.testing.assert_array_equal(ds.indptr, ref["indptr"])
    np.testing.assert_array_equal(ds.indices, ref["indices"])
    assert ds.indices.dtype == np.int32
    np.testing.assert_array_equal(ds.features, ref["x"])
    np.testing.assert_array_equal(ds.labels, ref["y"])
    assert ds.split_names == ["train", "val", "test"]
    np.testing.assert_array_equal(ds.split("train"), np.arange(25))
    ds.verify()
    assert ds.summary()["splits"] == {"train": 25, "val": 20, "test": 5}


def test_float16_features_round_trip(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ds", dim=20, dtype="float16")
    ds = oa.open_dataset(tmp_path / "ds")
    assert ds.features.dtype == np.float16
    np.testing.assert_array_equal(ds.features, ref["x"])


def test_topology_only_dataset(tmp_path: Path) -> None:
    _write(tmp_path / "ds", dim=0)
    ds = oa.open_dataset(tmp_path / "ds")
    assert ds.feature_dim == 0
    with pytest.raises(oa.ConfigError, match="topology-only"):
        _ = ds.features


@pytest.mark.parametrize(
    ("dim", "layout", "stride"),
    [(100, "padded", 512), (129, "packed", 516), (602, "padded", 2560), (128, "padded", 512), (7, "packed", 28)],
)
def test_row_layout_policy(dim: int, layout: str, stride: int) -> None:
    chosen = choose_row_layout(dim * 4)
    assert (chosen.layout, chosen.stride) == (layout, stride)
    # padding never costs more sectors per row than packing
    assert mean_sectors(dim * 4, chosen.stride) <= mean_sectors(dim * 4, dim * 4)


def test_padded_rows_cost_the_minimum_sectors() -> None:
    lay = choose_row_layout(400, "padded")
    assert all(lay.span(v)[1] == SECTOR for v in range(100))
    packed = choose_row_layout(400, "packed")
    assert max(packed.span(v)[1] for v in range(100)) == 2 * SECTOR


@pytest.mark.parametrize("dim", [100, 129, 602])
def test_odd_dims_read_back_with_o_direct(tmp_path: Path, dim: int) -> None:
    ref = _write(tmp_path / "ds", n=40, dim=dim)
    ds = oa.open_dataset(tmp_path / "ds")
    lay = ds.row_layout
    try:
        fd = os.open(ds.features_path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:  # tmpfs and some filesystems refuse O_DIRECT
        pytest.skip(f"O_DIRECT unsupported here: {exc}")
    try:
        for v in (0, 1, 17, 39):
            offset, length = lay.span(v)
            assert offset % SECTOR == 0 and length % SECTOR == 0
            buf = mmap.mmap(-1, length)  # page-aligned, as O_DIRECT requires
            got = os.preadv(fd, [buf], offset)
            assert got == length or offset + got == os.path.getsize(ds.features_path)
            start = v * lay.stride - offset
            row = np.frombuffer(buf[start : start + dim * 4], dtype=np.float32)
            np.testing.assert_array_equal(row, ref["x"][v])
            buf.close()
    finally:
        os.close(fd)


# -- atomicity -------------------------------------------------------------------------------------


def test_error_inside_writer_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with oa.DatasetWriter(tmp_path / "ds", num_nodes=5, feature_dim=2) as w:
            w.append_neighbors(np.array([1, 0, 0, 0, 0]), np.array([2]))
            raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_incomplete_write_is_rejected_and_cleaned(tmp_path: Path) -> None:
    with pytest.raises(oa.errors.InvalidGraphError, match="feature row count 2 != num_nodes 5"):
        with oa.DatasetWriter(tmp_path / "ds", num_nodes=5, feature_dim=2) as w:
            w.append_neighbors(np.array([1, 0, 0, 0, 1]), np.array([2, 3]))
            w.append_features(np.zeros((2, 2)))
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    _write(tmp_path / "ds")
    with pytest.raises(oa.errors.DatasetExistsError, match="overwrite"):
        oa.DatasetWriter(tmp_path / "ds", num_nodes=5)
    _write(tmp_path / "ds", n=60, overwrite=True)
    assert oa.open_dataset(tmp_path / "ds").num_nodes == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


# -- bad input at write time -----------------------------------------------------------------------


def _writer(tmp_path: Path, **kw) -> oa.DatasetWriter:
    return oa.DatasetWriter(tmp_path / "ds", **{"num_nodes": 5, **kw})


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        (lambda w: w.append_neighbors(np.array([1]), np.array([7])), oa.errors.InvalidGraphError, "edge endpoint 7 is out of range"),
        (lambda w: w.append_neighbors(np.array([2]), np.array([1])), oa.errors.InvalidGraphError, "sum to 2"),
        (lambda w: w.append_neighbors(np.array([-1, 2]), np.array([1])), oa.errors.InvalidGraphError, "non-decreasing"),
        (lambda w: w.write_labels(np.array([0, 1, 2, 3, 9])), oa.errors.InvalidGraphError, "outside the class range"),
        (lambda w: w.write_labels(np.zeros(4, dtype=int)), oa.errors.InvalidGraphError, r"shape \[5\]"),
        (lambda w: w.write_split("train", np.array([0, 1, 1])), oa.errors.InvalidGraphError, "more than once"),
        (lambda w: w.write_split("train", np.array([0, 5])), oa.errors.InvalidGraphError, "out of range"),
        (lambda w: w.write_split("bogus", np.array([0])), oa.ConfigError, "split name"),
        (lambda w: w.append_features(np.zeros((2, 3))), oa.errors.InvalidGraphError, r"shape \[k, 2\]"),
        (lambda w: w.append_features(np.full((1, 2), np.nan)), oa.errors.InvalidGraphError, "NaN"),
    ],
)
def test_bad_writer_input_is_named(tmp_path: Path, action, error, match) -> None:
    w = _writer(tmp_path, feature_dim=2, num_classes=4)
    with pytest.raises(error, match=match):
        action(w)
    w.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("labels", [np.array([0, 1, 5, 0, 1]), np.array([0, 10**12, 1, -1, 0])])
def test_a_stray_label_cannot_size_the_classes(tmp_path: Path, labels: np.ndarray) -> None:
    """Without num_classes, the largest label decides it: one past the node count (dense class ids
    cannot reach it) is a named error, not a 10**12-wide output layer later."""
    w = _writer(tmp_path)
    with pytest.raises(oa.errors.InvalidGraphError, match=r"makes num_classes=[\d,]+, more than the node count \(5\)"):
        w.write_labels(labels)
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_num_classes_given_is_bounded_too(tmp_path: Path) -> None:
    with pytest.raises(oa.errors.InvalidGraphError, match="num_classes=1,000,000,000,001, more than the node count"):
        _writer(tmp_path, num_classes=10**12 + 1)
    with pytest.raises(oa.errors.InvalidGraphError, match=r"more than the cap of 1,048,576"):
        _writer(tmp_path, num_nodes=1 << 21, num_classes=(1 << 20) + 1)
    assert list(tmp_path.iterdir()) == []


def test_overlapping_splits_rejected(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    w.write_split("train", np.array([0, 1]))
    with pytest.raises(oa.errors.InvalidGraphError, match="share 1 nodes"):
        w.write_split("test", np.array([1, 2]))
    w.abort()


def test_empty_graph_rejected(tmp_path: Path) -> None:
    with pytest.raises(oa.errors.InvalidGraphError, match="empty graph"):
        _writer(tmp_path, num_nodes=0)
    with pytest.raises(oa.errors.InvalidGraphError, match="no edges"):
        with _writer(tmp_path) as w:
            w.append_neighbors(np.zeros(5, dtype=int), np.zeros(0, dtype=int))
    assert list(tmp_path.iterdir()) == []


# -- bad datasets on disk --------------------------------------------------------------------------


def _manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def _save_manifest(path: Path, doc: dict) -> None:
    (path / "manifest.json").write_text(json.dumps(doc))


def _rewrite_small(path: Path, key: str, array: np.ndarray) -> None:
    doc = _manifest(path)
    entry = doc[key] if key in doc else doc["splits"][key]
    (path / entry["file"]).write_bytes(array.tobytes())
    entry["crc32"] = zlib.crc32(array.tobytes())
    _save_manifest(path, doc)


def test_missing_dataset(tmp_path: Path) -> None:
    with pytest.raises(oa.errors.DatasetNotFoundError, match="not a directory"):
        oa.open_dataset(tmp_path / "nope")
    (tmp_path / "half").mkdir()
    with pytest.raises(oa.errors.DatasetNotFoundError, match="manifest.json is missing"):
        oa.open_dataset(tmp_path / "half")


@pytest.mark.parametrize(
    ("tamper", "error", "match"),
    [
        (lambda p: (p / "features.bin").unlink(), oa.errors.DatasetCorruptError, "features.bin is missing"),
        (lambda p: os.truncate(p / "indices.bin", 8), oa.errors.DatasetCorruptError, "truncated"),
        (lambda p: (p / "manifest.json").write_text("{not json"), oa.errors.ManifestError, "not valid JSON"),
        (lambda p: _save_manifest(p, {**_manifest(p), "format_version": 99}), oa.errors.FormatVersionError, "format_version 99"),
        (lambda p: _save_manifest(p, {**_manifest(p), "format": "other"}), oa.errors.ManifestError, "not an outre-async"),
        (lambda p: _save_manifest(p, {k: v for k, v in _manifest(p).items() if k != "indptr"}), oa.errors.ManifestError, "lacks required key"),
        (lambda p: _save_manifest(p, {**_manifest(p), "indices": {**_manifest(p)["indices"], "dtype": "float64"}}),
         oa.errors.ManifestError, "indices dtype"),
        (lambda p: (p / "labels.bin").write_bytes(b"\0" * (p / "labels.bin").stat().st_size), oa.errors.DatasetCorruptError, "checksum"),
        (lambda p: _rewrite_small(p, "indptr", _nonmonotone(p)), oa.errors.DatasetCorruptError, "not monotone"),
        (lambda p: _rewrite_small(p, "labels", np.full(50, 7, dtype=np.int64)), oa.errors.DatasetCorruptError, "labels fall outside"),
        (lambda p: _save_manifest(p, {**_manifest(p), "num_classes": 10**12 + 1}), oa.errors.ManifestError,
         "num_classes=1,000,000,000,001, more than the node count"),
        (lambda p: _rewrite_small(p, "test", np.array([1, 2, 3, 4, 99], dtype=np.int64)), oa.errors.DatasetCorruptError, "outside"),
        (lambda p: _rewrite_small(p, "test", np.array([1, 2, 3, 4, 4], dtype=np.int64)), oa.errors.DatasetCorruptError, "more than once"),
    ],
)
def test_bad_dataset_on_disk_is_named(tmp_path: Path, tamper, error, match) -> None:
    _write(tmp_path / "ds")
    tamper(tmp_path / "ds")
    with pytest.raises(error, match=match):
        oa.open_dataset(tmp_path / "ds")


def _nonmonotone(path: Path) -> np.ndarray:
    indptr = np.fromfile(path / "indptr.bin", dtype=np.int64)
    indptr[10], indptr[11] = indptr[11] + 1, indptr[10]
    return indptr


def test_verify_finds_out_of_range_indices(tmp_path: Path) -> None:
    _write(tmp_path / "ds")
    idx = np.fromfile(tmp_path / "ds" / "indices.bin", dtype=np.int32)
    idx[3] = 1000
    idx.tofile(tmp_path / "ds" / "indices.bin")
    ds = oa.open_dataset(tmp_path / "ds")
    with pytest.raises(oa.errors.DatasetCorruptError, match="outside"):
        ds.verify()


def _poke_features(path: Path, cells: list[tuple[int, int]], value: float) -> None:
    f = oa.open_dataset(path).manifest.features
    assert f is not None
    with open(path / f.file, "r+b") as out:
        for row, col in cells:
            out.seek(row * f.stride + col * np.dtype(f.dtype).itemsize)
            out.write(np.array([value], dtype=f.dtype).tobytes())


@pytest.mark.parametrize(("dim", "dtype"), [(8, "float32"), (100, "float32"), (12, "float16")])
def test_verify_finds_non_finite_features(tmp_path: Path, dim: int, dtype: str) -> None:
    """A NaN in features.bin used to pass --verify (only indices were scanned); now the first bad cell
    and the count are named, whatever block a cell falls in (the scan reads a few rows at a time)."""
    _write(tmp_path / "ds", dim=dim, dtype=dtype)
    oa.open_dataset(tmp_path / "ds").verify(chunk=3 * dim)
    _poke_features(tmp_path / "ds", [(41, dim - 1)], np.inf)
    _poke_features(tmp_path / "ds", [(17, 3), (17, 5)], np.nan)
    ds = oa.open_dataset(tmp_path / "ds")
    for chunk in (1, 3 * dim, 1 << 24):
        with pytest.raises(oa.errors.DatasetCorruptError, match=r"features.bin holds 3 non-finite feature value\(s\) "
                                                         r"\(NaN or inf\), the first at row 17, column 3"):
            ds.verify(chunk=chunk)


def test_verify_ignores_row_padding_and_holds_a_block_at_a_time(tmp_path: Path) -> None:
    import tracemalloc

    _write(tmp_path / "ds", n=400, dim=100)  # 400-byte rows padded to 512: the padding is not a feature
    f = oa.open_dataset(tmp_path / "ds").manifest.features
    assert f is not None and f.stride > f.row_bytes
    _poke_features(tmp_path / "ds", [(9, 120)], np.nan)  # column 120 lies in row 9's padding
    ds = oa.open_dataset(tmp_path / "ds")
    tracemalloc.start()
    try:
        ds.verify(chunk=2 * 128)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < f.nbytes // 8, (peak, f.nbytes)  # a block of two rows and a file buffer, not the file
    _poke_features(tmp_path / "ds", [(9, 99)], np.nan)  # the row's last feature
    with pytest.raises(oa.errors.DatasetCorruptError, match="holds 1 non-finite feature value.s. .NaN or inf., the first at row 9, column 99"):
        ds.verify(chunk=2 * 128)


def test_info_verify_names_a_nan_feature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from outre_async.cli import main

    _write(tmp_path / "ds")
    _poke_features(tmp_path / "ds", [(30, 2)], np.nan)
    assert main(["info", str(tmp_path / "ds")]) == 0  # opening does not scan O(N*D); --verify does
    capsys.readouterr()
    assert main(["info", str(tmp_path / "ds"), "--verify"]) == 2
    err = capsys.readouterr().err
    assert "holds 1 non-finite feature value(s) (NaN or inf), the first at row 30, column 2" in err
    assert err.count("\n") == 1


def test_public_names_are_exported() -> None:
    for name in oa.__all__:
        assert getattr(oa, name) is not None, name
    with pytest.raises(AttributeError):
        _ = oa.not_a_name  # type: ignore[attr-defined]
