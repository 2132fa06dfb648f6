"""Importing and re-casting in every feature dtype: ``generate``/``convert --feature-dtype``,
``oa.recast``/``outre recast`` (streaming, atomic, the reconstruction error printed and kept in the
manifest's meta), a bfloat16 tensor imported as it is, NaN/inf refused naming the row, and the copies
that must keep the encoding and the scales (``split_edges``, ``reorder``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph
from torch_geometric.data import Data

import outre_async as oa
from outre_async.cli import main as cli
from outre_async.errors import NonFiniteFeatureError, OverwriteRefusedError
from outre_async.ingest import _recast
from outre_async.partition import partition, reorder
from outre_async.store._row_codec import decode_rows, encode_rows
from outre_async.store._tempdir import parse_temp_name

ENCODINGS = ["float32", "float16", "bfloat16", "int8"]
SMALL = dict(num_nodes=600, feature_dim=13)


def _decoded(ds: oa.Dataset) -> np.ndarray:
    return decode_rows(np.asarray(ds.features[:]), ds.row_format)


def _no_litter(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if parse_temp_name(p.name) is not None]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    """A float32 dataset with labels, node splits and edge splits (a recast copies them all)."""
    root = tmp_path_factory.mktemp("src")
    oa.generate(root / "g", "tiny", **SMALL)
    return oa.open_dataset(oa.split_edges(root / "g", root / "s", val=0.1, test=0.1))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_generate_stores_the_encoding_of_the_float32_rows(tmp_path: Path, encoding: str) -> None:
    full = oa.open_dataset(oa.generate(tmp_path / "f32", "tiny", **SMALL))
    ds = oa.open_dataset(oa.generate(tmp_path / encoding, "tiny", feature_dtype=encoding, chunk_nodes=97, **SMALL))
    x = np.asarray(full.features[:])
    assert ds.row_format.encoding == encoding and ds.manifest.meta["generator"]["feature_dtype"] == encoding
    assert np.array_equal(np.asarray(ds.features[:]), encode_rows(x, ds.row_format))  # one encode of the float32 rows
    cast = ds.manifest.meta.get("feature_cast")
    assert (cast is None) == (encoding == "float32")
    if cast:
        err = np.abs(_decoded(ds).astype(np.float64) - x)
        assert cast["max_abs_error"] == pytest.approx(err.max())
        assert cast["relative_rms"] == pytest.approx(np.sqrt((err ** 2).sum() / (x.astype(np.float64) ** 2).sum()))
    if encoding == "int8":  # the scales come from every row, whatever the chunking
        other = oa.open_dataset(oa.generate(tmp_path / "i8b", "tiny", feature_dtype="int8", chunk_nodes=600, **SMALL))
        assert np.array_equal(other.row_format.scale, ds.row_format.scale)
        assert np.array_equal(np.asarray(other.features[:]), np.asarray(ds.features[:]))
        assert not (ds.path / "features.f32.spill").exists()


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_convert_feature_dtype_flag(tmp_path: Path, encoding: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 7)) * 3  # float64 input
    np.savez(tmp_path / "g.npz", x=x, edge_index=rng.integers(0, 50, (2, 200)), y=rng.integers(0, 3, 50))
    assert cli(["convert", str(tmp_path / "g.npz"), str(tmp_path / "d"), "--feature-dtype", encoding]) == 0
    ds = oa.open_dataset(tmp_path / "d")
    assert ds.row_format.encoding == encoding
    assert np.array_equal(np.asarray(ds.features[:]), encode_rows(x, ds.row_format))
    ds.verify()


def test_a_bfloat16_tensor_is_stored_as_it_is(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=g).to(torch.bfloat16)
    data = Data(x=x, edge_index=torch.randint(0, 12, (2, 40), generator=g), y=torch.randint(0, 3, (12,), generator=g))
    ds = oa.open_dataset(oa.from_pyg(data, tmp_path / "b"))
    assert ds.row_format.encoding == "bfloat16" and "feature_cast" in ds.manifest.meta
    assert ds.manifest.meta["feature_cast"]["max_abs_error"] == 0.0  # nothing rounded
    assert np.array_equal(_decoded(ds), x.float().numpy())
    wide = oa.open_dataset(oa.from_pyg(data, tmp_path / "w", feature_dtype="float32"))
    assert np.array_equal(np.asarray(wide.features[:]), x.float().numpy())


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_at_import_names_the_row_and_leaves_nothing(tmp_path: Path, encoding: str, bad: float) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, 4)).astype(np.float32)
    x[21, 3] = bad
    with pytest.raises(NonFiniteFeatureError, match=r"feature row 21 holds (nan|inf) at column 3") as info:
        oa.write_dataset(tmp_path / "d", edge_index=rng.integers(0, 30, (2, 90)), x=x, feature_dtype=encoding)
    assert info.value.row == 21
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_recast_copies_everything_and_encodes_the_decoded_rows(source: oa.Dataset, tmp_path: Path,
                                                               encoding: str) -> None:
    out = oa.recast(source, tmp_path / "r", feature_dtype=encoding, chunk_bytes=1000)  # many chunks
    ds = oa.open_dataset(out)
    assert ds.row_format.encoding == encoding
    assert np.array_equal(np.asarray(ds.features[:]), encode_rows(_decoded(source), ds.row_format))
    assert np.array_equal(ds.indptr, source.indptr) and np.array_equal(ds.indices, source.indices)
    assert np.array_equal(ds.labels, source.labels) and ds.split_names == source.split_names
    for name in source.split_names:
        assert np.array_equal(ds.split(name), source.split(name))
    assert ds.edge_split_names == source.edge_split_names
    for name in source.edge_split_names:
        assert np.array_equal(ds.edge_split(name), source.edge_split(name))
    assert ds.manifest.meta["recast"] == {"source": str(source.path), "from": "float32", "to": encoding}
    assert ds.manifest.meta["edge_split"] == source.manifest.meta["edge_split"]
    assert ("feature_cast" in ds.manifest.meta) == (encoding != "float32")
    _no_litter(tmp_path)


def test_recast_between_lossy_encodings_and_back_to_the_same_one(source: oa.Dataset, tmp_path: Path) -> None:
    i8 = oa.open_dataset(oa.recast(source, tmp_path / "i8", feature_dtype="int8"))
    again = oa.open_dataset(oa.recast(i8, tmp_path / "again", feature_dtype="int8"))  # bits and scales copied
    assert np.array_equal(np.asarray(again.features[:]), np.asarray(i8.features[:]))
    assert np.array_equal(again.row_format.scale, i8.row_format.scale)
    assert "feature_cast" not in again.manifest.meta  # nothing was re-quantized
    bf = oa.open_dataset(oa.recast(i8, tmp_path / "bf", feature_dtype="bfloat16"))
    err = np.abs(_decoded(bf).astype(np.float64) - _decoded(i8))
    assert bf.manifest.meta["feature_cast"]["max_abs_error"] == pytest.approx(err.max())  # against the int8 values


def test_a_failed_recast_leaves_nothing(source: oa.Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing(rows: np.ndarray, fmt: oa.store.RowFormat) -> np.ndarray:
        calls.append(len(rows))
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return decode_rows(rows, fmt)

    monkeypatch.setattr(_recast, "decode_rows", failing)
    for encoding in ("float16", "int8"):
        calls.clear()
        with pytest.raises(OSError, match="No space left"):
            oa.recast(source, tmp_path / "r", feature_dtype=encoding, chunk_bytes=1000)
        assert list(tmp_path.iterdir()) == []


def test_recast_follows_the_overwrite_rules(source: oa.Dataset, tmp_path: Path) -> None:
    oa.recast(source, tmp_path / "r", feature_dtype="float16")
    with pytest.raises(oa.errors.DatasetExistsError, match="already exists"):
        oa.recast(source, tmp_path / "r", feature_dtype="int8")
    oa.recast(source, tmp_path / "r", feature_dtype="int8", overwrite=True)
    assert oa.open_dataset(tmp_path / "r").row_format.encoding == "int8"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(OverwriteRefusedError):
        oa.recast(source, tmp_path / "mine", feature_dtype="int8", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    with pytest.raises(oa.ConfigError, match="feature dtype must be one of"):
        oa.recast(source, tmp_path / "x", feature_dtype="float8")
    assert not (tmp_path / "x").exists()


def test_outre_recast_prints_the_error_and_json_only_with_json(source: oa.Dataset, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["recast", str(source.path), "--feature-dtype", "int8", "--out", str(tmp_path / "r")]) == 0
    said = capsys.readouterr().out
    assert "features float32 -> int8 (13 B a row" in said and "reconstruction error: max abs" in said
    assert cli(["recast", str(source.path), "--feature-dtype", "bfloat16", "--out", str(tmp_path / "j"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # stdout is the JSON alone
    assert out["feature_dtype"] == "bfloat16" and out["row_bytes"] == 26
    assert set(out["feature_cast"]) == {"encoding", "max_abs_error", "relative_rms"}
    assert cli(["info", str(tmp_path / "r")]) == 0
    info = capsys.readouterr().out
    assert "13 x int8" in info and "minmax scales" in info and "cast error: max abs" in info
    assert cli(["info", str(tmp_path / "j"), "--json"]) == 0
    enc = json.loads(capsys.readouterr().out)["feature_encoding"]
    assert (enc["encoding"], enc["stored_as"], enc["row_bytes"]) == ("bfloat16", "uint16", 26)


def test_split_edges_and_reorder_keep_the_encoding_and_the_scales(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    indptr, indices = random_graph(rng, 300, 8)
    x = rng.standard_normal((300, 11)).astype(np.float32)
    with oa.DatasetWriter(tmp_path / "g", num_nodes=300, feature_dim=11, feature_dtype="int8", num_classes=2) as w:
        w.write_csc(indptr, indices)
        w.append_features(x)
    ds = oa.open_dataset(tmp_path / "g")
    split = oa.open_dataset(oa.split_edges(ds, tmp_path / "s", val=0.1, test=0.1))
    assert np.array_equal(np.asarray(split.features[:]), np.asarray(ds.features[:]))
    assert np.array_equal(split.row_format.scale, ds.row_format.scale)
    assert np.array_equal(split.row_format.zero, ds.row_format.zero)
    parts = partition(ds, 4, name="p4")
    new = reorder(ds, "p4", tmp_path / "r")
    order = np.argsort(parts.assignment, kind="stable")
    assert new.row_format.encoding == "int8" and new.manifest.features.quantizer == "minmax"
    assert np.array_equal(np.asarray(new.features[:]), np.asarray(ds.features[:])[order])
    assert np.array_equal(new.row_format.scale, ds.row_format.scale)
    np.testing.assert_array_equal(_decoded(new), _decoded(ds)[order])
