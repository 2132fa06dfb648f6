"""A 0/1 integer mask where node ids are expected (issue 34 "misleading": a uint8 train mask was
refused as "node ids more than once"): refused still (read as ids it names nodes 0 and 1 again and
again; read as a mask it would be a guess), with the cause and ``mask.astype(bool)`` in the message,
by the loader (``input_nodes=``) and by the writers (``write_split``, ``write_dataset``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import labelled_store

import outre_async as oa

N = 600


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("masks") / "ds", num_nodes=N)


def _mask(dtype: object) -> np.ndarray:
    mask = np.zeros(N, dtype=np.uint8)
    mask[::3] = 1
    return mask.astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.int32])
def test_the_loader_names_an_integer_mask_and_the_fix(dataset: oa.Dataset, dtype: object) -> None:
    for given in (_mask(dtype), torch.from_numpy(_mask(dtype))):
        with pytest.raises(oa.ConfigError, match=r"more than once; it looks like a 0/1 mask \(\w+, one entry per node\), "
                                                 r"not node ids: pass mask\.astype\(bool\)") as err:
            oa.OutreLoader(dataset, input_nodes=given, fanouts=[2], batch_size=16, io=oa.IOOptions(backend="memory"))
        assert "\n" not in str(err.value)
    loader = oa.OutreLoader(dataset, input_nodes=_mask(np.uint8).astype(bool), fanouts=[2], batch_size=16,
                            io=oa.IOOptions(backend="memory"))  # the fix the message gives works
    assert len(loader) == len(np.flatnonzero(_mask(np.uint8))) // 16 + 1


def test_repeated_ids_that_are_not_a_mask_keep_the_unique_hint(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match=r"split lists 1 node ids more than once; pass unique ids"):
        oa.OutreLoader(dataset, input_nodes=np.array([3, 5, 3]), fanouts=[2], batch_size=16, io=oa.IOOptions(backend="memory"))


def test_the_writers_name_an_integer_mask_and_the_fix(tmp_path: Path) -> None:
    edges = np.array([np.arange(N), (np.arange(N) + 1) % N])
    with pytest.raises(oa.errors.InvalidGraphError, match=r"split 'train' lists \d+ node ids more than once; it looks like a "
                                                    r"0/1 mask \(uint8, one entry per node\)"):
        oa.write_dataset(tmp_path / "w", edge_index=edges, num_nodes=N, train_idx=_mask(np.uint8))
    path = oa.write_dataset(tmp_path / "ok", edge_index=edges, num_nodes=N, train_idx=_mask(np.uint8).astype(bool))
    assert np.array_equal(oa.open_dataset(path).split("train"), np.flatnonzero(_mask(np.uint8)))
