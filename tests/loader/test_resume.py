"""Resuming mid-epoch (issue 40.7): ``state_dict()`` inside an epoch, a fresh loader's
``load_state_dict()``, and the rest of the run equals the uninterrupted one (``100 steps == 50 + resume
+ 50``): byte for byte in plan order, as a set of (seq, batch) in completion order, in partition mode
too; a state of another setup is refused naming the field."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest
import torch
from conftest import generated, labelled_store, run

import outre_async as oa
from outre_async.partition import partition
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(240)

KW: dict[str, Any] = {"fanouts": [4, 3], "batch_size": 16, "seed": 7, "num_samplers": 2, "num_extractors": 2}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("resume") / "ds")  # 500 train seeds: 32 batches of 16


@pytest.fixture(scope="module")
def parted(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    ds = generated(tmp_path_factory.mktemp("resume-parts") / "g", "tiny")
    partition(ds, 8, name="p8")
    return ds


def _row(batch: oa.OutreBatch) -> tuple[int, int, bytes]:
    """(epoch, seq, every field the caller reads, as bytes)."""
    parts = [batch.n_id, batch.x, batch.edge_index, batch.y, batch.input_id]
    return batch.epoch, batch.seq, b"|".join(t.numpy().tobytes() for t in parts)


def _run(ds: oa.Dataset, epochs: int, **kw: Any) -> list[tuple[int, int, bytes]]:
    with oa.OutreLoader(ds, **group_knobs(dict(**(KW | kw)))) as loader:
        return [_row(b) for _ in range(epochs) for b in loader]


def _interrupted(ds: oa.Dataset, whole: int, steps: int, **kw: Any) -> tuple[list[tuple[int, int, bytes]], Any]:
    """``whole`` epochs, then ``steps`` batches of the next and its state (through JSON, as a checkpoint)."""
    rows, taken = [], 0
    with oa.OutreLoader(ds, **group_knobs(dict(**(KW | kw)))) as loader:
        for _ in range(whole):
            rows += [_row(b) for b in loader]
        for b in loader:
            rows.append(_row(b))
            taken += 1
            if taken == steps:
                state = loader.state_dict()  # inside the loop, as a training step's checkpoint is
                break
    return rows, json.loads(json.dumps(state))


def _resumed(ds: oa.Dataset, state: Any, epochs: int, **kw: Any) -> tuple[list[tuple[int, int, bytes]], list[int]]:
    with oa.OutreLoader(ds, **group_knobs(dict(**(KW | kw)))) as loader:
        loader.load_state_dict(state)
        lengths, rows = [], []
        for _ in range(epochs):
            lengths.append(len(loader))
            rows += [_row(b) for b in loader]
        return rows, lengths


def test_plan_order_resumed_mid_epoch_is_byte_identical_to_the_uninterrupted_run(dataset: oa.Dataset) -> None:
    want = _run(dataset, 3, ordered=True)
    first, state = _interrupted(dataset, 1, 13, ordered=True)
    assert state["epoch"] == 1 and state["delivered"] == {"prefix": 13, "extra": []}
    rest, lengths = _resumed(dataset, state, 2, ordered=True)
    assert lengths == [32 - 13, 32]  # the resumed epoch's remaining batches, then a whole one
    assert first + rest == want


def test_completion_order_resumed_delivers_each_remaining_batch_once(dataset: oa.Dataset) -> None:
    def keyed(rows: list[tuple[int, int, bytes]]) -> list[tuple[int, int, str]]:
        return sorted((e, s, hashlib.sha256(b).hexdigest()) for e, s, b in rows)

    want = keyed(_run(dataset, 2))
    first, state = _interrupted(dataset, 1, 20)
    assert state["epoch"] == 1
    assert state["delivered"]["prefix"] + len(state["delivered"]["extra"]) == 20
    rest, _ = _resumed(dataset, state, 1)
    assert len(rest) == 32 - 20
    assert keyed(first + rest) == want  # nothing twice, nothing lost, every batch the same


def test_partition_mode_resumed_mid_epoch_is_byte_identical(parted: oa.Dataset) -> None:
    kw = {"partitions": "p8", "parts_per_batch": 2, "ordered": True, "batch_size": 64, "fanouts": [5, 5]}
    want = _run(parted, 2, **kw)
    first, state = _interrupted(parted, 0, 5, **kw)
    rest, _ = _resumed(parted, state, 2, **kw)
    assert first + rest == want


def test_a_resumed_epoch_can_be_interrupted_and_resumed_again(dataset: oa.Dataset) -> None:
    want = _run(dataset, 1)
    first, state = _interrupted(dataset, 0, 7)
    with oa.OutreLoader(dataset, **group_knobs(KW)) as loader:
        loader.load_state_dict(state)
        second = []
        for b in loader:
            second.append(_row(b))
            if len(second) == 9:
                state = json.loads(json.dumps(loader.state_dict()))
                break
    assert state["delivered"]["prefix"] + len(state["delivered"]["extra"]) == 7 + 9
    rest, _ = _resumed(dataset, state, 1)
    assert sorted(first + second + rest) == sorted(want)


def test_state_between_epochs_names_the_next_epoch_from_its_start(dataset: oa.Dataset) -> None:
    with oa.OutreLoader(dataset, **group_knobs(KW)) as loader:
        assert loader.state_dict()["epoch"] == 0
        for _ in loader:
            pass
        state = loader.state_dict()
    assert state["epoch"] == 1 and state["delivered"] == {"prefix": 0, "extra": []}
    assert state["facts"]["num_batches"] == 32 and state["facts"]["fanouts"] == [4, 3]
    with oa.OutreLoader(dataset, **group_knobs(KW)) as loader:
        loader.load_state_dict(state)
        assert loader.epoch == 1 and len(loader) == 32


@pytest.mark.parametrize(("change", "field"), [({"batch_size": 32}, "batch_size"), ({"seed": 8}, "seed"),
                                               ({"fanouts": [4, 4]}, "fanouts"), ({"shuffle": False}, "shuffle"),
                                               ({"split": np.arange(400)}, "num_seeds"),
                                               ({"split": np.arange(1, 501)}, "seeds_crc32")])
def test_a_state_of_another_setup_is_refused_naming_the_field(dataset: oa.Dataset, change: dict[str, Any],
                                                              field: str) -> None:
    _, state = _interrupted(dataset, 0, 3)
    with oa.OutreLoader(dataset, **group_knobs(dict(**(KW | change)))) as loader:
        with pytest.raises(oa.errors.CheckpointMismatchError, match=rf"loader state has {field}=.*this loader {field}="):
            loader.load_state_dict(state)
        assert loader.epoch == 0 and len(loader) == loader._setup.items.num_batches(0)  # nothing taken from it


def test_a_state_of_another_dataset_is_refused(dataset: oa.Dataset, tmp_path: Any) -> None:
    _, state = _interrupted(dataset, 0, 3)
    other = labelled_store(tmp_path / "ds", num_nodes=601)  # the same split, another graph
    with oa.OutreLoader(other, **group_knobs(KW)) as loader:
        with pytest.raises(oa.errors.CheckpointMismatchError, match="loader state has dataset_"):
            loader.load_state_dict(state)


def test_a_malformed_state_is_a_checkpoint_error(dataset: oa.Dataset) -> None:
    _, state = _interrupted(dataset, 0, 3)
    with oa.OutreLoader(dataset, **group_knobs(KW)) as loader:
        with pytest.raises(oa.errors.CheckpointError, match="version 99"):
            loader.load_state_dict({**state, "version": 99})
        with pytest.raises(oa.errors.CheckpointError, match="outside the epoch's 32 batches"):
            loader.load_state_dict({**state, "delivered": {"prefix": 3, "extra": [40]}})
        with pytest.raises(oa.errors.CheckpointError, match="OutreLoader.state_dict"):
            loader.load_state_dict({"epoch": 1})


def test_loading_while_an_epoch_runs_is_refused(dataset: oa.Dataset) -> None:
    with oa.OutreLoader(dataset, **group_knobs(KW)) as loader:
        state = loader.state_dict()
        it = iter(loader)
        next(it)
        with pytest.raises(oa.ConfigError, match="while an epoch of this loader is being iterated"):
            loader.load_state_dict(state)
        it.close()
        loader.load_state_dict(state)
        assert loader.epoch == 0


def test_with_history_the_resumed_epoch_delivers_the_remaining_seqs_with_their_seeds(dataset: oa.Dataset) -> None:
    """The table is not restored (and pruning by it depends on timing, so even two uninterrupted runs
    with history differ in their subgraphs): what a resume keeps is the plan, each remaining batch's
    seq and seeds, and the history hook's contract."""
    history = oa.HistoryConfig(staleness=10, dim=8, warmup=0, admission="all")
    kw = {**KW, "ordered": True, "history": history}

    def used(b: oa.OutreBatch) -> tuple[int, bytes]:
        b.history.exchange(torch.zeros(len(b.n_id), 8))
        return b.seq, b.input_id.numpy().tobytes()

    with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
        want = [used(b) for b in loader]
    with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
        first = []
        for b in loader:
            first.append(used(b))
            if len(first) == 13:
                state = loader.state_dict()
                break
    with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
        loader.load_state_dict(state)
        rest = [used(b) for b in loader]
    assert first + rest == want


def test_async_for_resumes_like_the_sync_loop(dataset: oa.Dataset) -> None:
    async def body() -> tuple[list, list, list]:
        kw = {**KW, "ordered": True}
        async with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
            want = [_row(b) async for b in loader]
        first = []
        async with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
            async for b in loader:
                first.append(_row(b))
                if len(first) == 10:
                    state = loader.state_dict()
                    break
        async with oa.OutreLoader(dataset, **group_knobs(kw)) as loader:
            loader.load_state_dict(state)
            rest = [_row(b) async for b in loader]
        return want, first, rest

    want, first, rest = run(body())
    assert len(rest) == 22 and first + rest == want
