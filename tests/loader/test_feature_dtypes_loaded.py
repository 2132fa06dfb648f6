"""Every stored feature dtype loads as the NumPy reference decodes it: ``OutreLoader`` (memory, pread
and io_uring backends), ``SyncLoader`` and the feature sources' row and slot reads give
``decode_rows`` of the stored rows, at odd dims (2-byte and 1-byte rows that straddle sectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, run

import outre_async as oa
from outre_async.features import MemorySource, detect_io_uring, open_source
from outre_async.store._row_codec import decode_rows
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(180)

ENCODINGS = ["float16", "bfloat16", "int8"]
BACKENDS = ["memory", "pread", pytest.param("io_uring", marks=pytest.mark.skipif(
    not detect_io_uring(), reason="io_uring unavailable here"))]
N, DIM = 400, 37  # 74 B and 37 B rows: packed, straddling sectors
KNOBS = dict(num_samplers=1)  # the non-PyG knobs of this module, in one place (backend is passed per test)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, oa.Dataset]:
    root = tmp_path_factory.mktemp("dtypes")
    rng = np.random.default_rng(0)
    indptr, indices = random_graph(rng, N, 6)
    x = (rng.standard_normal((N, DIM)) * rng.uniform(0.01, 100, DIM)).astype(np.float32)
    x[:, 3] = 2.5  # a constant column
    out = {}
    for enc in ENCODINGS:
        with oa.DatasetWriter(root / enc, num_nodes=N, feature_dim=DIM, feature_dtype=enc, num_classes=3) as w:
            w.write_csc(indptr, indices)
            for part in np.array_split(x, 4):
                w.append_features(part)
            w.write_labels(rng.integers(0, 3, N))
            w.write_split("train", np.arange(300))
        out[enc] = oa.open_dataset(root / enc)
    return out


def reference(ds: oa.Dataset, ids: np.ndarray) -> np.ndarray:
    return decode_rows(np.asarray(ds.features[ids]), ds.row_format)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_outre_loader_delivers_the_decoded_rows(stores: dict, encoding: str, backend: str) -> None:
    ds = stores[encoding]
    with oa.OutreLoader(ds, **group_knobs(dict(fanouts=[4, 3], batch_size=32, memory_budget="4MiB", backend=backend, **KNOBS))) as loader:
        batches = 0
        for batch in loader:
            assert batch.x.dtype == torch.float32
            np.testing.assert_array_equal(batch.x.numpy(), reference(ds, batch.n_id.numpy()))
            batches += 1
        assert batches == len(loader) > 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_sync_loader_delivers_the_decoded_rows(stores: dict, encoding: str) -> None:
    ds = stores[encoding]
    for batch in oa.SyncLoader(ds, fanouts=[3], batch_size=64):
        np.testing.assert_array_equal(batch.x.numpy(), reference(ds, batch.n_id.numpy()))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_sources_read_rows_and_slots_as_decoded(stores: dict, encoding: str, backend: str) -> None:
    """Random, sorted, duplicate ids into rows and into float32 slots; a buffer of the stored dtype
    (rows held as stored) gets the stored words bit for bit."""
    ds = stores[encoding]
    rng = np.random.default_rng(5)
    id_sets = [rng.integers(0, N, 200), np.sort(rng.choice(N, 150, replace=False)), np.repeat(rng.integers(0, N, 20), 3),
               np.array([N - 1]), np.arange(N)]

    async def main() -> None:
        async with open_source(ds, backend) as src:
            for ids in id_sets:
                out = np.full((len(ids), DIM), np.nan, np.float32)
                await src.read_rows(ids, out)
                np.testing.assert_array_equal(out, reference(ds, ids))
                slots = rng.permutation(2 * N)[: len(ids)]
                buf = np.full((2 * N, DIM), np.nan, np.float32)
                await src.read_rows_into(ids, buf, slots)
                np.testing.assert_array_equal(buf[slots], reference(ds, ids))
                held = np.zeros((2 * N, DIM), ds.row_format.stored)
                await src.read_rows_into(ids, held, slots)
                assert np.array_equal(held[slots], np.asarray(ds.features[ids]))

    run(main())


def test_a_memory_source_checks_its_format_against_the_rows() -> None:
    with pytest.raises(oa.ConfigError, match="bfloat16 rows of 4 values are uint16 words, got float32"):
        MemorySource(np.zeros((3, 4), np.float32), oa.store.RowFormat.of_encoding("bfloat16", 4))


def test_the_memory_source_of_a_dataset_carries_its_format(stores: dict, tmp_path: Path) -> None:
    ds = stores["int8"]
    src = MemorySource.from_dataset(ds)
    assert src.format == ds.row_format and src.features.dtype == np.int8


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pyg_feature_store_returns_the_decoded_rows(stores: dict, encoding: str) -> None:
    from outre_async.pyg import OutreFeatureStore

    ds = stores[encoding]
    ids = np.array([5, 0, N - 1, 5, 17])
    with OutreFeatureStore(ds, backend="pread") as store:
        x = store.get_tensor(group_name=None, attr_name="x", index=torch.from_numpy(ids))
    assert x.dtype == torch.float32
    np.testing.assert_array_equal(x.numpy(), reference(ds, ids))


def test_verify_scans_bfloat16_words_for_nan_and_inf(stores: dict, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(stores["bfloat16"].path, tmp_path / "d")
    stores["bfloat16"].verify()  # every word finite
    ds = oa.open_dataset(tmp_path / "d")
    stride = ds.row_layout.stride
    with open(tmp_path / "d" / "features.bin", "r+b") as f:  # row 9, column 4: an inf word (0x7F80)
        f.seek(9 * stride + 4 * 2)
        f.write(np.array([0x7F80], np.uint16).tobytes())
    with pytest.raises(oa.errors.DatasetCorruptError, match="the first at row 9, column 4"):
        ds.verify()
