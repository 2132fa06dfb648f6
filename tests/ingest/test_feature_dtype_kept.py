"""A float16 input is stored float16 (it used to be widened to float32: twice the bytes on disk and in
every cache, for no precision); ``feature_dtype=`` / ``--feature-dtype`` still choose (bfloat16 inputs:
``test_feature_dtypes_import``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

import outre_async as oa
from outre_async.cli import main as cli


def _graph(dtype: torch.dtype) -> Data:
    g = torch.Generator().manual_seed(0)
    return Data(x=torch.randn(12, 5, generator=g).to(dtype), edge_index=torch.randint(0, 12, (2, 40), generator=g),
                y=torch.randint(0, 3, (12,), generator=g))


def test_float16_from_pyg_stays_float16_with_the_same_values(tmp_path: Path) -> None:
    data = _graph(torch.float16)
    ds = oa.open_dataset(oa.from_pyg(data, tmp_path / "h"))
    assert ds.feature_dtype == np.float16
    assert np.array_equal(np.asarray(ds.features[:]), data.x.numpy())
    assert oa.open_dataset(oa.from_pyg(_graph(torch.float32), tmp_path / "f")).feature_dtype == np.float32
    wide = oa.open_dataset(oa.from_pyg(data, tmp_path / "w", feature_dtype="float32"))
    assert wide.feature_dtype == np.float32 and np.array_equal(np.asarray(wide.features[:]), data.x.float().numpy())


def test_convert_keeps_an_npz_float16_unless_told(tmp_path: Path) -> None:
    data = _graph(torch.float16)
    np.savez(tmp_path / "g.npz", x=data.x.numpy(), edge_index=data.edge_index.numpy(), y=data.y.numpy())
    assert cli(["convert", str(tmp_path / "g.npz"), str(tmp_path / "kept")]) == 0
    assert oa.open_dataset(tmp_path / "kept").feature_dtype == np.float16
    assert cli(["convert", str(tmp_path / "g.npz"), str(tmp_path / "wide"), "--feature-dtype", "float32"]) == 0
    assert oa.open_dataset(tmp_path / "wide").feature_dtype == np.float32
