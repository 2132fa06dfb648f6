"""The loader sizes feature rows by the dataset's ``RowFormat``: a float16 store is planned and
delivered as it is held (float32), its stored row and stride kept for the reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.loader._budget import SLOT_BYTES


def test_the_plan_sizes_rows_by_the_datasets_row_format(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    indptr, indices = random_graph(rng, 300, 8)
    ds = write_store(tmp_path / "ds", indptr, indices, features=rng.standard_normal((300, 100)).astype(np.float16),
                     labels=rng.integers(0, 3, 300), num_classes=3, splits={"train": np.arange(200)},
                     feature_dtype="float16")
    with oa.OutreLoader(ds, fanouts=[3], batch_size=16, memory_budget="8MiB", io=oa.IOOptions(backend="memory")) as loader:
        sizes, plan = loader._setup.sizes, loader.memory
        assert sizes.format == ds.row_format and (sizes.row_bytes, sizes.stride) == (200, ds.row_layout.stride)
        assert plan.parts["feature buffer"] == plan.buffer_rows * (ds.row_format.held_row_bytes + SLOT_BYTES)
        batch = next(iter(loader))
        assert batch.x.dtype == torch.float32
        np.testing.assert_array_equal(batch.x.numpy(), ds.features[batch.n_id.numpy()].astype(np.float32))
        batch.release()
