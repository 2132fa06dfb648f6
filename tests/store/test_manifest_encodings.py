"""Manifest format 2: the feature entry names its encoding, an int8 entry its quantizer, scale and
zero files; every new field is validated with a named error, and a version-1 store (written before
encodings had a name) still opens as the float32 or float16 store it is."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import outre_async as oa
from outre_async.errors import DatasetCorruptError, FormatVersionError, ManifestError
from outre_async.store._manifest import FORMAT_VERSION


def _store(path: Path, encoding: str, dim: int = 6, n: int = 40) -> tuple[oa.Dataset, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, feature_dtype=encoding, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        for part in np.array_split(x, 3):
            w.append_features(part)
    return oa.open_dataset(path), x


def _edit(path: Path, change: Any) -> None:
    doc = json.loads((path / "manifest.json").read_text())
    change(doc)
    (path / "manifest.json").write_text(json.dumps(doc))


def _as_version_1(doc: dict[str, Any]) -> None:
    """The manifest the version-1 writer wrote: no encoding, quantizer, scale or zero keys."""
    doc["format_version"] = 1
    for key in ("encoding", "quantizer", "scale", "zero"):
        del doc["features"][key]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_version_1_store_still_opens_and_reads_the_same(tmp_path: Path, dtype: str) -> None:
    ds, _ = _store(tmp_path / "v1", dtype)
    want = np.asarray(ds.features[:]).copy()
    _edit(tmp_path / "v1", _as_version_1)
    old = oa.open_dataset(tmp_path / "v1")
    assert old.manifest.format_version == 1 and old.manifest.features is not None
    assert (old.manifest.features.encoding, old.row_format.encoding, old.row_format.stored) == (dtype, dtype, np.dtype(dtype))
    assert np.array_equal(old.features[:], want)
    assert old.summary()["feature_encoding"]["format_version"] == 1
    old.verify()


def test_a_version_1_entry_cannot_claim_the_new_words(tmp_path: Path) -> None:
    _store(tmp_path / "v1", "bfloat16")

    def old_bf16(doc: dict[str, Any]) -> None:
        _as_version_1(doc)
    _edit(tmp_path / "v1", old_bf16)
    with pytest.raises(ManifestError, match="a format_version 1 feature entry stores float32 or float16, got 'uint16'"):
        oa.open_dataset(tmp_path / "v1")


@pytest.mark.parametrize(("encoding", "words"), [("float32", "float32"), ("float16", "float16"),
                                                 ("bfloat16", "uint16"), ("int8", "int8")])
def test_the_writer_names_the_encoding_in_format_2(tmp_path: Path, encoding: str, words: str) -> None:
    ds, _ = _store(tmp_path / "d", encoding)
    doc = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert doc["format_version"] == FORMAT_VERSION == 2
    assert (doc["features"]["encoding"], doc["features"]["dtype"]) == (encoding, words)
    f = ds.manifest.features
    assert f is not None and (f.quantizer is not None) == (encoding == "int8") == bool(f.param_files)
    if encoding == "int8":
        assert f.quantizer == "minmax" and f.scale is not None and f.scale.shape == (6,)
        assert {e.file for e in f.param_files} == {"feature_scale.bin", "feature_zero.bin"}


def _set(*keys: str, value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        target = doc
        for key in keys[:-1]:
            target = target[key]
        if value is KeyError:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return change


@pytest.mark.parametrize(("encoding", "change", "error", "match"), [
    ("float32", _set("features", "encoding", value=KeyError), ManifestError, "features.encoding must be one of"),
    ("float32", _set("features", "encoding", value="float64"), ManifestError, "features.encoding must be one of"),
    ("float16", _set("features", "encoding", value="bfloat16"), ManifestError,
     "bfloat16 features are stored as uint16, the entry says dtype 'float16'"),
    ("bfloat16", _set("features", "dtype", value="int16"), ManifestError, "features dtype must be one of"),
    ("int8", _set("features", "scale", value=None), ManifestError, r"int8 features need features.scale"),
    ("int8", _set("features", "quantizer", value=KeyError), ManifestError, r"int8 features need features.quantizer"),
    ("int8", _set("features", "quantizer", value="p99"), ManifestError, r"features.quantizer must be one of \['minmax'\]"),
    ("int8", lambda doc: doc["features"]["zero"].update(shape=[5], nbytes=20), ManifestError,
     r"features.zero must hold one value per column, shape \[6\], got \[5\]"),
    ("int8", _set("features", "zero", "dtype", value="float64"), ManifestError, "feature_params dtype must be one of"),
    ("int8", _set("features", "scale", "nbytes", value=25), ManifestError, "feature_params has nbytes=25"),
    ("float32", _set("features", "quantizer", value="minmax"), ManifestError,
     "features.quantizer belongs to int8 features, the entry is float32"),
    ("int8", _set("format_version", value=3), FormatVersionError, r"this outre-async reads \[1, 2\]"),
    ("int8", _set("features", "scale", "file", value="../elsewhere.bin"), DatasetCorruptError,
     "names '../elsewhere.bin', which is not a plain file name"),
])
def test_each_new_field_is_validated(tmp_path: Path, encoding: str, change: Any, error: type, match: str) -> None:
    _store(tmp_path / "d", encoding)
    _edit(tmp_path / "d", change)
    with pytest.raises(error, match=match):
        oa.open_dataset(tmp_path / "d")


def test_scale_files_are_checked_for_size_checksum_and_values(tmp_path: Path) -> None:
    ds, _ = _store(tmp_path / "d", "int8")
    scale = tmp_path / "d" / "feature_scale.bin"
    good = scale.read_bytes()
    scale.write_bytes(good[:-4])
    with pytest.raises(DatasetCorruptError, match="feature_scale.bin"):
        oa.open_dataset(tmp_path / "d")
    scale.write_bytes(b"\0" * len(good))  # the right size, the wrong checksum
    with pytest.raises(DatasetCorruptError, match="feature_scale.bin fails its checksum"):
        oa.open_dataset(tmp_path / "d")
    zeros = np.zeros(6, np.float32)  # a checksum that matches a scale of 0: refused by its value
    _edit(tmp_path / "d", _set("features", "scale", "crc32", value=zlib.crc32(zeros.tobytes())))
    with pytest.raises(DatasetCorruptError, match=r"does not decode \(int8 scales must be > 0, column 0"):
        oa.open_dataset(tmp_path / "d")


def test_overwrite_counts_the_scale_files_as_the_datasets_own(tmp_path: Path) -> None:
    _store(tmp_path / "d", "int8")
    ds, _ = _store(tmp_path / "d2", "bfloat16")
    with oa.DatasetWriter(tmp_path / "d", num_nodes=3, feature_dim=0, num_classes=2, overwrite=True) as w:
        w.write_csc(np.array([0, 1, 2, 3]), np.array([1, 2, 0]))
    assert not (tmp_path / "d" / "feature_scale.bin").exists()
    assert ds.row_format.encoding == "bfloat16"
