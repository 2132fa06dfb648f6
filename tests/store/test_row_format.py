"""A feature row's format (stored, held, delivered) and the dataset's feature files, built once from
the manifest; and the source scan that keeps ``4 * dim``-style row sizes out of the package."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import outre_async as oa
from outre_async.features import FeatureFile as SourceFeatureFile
from outre_async.store import NODE_FEATURES, FeatureFile, FeatureKey, RowFormat, RowLayout

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("outre_async", "cache", "partition")  # outre_async, outre_async.cache, outre_async.partition
# issue 35's ``git grep -nE`` pattern, and ``4 * <anything>.dim`` (``4 * self.cache.dim`` hid from it)
ROW_LITERAL = re.compile(r"4 \* (sizes\.|ds\.|self\.)?(dim|feature_dim)|dim \* 4|\b4 \* [a-z_.]*dim\b")


def _dataset(path: Path, *, dim: int, dtype: str = "float32", row_layout: str = "auto") -> oa.Dataset:
    rng = np.random.default_rng(0)
    n = 30
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, feature_dtype=dtype, row_layout=row_layout,  # type: ignore[arg-type]
                          num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), rng.integers(0, n, n))
        if dim:
            w.append_features(rng.standard_normal((n, dim)).astype(dtype))
    return oa.open_dataset(path)


@pytest.mark.parametrize(("dim", "dtype", "layout", "stored", "stride"), [
    (129, "float32", "packed", 516, 516),    # 516 B rows stay packed (``_layout``'s example)
    (100, "float32", "padded", 400, 512),    # 400 B rows pad to one sector
    (100, "float16", "padded", 200, 512),    # float16 on disk and held, delivered float32
    (7, "float16", "packed", 14, 14),
])
def test_the_row_format_comes_from_the_manifest_entry(tmp_path: Path, dim: int, dtype: str, layout: str,
                                                      stored: int, stride: int) -> None:
    ds = _dataset(tmp_path / "ds", dim=dim, dtype=dtype, row_layout=layout)
    assert list(ds.feature_files) == [NODE_FEATURES] == [FeatureKey("node", None, "x")]
    file = ds.feature_files[NODE_FEATURES]
    assert file is ds.feature_file and FeatureFile.of(ds) is file and SourceFeatureFile is FeatureFile
    assert file.format == RowFormat.of_entry(ds.manifest.features) == RowFormat(dim=dim, stored=np.dtype(dtype))
    assert (file.format.stored, file.format.held, file.format.delivered) == (np.dtype(dtype), np.dtype(dtype), np.float32)
    assert (file.format.stored_row_bytes, file.format.held_row_bytes, file.format.delivered_row_bytes) == (
        stored, stored, 4 * dim)
    assert file.format.encoding == dtype and file.format.decodes == (dtype != "float32")
    assert file.layout == ds.row_layout == RowLayout(row_bytes=stored, stride=stride, layout=layout)  # type: ignore[arg-type]
    assert (file.path, file.num_rows, file.dim, file.dtype, file.stride, file.nbytes) == (
        ds.features_path, 30, dim, np.dtype(dtype), stride, 30 * stride)
    assert ds.row_format is file.format and ds.features.shape == (30, dim)  # the memmap stays as it was


def test_a_topology_only_dataset_has_no_feature_files(tmp_path: Path) -> None:
    ds = _dataset(tmp_path / "ds", dim=0)
    assert dict(ds.feature_files) == {}
    with pytest.raises(oa.ConfigError, match="has no features"):
        ds.feature_file  # noqa: B018  # the property raises
    with pytest.raises(TypeError):
        ds.feature_files[NODE_FEATURES] = None  # type: ignore[index]  # read-only


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"dim": 4, "stored": "int16"}, "stored as int16 are not supported"),
    ({"dim": 4, "stored": "int8"}, "need a finite float32 scale"),
    ({"dim": 4, "stored": "int8", "scale": np.ones(4, np.float32)}, "need a finite float32 zero"),
    ({"dim": 4, "stored": "int8", "scale": np.ones(3, np.float32), "zero": np.zeros(4, np.float32)}, r"shape \(4,\)"),
    ({"dim": 4, "stored": "int8", "scale": np.array([1, 0, 1, 1], np.float32), "zero": np.zeros(4, np.float32)},
     "scales must be > 0, column 1"),
    ({"dim": 4, "stored": "int8", "scale": np.array([1, np.inf, 1, 1], np.float32), "zero": np.zeros(4, np.float32)},
     "finite float32 scale"),
    ({"dim": 4, "stored": "uint16", "encoding": "float16"}, "cannot be stored as uint16"),
    ({"dim": 4, "stored": "float32", "encoding": "float64"}, "cannot be stored as float32 words"),
    ({"dim": 4, "stored": "float32", "held": "float16"}, "cannot be held as float16"),
    ({"dim": 4, "stored": "float16", "delivered": "int8"}, "delivered as int8"),
    ({"dim": 4, "stored": "float32", "scale": np.ones(4)}, "take no scale"),
    ({"dim": 4, "stored": "int64"}, "stored as int64 are not supported"),
    ({"dim": 0, "stored": "float32"}, "dim >= 1"),
    ({"dim": 2.5, "stored": "float32"}, "integer dim"),
])
def test_formats_no_reader_is_wired_for_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(oa.ConfigError, match=match):
        RowFormat(**kwargs)


@pytest.mark.parametrize(("encoding", "stored"), [
    ("float32", "float32"), ("float16", "float16"), ("bfloat16", "uint16"), ("int8", "int8")])
def test_the_four_encodings_construct_and_are_held_as_stored(encoding: str, stored: str) -> None:
    params = {"scale": np.ones(3, np.float32), "zero": np.zeros(3, np.float32)} if encoding == "int8" else {}
    fmt = RowFormat.of_encoding(encoding, 3, **params)
    assert (fmt.encoding, fmt.stored, fmt.held, fmt.delivered) == (encoding, np.dtype(stored), np.dtype(stored),
                                                                   np.float32)
    assert RowFormat(dim=3, stored=np.dtype(stored), **params).encoding == encoding  # implied by the words
    held = RowFormat(dim=3, stored=np.dtype(stored), held=np.dtype(stored), encoding=encoding, **params)
    assert held.held_row_bytes == held.stored_row_bytes == 3 * np.dtype(stored).itemsize
    assert fmt.lossy == (encoding != "float32")
    copy = RowFormat.of_encoding(encoding, 3, **{k: v.copy() for k, v in params.items()})
    assert copy == fmt and hash(copy) == hash(fmt) and copy == held  # by value (held as stored either way)
    if encoding == "int8":
        assert copy != RowFormat.of_encoding("int8", 3, scale=np.full(3, 2, np.float32), zero=np.zeros(3, np.float32))


def test_a_feature_file_layout_must_match_its_format(tmp_path: Path) -> None:
    row = RowFormat(dim=8, stored=np.dtype("float16"))
    assert FeatureFile.packed(tmp_path / "f", 3, row).layout == RowLayout(row_bytes=16, stride=16, layout="packed")
    with pytest.raises(oa.ConfigError, match="the layout says 32"):
        FeatureFile(path=tmp_path / "f", num_rows=3, format=row, layout=RowLayout(row_bytes=32, stride=32, layout="packed"))


def test_no_row_size_is_written_as_four_times_dim() -> None:
    """Feature and history rows are sized by their ``RowFormat``: a ``4 * dim`` left in the package
    would plan float32 rows whatever the format holds (issue 35's pattern, ``git grep -nE``)."""
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for d in PACKAGE_DIRS for p in sorted((ROOT / d).rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if ROW_LITERAL.search(line)]
    assert hits == [], "size rows from their RowFormat (held_row_bytes, ...), not 4 * dim:\n" + "\n".join(hits)
