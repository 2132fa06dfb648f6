"""The history table on the training device (``HistoryConfig(placement="device")``): on a CPU device
the same torch lines as on a GPU, so the batches, pulls and training must equal the host table's bit
for bit, and the memory plan must still count every byte; the GPU's own lines (streams, events, the
rows' bytes out of the host plan) run where CUDA is present."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_graph, run, write_store

import outre_async as oa
from outre_async.nn import seed_logits, seed_targets
from outre_async.loader._options import group_knobs

N, DIM, HID = 400, 12, 8
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(7)
    indptr, indices = random_graph(rng, N, 6)
    features = rng.standard_normal((N, DIM)).astype(np.float32)
    labels = rng.integers(0, 4, size=N)
    return write_store(tmp_path_factory.mktemp("hist-dev") / "ds", indptr, indices, features=features, labels=labels,
                       num_classes=4, splits={"train": np.arange(0, 320)})


def _loader(ds: oa.Dataset, placement: str, **kw) -> oa.OutreLoader:  # type: ignore[no-untyped-def]
    hist = oa.HistoryConfig(**{"staleness": 1000, "dim": HID, "warmup": 0, "admission": "all", "jitter": 0.0,
                               "placement": placement, **kw.pop("hist", {})})
    opts = {"fanouts": [4, 3], "batch_size": 24, "seed": 3, "backend": "memory", "history": hist, **kw}
    return oa.OutreLoader(ds, **group_knobs(opts))


def _model(device: str = "cpu") -> torch.nn.Module:
    torch.manual_seed(0)
    return oa.GraphSAGE(DIM, HID, 2, 4).to(device)


def _train(ds: oa.Dataset, placement: str, device: str = "cpu") -> tuple[list[tuple[torch.Tensor, ...]], dict, dict]:
    """Every batch's tensors, pulls and loss over a first epoch left after one batch (the history starts
    there) and two full ones, then the history's and the memory plan's figures.

    One sampler in plan order, staleness beyond the run, no jitter, admission ``"all"``: each batch's
    decision is then the same whatever the timing (a row an earlier batch of the epoch pushes is
    either written or promised when the batch is sampled, valid either way), so two runs compare."""
    model = _model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen: list[tuple[torch.Tensor, ...]] = []
    with _loader(ds, placement, ordered=True, num_samplers=1, device=device) as loader:
        for epoch in range(3):
            for batch in loader:
                rec = batch.history
                loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen.append(tuple(t.detach().cpu() for t in (batch.n_id, batch.edge_index, rec.pull_index,
                                                            rec.pull_rows, rec.push_index, rec.pull_age, loss)))
                if epoch == 0:
                    break
        stats = loader.stats()
    seen.append(tuple(p.detach().cpu() for p in model.parameters()))
    return seen, stats["history"], stats


def test_a_device_table_on_the_cpu_gives_the_host_table_s_batches_pulls_and_training_bit_for_bit(
        dataset: oa.Dataset) -> None:
    host, hs, _ = _train(dataset, "host")
    device, ds_, stats = _train(dataset, "device")
    assert hs["placement"] == "host" and ds_["placement"] == "device" and ds_["rows_on"] == "cpu"
    assert len(host) == len(device) == 1 + 2 * 14 + 1
    for a, b in zip(host, device, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert hs["pulled"] == ds_["pulled"] > 100 and hs["realised_staleness"] == ds_["realised_staleness"]
    assert max(ds_["realised_staleness"]) <= 1000
    # a CPU device's memory is the host's: the whole table is a part of the host plan, none is "resident"
    assert stats["memory"]["history table"] == ds_["bytes"] == ds_["host_bytes"] and ds_["device_bytes"] == 0
    assert stats["device"]["resident"] == {}


def test_the_memory_plan_counts_rows_on_another_device_out_of_memory_budget(dataset: oa.Dataset) -> None:
    """Rows on a GPU are device memory: the host plan keeps the table's other parts, the feature
    loader's other parts get the rows' bytes back, and ``stats()["device"]["resident"]`` lists them.  (``meta``
    stands for the GPU here: the plan reads the table's bytes, not its data; on CUDA the CUDA test.)"""
    from outre_async.cache._history import HistoryTable

    with _loader(dataset, "device", memory_budget="24MiB", hist={"dim": 512}) as loader:
        cfg, table = loader.config, loader._history.table
        on_host = loader._memory_plan(cfg)
        loader._history.table = HistoryTable(table.nodes, N, 512, device="meta")
        on_gpu = loader._memory_plan(cfg)
        resident = loader.stats()["device"]["resident"]
    rows = table.num_slots * 4 * 512
    assert on_host.parts["history table"] == table.nbytes(cfg.num_samplers)
    assert on_gpu.parts["history table"] == table.nbytes(cfg.num_samplers) - rows
    assert resident == {"history rows": rows}
    # the same budget, the rows' bytes spent elsewhere: the buffer holds every row already, so the pool
    assert on_gpu.total == on_host.total and on_host.buffer_rows == on_gpu.buffer_rows == N
    assert on_gpu.parts["batches"] == on_host.parts["batches"] + rows


def test_auto_keeps_the_rows_on_the_host_of_a_cpu_device(dataset: oa.Dataset) -> None:
    with _loader(dataset, "auto") as loader:
        assert loader.stats()["history"]["placement"] == "host"


@pytest.mark.parametrize("placement", ["host", "device"])
def test_a_record_crosses_to_the_device_in_one_copy_per_step(dataset: oa.Dataset, placement: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The real record path (``EpochHistory.record``) sends indices, ages, degrees and the slots or
    rows in one packed copy (``cache._record_transfer``): one ``copy_``, no ``.to`` and no fresh
    ``pin_memory`` per delivered batch (before: 4 ``.to`` a step, a ``pin_memory`` of the host rows on
    CUDA).  Counted through ``torch.Tensor``'s own methods while ``record`` runs."""
    from outre_async.loader._history import EpochHistory

    calls = {"to": 0, "copy_": 0, "pin_memory": 0}
    inside = [False]
    real_record = EpochHistory.record

    def record(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        inside[0] = True
        try:
            return real_record(self, *args, **kwargs)
        finally:
            inside[0] = False

    def counted(name: str):  # type: ignore[no-untyped-def]
        real = getattr(torch.Tensor, name)

        def method(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if inside[0]:
                calls[name] += 1
            return real(self, *args, **kwargs)
        return method

    monkeypatch.setattr(EpochHistory, "record", record)
    for name in calls:
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    _, hist, stats = _train(dataset, placement)
    assert hist["batches"] == 1 + 2 * 14 and hist["pulled"] > 100  # rows pulled: the rows' path ran
    assert calls == {"to": 0, "copy_": hist["batches"], "pin_memory": 0}
    transfers = hist["record_transfers"]
    assert transfers["transfers"] == hist["batches"] and transfers["buffers"] <= 2  # the buffer is reused
    assert 0 < transfers["buffer_bytes"] <= stats["memory"]["history transfer"]  # within its part of the plan


class _ReferenceWrites:
    """The pushes' effect in plain numpy (boolean masks, one row at a time): what the owner's writes
    must give, admission ``"grad"``'s refusals included."""

    def __init__(self, slots: int, dim: int) -> None:
        self.rows = np.zeros((slots, dim), np.float32)
        self.stamp = np.full(slots, -1, np.int64)
        self.retired = np.zeros(slots, bool)

    def apply(self, step: int, slots: np.ndarray, rows: np.ndarray, norms: np.ndarray | None) -> None:
        keep = self.stamp[slots] <= step
        if norms is not None:
            refused = norms > np.median(norms)
            self.retired[slots[refused & keep]] = True
            keep &= ~refused
        for slot, row in zip(slots[keep], rows[keep], strict=True):
            self.rows[slot], self.stamp[slot], self.retired[slot] = row, step, False


def test_grad_admission_with_a_device_table_on_the_cpu_writes_what_a_reference_writes(dataset: oa.Dataset) -> None:
    """Admission ``"grad"`` pushes after ``backward()`` and writes a subset of the rows (positions on
    the rows' device, not a host mask): the table ends equal to a plain reference fed the same pushes."""
    from outre_async.loader._history import Push

    async def body() -> tuple[object, _ReferenceWrites]:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = _loader(dataset, "device", hist={"admission": "grad"})
        async with loader:
            owner = loader._history
            ref = _ReferenceWrites(owner.table.num_slots, HID)
            real = owner.apply

            def both(push: Push) -> None:
                if push.rows is not None and len(push.slots):
                    norms = None if push.grad_norm is None else push.grad_norm.numpy()
                    ref.apply(push.step, push.slots, push.rows.numpy().copy(), norms)
                real(push)
            owner.apply = both  # type: ignore[method-assign]
            for _ in range(2):
                async for batch in loader:
                    loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return owner, ref

    owner, ref = run(body(), timeout=120)
    table = owner.table  # type: ignore[attr-defined]
    assert owner.counts["refused"] > 0 and (ref.stamp >= 0).any()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(table.rows.numpy(), ref.rows)
    np.testing.assert_array_equal(table.stamp, ref.stamp)
    np.testing.assert_array_equal(table.retired, ref.retired)


# -- on a GPU -----------------------------------------------------------------------------------------
def _exact_hidden(ds: oa.Dataset, model: torch.nn.Module) -> torch.Tensor:
    deg = np.diff(ds.indptr)
    edge_index = torch.from_numpy(np.stack([np.asarray(ds.indices, np.int64), np.repeat(np.arange(N), deg)]))
    with torch.no_grad():
        return model.hidden(torch.from_numpy(np.array(ds.features[:])), edge_index)


@CUDA
@pytest.mark.parametrize("own_stream", [False, True])
def test_cuda_device_table_pulls_equal_the_exact_recompute_and_leave_the_host_plan(dataset: oa.Dataset,
                                                                                 own_stream: bool) -> None:
    """The rows on the GPU (gathers and scatters there); the trainer on the default stream or on a
    stream of its own (the events order the loop's and the trainer's work); host plan less the rows."""
    model = _model().eval()
    exact = _exact_hidden(dataset, model).cuda()
    model = model.cuda()
    pulled = 0
    stream = torch.cuda.Stream() if own_stream else torch.cuda.current_stream()
    with _loader(dataset, "device", fanouts=[-1, -1], device="cuda") as loader:
        table = loader._history.table
        assert table.rows.device.type == "cuda" and not table.rows.is_pinned()
        with torch.cuda.stream(stream):
            for _ in range(3):
                for batch in loader:
                    rec = batch.history
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=rec)
                    assert rec.pull_rows.device.type == "cuda"
                    torch.testing.assert_close(rec.pull_rows, exact[batch.n_id[rec.pull_index]], atol=1e-4, rtol=0)
                    pulled += len(rec.pull_index)
        stats = loader.stats()
    h = stats["history"]
    rows = h["slots"] * 4 * HID
    assert pulled > 100 and h["placement"] == "device" and h["rows_on"].startswith("cuda")
    assert h["device_bytes"] == rows and stats["memory"]["history table"] == h["bytes"] - rows == h["host_bytes"]
    assert stats["device"]["resident"] == {"history rows": rows}


@CUDA
def test_cuda_auto_places_small_rows_on_the_gpu_and_a_device_budget_below_them_on_the_host(dataset: oa.Dataset) -> None:
    with _loader(dataset, "auto", device="cuda") as loader:
        assert loader._history.table.rows.device.type == "cuda"
    with _loader(dataset, "auto", device="cuda", hist={"device_budget": 1}) as loader:
        assert loader._history.table.rows.is_pinned() and loader.stats()["history"]["placement"] == "host"


@CUDA
def test_cuda_device_table_trains_as_the_host_table(dataset: oa.Dataset) -> None:
    """Same decisions, same rows: the GPU gathers what the host gathered (float32 rows copied, never
    recomputed), so pulls and batches are equal; losses agree to the GPU's arithmetic."""
    host, _, _ = _train(dataset, "host", device="cuda")
    device, _, _ = _train(dataset, "device", device="cuda")
    for a, b in zip(host, device, strict=True):
        for x, y in zip(a, b, strict=True):
            if x.dtype == torch.float32:  # the GPU's scatter-adds are not deterministic: close, not equal
                torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)
            else:
                assert torch.equal(x, y)
