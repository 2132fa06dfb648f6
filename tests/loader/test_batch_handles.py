"""A batch's loader handles (its matrix lease, history record, device copy) are one typed record,
attached once under one private key and read through ``batch_handles``: never a PyG field."""

from __future__ import annotations

import pytest
import torch
from conftest import labelled_store

import outre_async as oa
from outre_async.loader import _resources
from outre_async.loader._batch import NO_HANDLES, BatchHandles, batch_handles
from outre_async.loader._device_copy import SyncCopyEngine


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("handles") / "ds")


def _own_keys(batch: object) -> list[str]:
    return [k for k in vars(batch) if k.startswith("_outre")]


def test_a_host_batch_holds_its_lease_and_history_in_one_record(store: oa.Dataset) -> None:
    hist = oa.HistoryConfig(staleness=4, dim=8, warmup=0)
    with oa.OutreLoader(store, fanouts=[3, 2], batch_size=64, history=hist, io=oa.IOOptions(backend="memory")) as loader:
        for batch in loader:
            handles = batch_handles(batch)
            assert isinstance(handles, BatchHandles) and _own_keys(batch) == ["_outre_handles"]
            assert "_outre_handles" not in batch.keys()  # not a field: never collated, moved or printed
            assert handles.transfer is None and handles.lease is not None and handles.lease.pool is not None
            assert batch.history is handles.history and handles.history is not None
            batch.history.exchange(torch.zeros(len(batch.n_id), 8))
            batch.release()
            assert handles.lease.pool is None  # its bytes went back to the pool
            batch.release()  # twice: nothing more to give back
        assert loader.stats()["batch_matrices"]["used"] == 0


def test_a_device_batch_holds_its_copy_and_no_lease(store: oa.Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_resources, "copy_engine_for", lambda d, depth: SyncCopyEngine("cpu"))
    with oa.OutreLoader(store, fanouts=[3, 2], batch_size=64, io=oa.IOOptions(backend="memory")) as loader:
        for batch in loader:
            handles = batch_handles(batch)
            assert _own_keys(batch) == ["_outre_handles"]
            assert handles.transfer is not None and handles.lease is None and handles.history is None
            assert batch.history is None


def test_an_object_the_loader_did_not_hand_out_has_no_handles() -> None:
    assert batch_handles(object()) is NO_HANDLES and batch_handles(torch.zeros(2)) is NO_HANDLES
    assert NO_HANDLES == BatchHandles()
