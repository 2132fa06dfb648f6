"""The loader holds feature rows as the disk stores them and decodes them once (``features._decode``):
a float16 store fills float16 buffer slots, GPU-tier rows and batch matrices (io_uring reads 512-byte
rows straight into slots), delivers ``x`` equal to a NumPy decode of its rows in ``x_dtype``, copies
held words to a device, and its memory plan prices a slot at the held bytes: the same budget holds
about twice the rows of a float32 store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.loader import _resources
from outre_async.loader._device_copy import SyncCopyEngine
from outre_async.loader import LoaderConfig
from outre_async.loader._budget import SLOT_BYTES, Sizes, plan_memory
from outre_async.store import RowFormat
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(240)

N = 400
# the non-PyG knobs these tests pass, in one place (rewritten mechanically when they move to option objects)
KNOBS = {name: {"backend": name, "num_samplers": 1, "num_extractors": 2} for name in ("memory", "pread", "io_uring")}
GPU_KNOBS = {"gpu_cache_budget": 40 * 512}
BACKENDS = ["memory", "pread", pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(),
                                                                                   reason="io_uring unavailable"))]


def store(path: Path, dim: int, dtype: str, seed: int = 0) -> oa.Dataset:
    rng = np.random.default_rng(seed)
    indptr, indices = random_graph(rng, N, 8)
    x = rng.standard_normal((N, dim)).astype(np.float16).astype(dtype)  # the same values in either dtype
    return write_store(path, indptr, indices, features=x, labels=rng.integers(0, 3, N), num_classes=3,
                       splits={"train": np.arange(300)}, feature_dtype=dtype)


def reference(ds: oa.Dataset, n_id: torch.Tensor, x_dtype: str) -> torch.Tensor:
    """The NumPy decode of the stored rows (a float16 cast), then torch's cast to ``x_dtype``."""
    return torch.from_numpy(np.asarray(ds.features)[n_id.numpy()].astype(np.float32)).to(getattr(torch, x_dtype))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [129, 256])
@pytest.mark.parametrize("x_dtype", ["float32", "float16", "bfloat16"])
def test_a_float16_store_is_held_as_stored_and_delivered_in_x_dtype(tmp_path: Path, backend: str, dim: int,
                                                                     x_dtype: str) -> None:
    ds = store(tmp_path / "ds", dim, "float16")
    with oa.OutreLoader(ds, **group_knobs(dict(fanouts=[4, 3], batch_size=32, memory_budget="16MiB", x_dtype=x_dtype,
                        **KNOBS[backend]))) as loader:
        for batch in loader:
            assert batch.x.dtype == getattr(torch, x_dtype)
            assert torch.equal(batch.x, reference(ds, batch.n_id, x_dtype))
        stats = loader.stats()
    rows = stats["feature_rows"]
    assert rows == {"encoding": "float16", "x_dtype": x_dtype, "stored_bytes": 2 * dim, "held_bytes": 2 * dim,
                    "delivered_bytes": dim * (4 if x_dtype == "float32" else 2),
                    "decoded_on": "none" if x_dtype == "float16" else "host"}
    assert stats["tiers"]["buffer"]["bytes_held"] == stats["tiers"]["buffer"]["slots"] * 2 * dim  # float16 slots
    assert stats["memory"]["feature buffer"] == loader.buffer_rows * (2 * dim + SLOT_BYTES)
    if backend == "io_uring":  # 512-byte rows land in the slots; 258-byte ones are staged
        assert (stats["io"]["rows_into_slots"] > 0) == (dim == 256)


def test_the_gpu_tier_holds_float16_rows_and_assembles_them_before_the_decode(tmp_path: Path) -> None:
    ds = store(tmp_path / "ds", 256, "float16")
    with oa.OutreLoader(ds, **group_knobs(dict(fanouts=[4, 3], batch_size=32, memory_budget="16MiB", **KNOBS["memory"],
                        **GPU_KNOBS))) as loader:
        for batch in loader:
            assert torch.equal(batch.x, reference(ds, batch.n_id, "float32"))
        gpu = loader.stats()["tiers"]["gpu"]
    assert gpu["rows_held"] == 40 and gpu["bytes_held"] == 40 * 512 and gpu["hits"] > 0


def test_a_device_copy_moves_held_words_and_decodes_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the copy engine (synchronous, on the CPU: the CUDA path's order of copy then torch
    decode): a float16 store copies 2 bytes a value where the same values stored as float32 copy 4."""

    moved: list[tuple[torch.dtype, torch.dtype]] = []  # (x copied, x the engine's transfer holds)

    class Engine(SyncCopyEngine):
        def submit(self, host: dict[str, torch.Tensor], on_done: Any, decode: Any = None) -> Any:
            transfer = super().submit(host, on_done, decode)
            moved.append((host["x"].dtype, transfer.tensors["x"].dtype))
            return transfer

    monkeypatch.setattr(_resources, "copy_engine_for", lambda device, depth: Engine("cpu"))
    copied, rows = {}, {}
    for dtype in ("float16", "float32"):
        ds = store(tmp_path / dtype, 129, dtype)
        with oa.OutreLoader(ds, **group_knobs(dict(fanouts=[4, 3], batch_size=32, memory_budget="16MiB", shuffle=False,
                            **KNOBS["memory"]))) as loader:
            rows[dtype] = 0
            for batch in loader:
                assert batch.x.dtype == torch.float32
                assert torch.equal(batch.x, reference(ds, batch.n_id, "float32"))
                rows[dtype] += len(batch.n_id)
            copied[dtype] = loader.stats()["copy_engine"]["bytes"]
    assert rows["float16"] == rows["float32"]
    assert copied["float32"] - copied["float16"] == rows["float16"] * 129 * 2
    # decoded by the engine right after the copy (on a GPU: on its stream, before the batch's event)
    assert set(moved) == {(torch.float16, torch.float32), (torch.float32, torch.float32)}


def test_the_same_budget_holds_about_twice_the_float16_rows() -> None:
    """The plan prices a buffer slot at the held row (2 bytes a value for float16) plus its bookkeeping:
    half the bytes of a float32 slot and, at the same budget, about twice the buffer rows."""
    cfg = LoaderConfig(fanouts=(10, 5), batch_size=512, memory_budget="256MiB", num_samplers=2, num_extractors=2)
    plans = {}
    for dtype in ("float32", "float16"):
        fmt = RowFormat(dim=256, stored=np.dtype(dtype))
        sizes = Sizes(num_nodes=10**6, format=fmt, stride=fmt.stored_row_bytes, max_rows=512 * 66, max_edges=512 * 60,
                      batch_rows=12_000)
        plans[dtype] = plan_memory(cfg, sizes, source="disk")
        assert plans[dtype].parts["feature buffer"] == plans[dtype].buffer_rows * (fmt.held_row_bytes + SLOT_BYTES)
    assert RowFormat(dim=256, stored=np.dtype("float16")).held_row_bytes * 2 == 1024
    ratio = plans["float16"].buffer_rows / plans["float32"].buffer_rows
    assert 1.8 < ratio <= 2.0, ratio
    # the batches' part is the same (a CPU decodes float32 batches in their matrices), up to a slot's rounding
    assert abs(plans["float16"].parts["batches"] - plans["float32"].parts["batches"]) < 256 * 4 + SLOT_BYTES


@pytest.mark.parametrize(("value", "name"), [("float16", "float16"), (torch.bfloat16, "bfloat16"),
                                             (torch.float32, "float32")])
def test_x_dtype_takes_names_and_torch_dtypes(value: Any, name: str) -> None:
    assert LoaderConfig(fanouts=(2,), batch_size=4, x_dtype=value).x_dtype == name


@pytest.mark.parametrize("value", ["int8", torch.float64, "fp16", None])
def test_x_dtype_refuses_what_a_batch_cannot_deliver(value: Any) -> None:
    with pytest.raises(oa.ConfigError, match=r"x_dtype=.* is not a dtype a batch delivers; pass 'float32' \(the default\)"):
        LoaderConfig(fanouts=(2,), batch_size=4, x_dtype=value)
