"""The historical embedding cache end to end: staleness 1 is no history, pulled rows equal the exact
recompute, realised staleness stays within the bound, shutdown paths, one owner, named errors."""

from __future__ import annotations

import asyncio
import os
import threading

import numpy as np
import pytest
import torch
from conftest import random_graph, run, write_store
from fakes import DelayedSampler, FaultySource
from hypothesis import given, settings
from hypothesis import strategies as st

import outre_async as oa
from outre_async.nn import seed_logits, seed_targets
from outre_async.loader._options import group_knobs
from outre_async.loader import LoaderConfig

N, DIM, HID = 400, 12, 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(5)
    indptr, indices = random_graph(rng, N, 6)
    features = rng.standard_normal((N, DIM)).astype(np.float32)
    labels = rng.integers(0, 4, size=N)
    return write_store(tmp_path_factory.mktemp("hist") / "ds", indptr, indices, features=features, labels=labels,
                       num_classes=4, splits={"train": np.arange(0, 320)})


def _loader(ds: oa.Dataset, staleness: int | None, **kw) -> oa.OutreLoader:
    # the oracle and bound tests want pulls from the first steps, and promises ("auto" would pick "grad"
    # here: a staleness of 1000 spans the epoch)
    hist = {"warmup": 0, "admission": "all", **kw.pop("hist", {})}
    history = None if staleness is None else oa.HistoryConfig(staleness=staleness, dim=HID, **hist)
    opts = {"fanouts": [4, 3], "batch_size": 24, "seed": 3, "history": history,
            **({} if "source" in kw else {"backend": "memory"}), **kw}
    return oa.OutreLoader(ds, **group_knobs(opts))


def _model(seed: int = 0, cls=oa.GraphSAGE) -> torch.nn.Module:
    torch.manual_seed(seed)
    return cls(DIM, HID, 2, 4)


def _exact_hidden(ds: oa.Dataset, model: torch.nn.Module) -> torch.Tensor:
    """h^(L-1) of every node on the whole graph (what full neighbourhoods sample)."""
    deg = np.diff(ds.indptr)
    edge_index = torch.from_numpy(np.stack([np.asarray(ds.indices, np.int64), np.repeat(np.arange(N), deg)]))
    with torch.no_grad():
        return model.hidden(torch.from_numpy(np.array(ds.features[:])), edge_index)


def _check_pulls(batch, exact: torch.Tensor) -> int:
    rec = batch.history
    got = rec.pull_rows
    want = exact[batch.n_id[rec.pull_index]]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    return len(rec.pull_index)


# -- staleness 1 is no history --------------------------------------------------------------------
def test_staleness_one_is_held_as_no_history() -> None:
    """One way to say off: validation holds ``HistoryConfig(staleness=1)`` as None, so ``history is None``
    is the whole test of every reader (and a one-layer model may pass it)."""
    off = LoaderConfig(fanouts=(3, 3), batch_size=8, history=oa.HistoryConfig(staleness=1, dim=4))
    assert off.history is None and off == LoaderConfig(fanouts=(3, 3), batch_size=8)
    assert LoaderConfig(fanouts=(3,), batch_size=8, history=oa.HistoryConfig(staleness=1, dim=4)).history is None
    on = oa.HistoryConfig(staleness=2, dim=4)
    assert LoaderConfig(fanouts=(3, 3), batch_size=8, history=on).history is on


def test_staleness_one_is_bit_identical_to_no_history(dataset: oa.Dataset) -> None:
    def train(staleness: int | None) -> tuple[list[float], list[list[int]]]:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses, edges = [], []
        with _loader(dataset, staleness, ordered=True) as loader:
            for _ in range(2):
                for batch in loader:
                    assert batch.history is None
                    loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
                    edges.append(batch.edge_index.flatten().tolist())
            assert "history" not in loader.stats()
        return losses, edges

    assert train(1) == train(None)


# -- the exact-recompute oracle -------------------------------------------------------------------
async def _oracle_epochs(ds: oa.Dataset, *, ordered: bool, seed: int, epochs: int, stop_at: int | None = None,
                         placement: str = "host") -> int:
    model = _model(seed).eval()
    exact = _exact_hidden(ds, model)
    pulled = 0
    loader = _loader(ds, 1000, fanouts=[-1, -1], ordered=ordered, source=FaultySource(ds, seed=seed),
                     num_samplers=2, num_extractors=2, hist={"placement": placement})
    async with loader:
        loader._res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(loader._res.samplers)]
        for epoch in range(epochs):
            async for i, batch in _enumerate(loader):
                if stop_at is not None and epoch == 0 and i == stop_at:
                    break  # early break: the next epoch must still match the oracle
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                pulled += _check_pulls(batch, exact)
        stats = loader.stats()["history"]
    assert stats["pushed"] > 0 and max(stats["realised_staleness"], default=0) <= 1000
    return pulled


async def _enumerate(loader):  # type: ignore[no-untyped-def]
    i = 0
    async for batch in loader:
        yield i, batch
        i += 1


@pytest.mark.parametrize(("ordered", "placement"), [(False, "host"), (True, "host"), (False, "device")])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_pulled_row_equals_the_exact_recompute(dataset: oa.Dataset, ordered: bool, seed: int,
                                                     placement: str) -> None:
    """``placement="device"`` on the CPU device: the device table's gathers and scatters (the same
    torch lines as on a GPU) against the oracle."""
    pulled = run(_oracle_epochs(dataset, ordered=ordered, seed=seed, epochs=3, placement=placement), timeout=120)
    assert pulled > 100  # the cache was used, not only consulted


def test_sync_loop_pushes_are_written_on_the_loop_thread(dataset: oa.Dataset) -> None:
    model = _model().eval()
    exact = _exact_hidden(dataset, model)
    with _loader(dataset, 1000, fanouts=[-1, -1]) as loader:
        table = loader._history.table
        writers: set[int] = set()
        real_write = table.write

        def spy(*args):  # type: ignore[no-untyped-def]
            writers.add(threading.get_ident())
            real_write(*args)

        table.write = spy
        pulled = 0
        for _ in range(2):
            for batch in loader:
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                pulled += _check_pulls(batch, exact)
        loop_thread = loader._bridge._thread.ident
    assert pulled > 0 and writers == {loop_thread}


# -- realised staleness never exceeds the bound -------------------------------------------------------
@pytest.mark.slow  # 12 hypothesis examples of two epochs with injected delays: ~110 s on a loaded 2-core box
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), staleness=st.integers(2, 14), ordered=st.booleans(),
       samplers=st.integers(1, 3), extract_queue=st.integers(1, 4), ready_queue=st.integers(1, 3),
       window=st.sampled_from([None, 0, 1, 5]), placement=st.sampled_from(["host", "device"]))
def test_realised_staleness_never_exceeds_the_bound(dataset: oa.Dataset, seed: int, staleness: int, ordered: bool,
                                                   samplers: int, extract_queue: int, ready_queue: int,
                                                   window: int | None, placement: str) -> None:
    async def body() -> dict:
        model = _model(seed)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        loader = _loader(dataset, staleness, ordered=ordered, num_samplers=samplers, extract_queue=extract_queue,
                         ready_queue=ready_queue, source=FaultySource(dataset, seed=seed),
                         hist={"window": window, "placement": placement})
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(loader._res.samplers)]
            for _ in range(2):
                async for batch in loader:
                    loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return loader.stats()["history"]

    stats = run(body(), timeout=60)
    ages = stats["realised_staleness"]
    assert stats["clock"] == 2 * 14  # 320 seeds / 24 per batch
    assert all(1 <= age <= staleness for age in ages), ages


# -- what completion order's window holds back stays in the plan (issue 27) ------------------------
@pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")  # a buffer below a batch on purpose
@pytest.mark.parametrize("seed", [1, 2])
def test_batches_the_window_holds_back_keep_their_leases_within_the_plan(dataset: oa.Dataset, seed: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that completes before the ones it must follow is held by the delivery (window 0 here:
    every batch in plan order).  It keeps its matrix lease: it used to give it back, so the pool let
    more batches be extracted while it still held its matrix (memory outside ``memory_budget``).
    Under seeded sampler delays every held batch is still leased, every batch went to the extractors in
    its turn (the gate has no out-of-turn budget here), and the pool stays within the plan's ``batches``."""
    from outre_async.loader import _delivery

    seen: list[list[bool]] = []  # per hand-out: whether each held batch still holds its lease
    original = _delivery._Windowed.next

    async def next_(self: _delivery._Windowed, ready):  # type: ignore[no-untyped-def]
        eb = await original(self, ready)
        seen.append([held.lease.pool is not None for held in self.held.values()])
        return eb

    monkeypatch.setattr(_delivery._Windowed, "next", next_)

    async def body() -> None:
        model = _model(seed)
        # a small buffer: every batch reads (with the source's seeded delays), so extractors finish out of order
        loader = _loader(dataset, 8, hist={"window": 0}, num_samplers=3, num_extractors=3, buffer_rows=48,
                         memory_budget="4MiB", source=FaultySource(dataset, seed=seed))
        planned = loader.memory.parts
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(loader._res.samplers)]
            for _ in range(2):
                async for batch in loader:
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                assert all(all(step) for step in seen), "a held batch gave its matrix lease back"
                s = loader.stats()
                assert "reorder buffer" not in planned and s["out_of_turn"]["peak"] == s["out_of_turn"]["out_of_turn"] == 0
                assert s["batch_matrices"]["peak"] <= planned["batches"]
                assert s["out_of_turn"]["used"] == s["batch_matrices"]["used"] == 0

    run(body(), timeout=60)
    assert sum(map(len, seen)) > 0  # batches were held (4-11 hand-outs met one in 8 runs): the check checked something


# -- completion order's window (issue 28.7) ---------------------------------------------------------
def test_the_default_window_spends_at_most_a_fifth_of_a_promise_reach() -> None:
    from outre_async.cache._history_config import default_window, min_lifetime

    for staleness in (2, 5, 10, 20, 50, 100, 1000):
        for jitter in (0.0, 0.5):
            cfg = oa.HistoryConfig(staleness=staleness, dim=HID, jitter=jitter)
            w = default_window(cfg, 2, 2)
            assert 0 <= w <= 4 and 2 * w <= min_lifetime(staleness, jitter) / 5
    assert [default_window(oa.HistoryConfig(staleness=s, dim=HID), 2, 2) for s in (10, 20, 100)] == [0, 1, 4]
    assert default_window(oa.HistoryConfig(staleness=10, dim=HID, window=3), 2, 2) == 3  # given: kept


def test_completion_order_pulls_within_a_fifth_of_plan_order_at_small_staleness(dataset: oa.Dataset) -> None:
    """At staleness 10 the old window (4) left promises no reach at all in completion order; with the
    default window the two orders pull about as much (the issue's criterion: within 20 %)."""
    def pulled(ordered: bool, window: int | None) -> tuple[int, int]:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with _loader(dataset, 10, ordered=ordered, hist={"window": window}) as loader:
            for _ in range(3):
                for batch in loader:
                    loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            stats = loader.stats()["history"]
        assert max(stats["realised_staleness"]) <= 10
        return stats["pulled"], stats["window"]

    plan, _ = pulled(True, None)
    completion, window = pulled(False, None)
    old, _ = pulled(False, 4)
    # the samplers' lead differs between the orders (plan order's gate holds them closer), so the
    # test graph's ratio moves with the machine's load (0.78-1.03 measured); Facebook Page-Page: 1.0
    assert window == 0 and plan > 0 and completion >= 0.65 * plan, (plan, completion)
    assert old < 0.4 * plan, (plan, old)  # what the issue measured: the old window saved much less (0.15-0.2)


# -- promised rows: the samplers' lead costs no pulls ----------------------------------------------
def _epoch_view(staleness: int, *, window: int, admission: str = "all", jitter: float = 0.0):  # type: ignore[no-untyped-def]
    from outre_async.cache._history import HistoryDecision, HistoryTable

    from outre_async.loader._history import EpochHistory, HistoryOwner

    cfg = oa.HistoryConfig(staleness=staleness, dim=2, warmup=0, jitter=jitter, admission=admission)
    owner = HistoryOwner(HistoryTable(np.arange(6), 6, 2), cfg, num_layers=2, window=window, num_samplers=1)
    owner.first = 0  # a model has exchanged once: the history has started
    view = EpochHistory(owner, 0, window, np.full(6, -1, np.int32))
    empty = np.zeros(0, np.int64)
    pushes = HistoryDecision(empty, empty, np.array([0, 1]), np.array([2, 4]), empty)
    return view, pushes


def test_a_promised_row_is_prunable_only_by_a_batch_sure_to_come_after_the_push() -> None:
    view, pushes = _epoch_view(10, window=0)
    assert not view.snapshot(1).valid.any()  # nothing pushed, nothing promised
    view.promise(3, pushes)
    assert not view.snapshot(3).valid.any()  # the promising batch itself
    assert view.snapshot(4).valid.tolist() == [0, 0, 1, 0, 1, 0]  # plan order: the next batch on
    assert view.snapshot(13).valid.any() and not view.snapshot(14).valid.any()  # age 10, then 11 > staleness
    view, pushes = _epoch_view(10, window=2)  # completion order: batch 3 may come after 4 and 5 ...
    view.promise(3, pushes)
    assert [view.snapshot(s).valid.any() for s in (6, 9, 10)] == [True, True, False]  # gap + 2w <= 10
    assert view.snapshot(6).valid.tolist() == [0, 0, 1, 0, 1, 0]  # outside the window: no wait
    # ... unless they wait for it: inside the window the code is 1 + gap (the delivery's wait)
    assert view.snapshot(4).valid.tolist() == [0, 0, 2, 0, 2, 0]
    assert view.snapshot(5).valid.tolist() == [0, 0, 3, 0, 3, 0]
    view.owner.table.write(np.array([4]), torch.ones(1, 2), 3)  # a row already fresh needs no wait
    assert view.snapshot(4).valid.tolist() == [0, 0, 2, 0, 1, 0]
    view, pushes = _epoch_view(10, window=0, jitter=0.5)  # lifetimes in [6, 10]: promise for the shortest
    view.promise(0, pushes)
    assert view.snapshot(6).valid.any() and not view.snapshot(7).valid.any()
    view, pushes = _epoch_view(10, window=0, admission="grad")  # a push may be refused: no promises
    view.promise(0, pushes)
    assert not view.snapshot(1).valid.any()


def test_the_history_starts_at_the_first_exchange_and_withdraws_unhooked_promises() -> None:
    """Before any exchange nothing is pruned; the first push starts the history, and the promises of
    batches delivered before it without reaching the hook are withdrawn (they will never push)."""
    from outre_async.cache._history import HistoryDecision

    from outre_async.loader._history import Push

    view, pushes = _epoch_view(10, window=0)
    owner = view.owner
    owner.first, owner.current = None, view
    empty = np.zeros(0, np.int64)
    view.promise(0, pushes)  # batch 0 will push slots 2 and 4 ...
    view.promise(1, HistoryDecision(empty, empty, np.array([0]), np.array([3]), empty))  # ... batch 1 slot 3
    assert not view.snapshot(2).valid.any()  # not started: nothing is pruned, promised or not
    view.record(HistoryDecision(empty, empty, empty, empty, empty), torch.device("cpu"), 0)  # peeked
    view.record(HistoryDecision(empty, empty, empty, empty, empty), torch.device("cpu"), 1)
    owner.apply(Push(1, np.array([3]), torch.ones(1, 2)))  # batch 1's hook: the history starts at step 1
    assert owner.first == 1 and owner.hooked_from == 2
    assert view.snapshot(2).valid.tolist() == [0, 0, 0, 1, 0, 0]  # batch 0's promises are gone
    view.record(HistoryDecision(empty, empty, empty, empty, empty), torch.device("cpu"), 2)
    with pytest.raises(oa.errors.HistoryError, match="step 2 never reached the history hook"):  # from now on, every batch
        view.record(HistoryDecision(empty, empty, empty, empty, empty), torch.device("cpu"), 3)


def test_grad_admission_writes_rows_at_most_the_median_and_retires_the_others() -> None:
    """FreshGNN's rule: a row whose gradient is above the batch's median is not written, and its older
    row (pushed by an earlier batch) is no longer offered: the node is changing fast, so neither row
    should stand in for it.  A push older than the row in the table changes nothing."""
    from outre_async.loader._history import Push

    view, _ = _epoch_view(10, window=0, admission="grad")
    owner, table = view.owner, view.owner.table
    table.write(np.arange(4), torch.full((4, 2), 7.0), step=0)
    owner.apply(Push(2, np.arange(4), torch.ones(4, 2), torch.tensor([0.1, 0.2, 0.9, 0.8])))
    assert table.stamp[:4].tolist() == [2, 2, 0, 0] and table.rows[2].tolist() == [7.0, 7.0]
    assert view.snapshot(3).valid.tolist() == [1, 1, 0, 0, 0, 0]
    owner.apply(Push(1, np.array([0, 5]), torch.ones(2, 2), torch.tensor([5.0, 0.0])))  # slot 0: stale push
    assert view.snapshot(3).valid.tolist() == [1, 1, 0, 0, 0, 1]
    assert owner.counts["pushed"] == 3 and owner.counts["offered"] == 6


@pytest.mark.parametrize("ordered", [False, True])
def test_batches_sampled_before_a_push_pull_its_promised_rows(dataset: oa.Dataset, ordered: bool) -> None:
    """A slow training step lets the samplers run a full pipeline (~10 batches) ahead, so an epoch's
    early batches are all sampled before any of its pushes lands: what they pull of this epoch's rows
    comes from a promise, and still equals the exact recompute.  (The history starts at the first
    exchange, so a first epoch is left after one batch: promises need a started history.)"""
    async def body() -> list[int]:
        model = _model().eval()
        exact = _exact_hidden(dataset, model)
        loader = _loader(dataset, 1000, fanouts=[-1, -1], ordered=ordered, extract_queue=4, ready_queue=4,
                         hist={"candidates": np.arange(N // 2, N)})
        pulls = []
        async with loader:
            async for batch in loader:
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                break
            async for batch in loader:
                await asyncio.sleep(0.02)  # the pipeline fills up meanwhile
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                pulls.append(_check_pulls(batch, exact))
        return pulls

    pulls = run(body(), timeout=60)
    assert sum(pulls[1:6]) > 0, pulls


# -- warm-up ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("warmup", [5, 20])
def test_no_batch_trained_before_the_warmup_pulls(dataset: oa.Dataset, ordered: bool, warmup: int) -> None:
    async def body() -> list[tuple[int, int]]:
        model = _model().eval()
        loader = _loader(dataset, 1000, fanouts=[-1, -1], ordered=ordered, num_samplers=2, num_extractors=2,
                         source=FaultySource(dataset, seed=warmup), hist={"warmup": warmup})
        steps = []
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, warmup + i) for i, s in enumerate(loader._res.samplers)]
            for _ in range(3):
                async for batch in loader:
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                    steps.append((batch.history.step, len(batch.history.pull_index)))
        return steps

    steps = run(body(), timeout=60)
    assert [s for s, _ in steps] == list(range(len(steps))) and len(steps) == 3 * 14
    assert all(pulled == 0 for step, pulled in steps if step < warmup)
    assert sum(pulled for step, pulled in steps if step >= warmup + 8) > 0  # the cache works after it


def test_warmup_defaults_to_the_staleness_and_zero_turns_it_off() -> None:
    assert oa.HistoryConfig(staleness=100, dim=HID).warmup == 100
    assert oa.HistoryConfig(staleness=100, dim=HID, warmup=0).warmup == 0
    assert oa.HistoryConfig(staleness=1, dim=HID).warmup == 0


# -- what is pushed ---------------------------------------------------------------------------------
def test_pushed_rows_are_h_before_dropout_and_pulled_rows_get_a_fresh_mask(dataset: oa.Dataset) -> None:
    """A row is reused for up to ``staleness`` steps: it must be the exact h^(L-1) (what evaluation
    computes), not one dropout sample of it replayed at every use."""
    from outre_async.loader._history_record import HistoryRecord, Push

    torch.manual_seed(0)
    model = oa.GraphSAGE(3, 16, 2, 2, dropout=0.5).train()
    x, edges = torch.randn(4, 3), torch.tensor([[1, 2, 3], [0, 0, 1]])
    pushes: list[Push] = []
    row = torch.rand(1, 16) + 0.5
    record = HistoryRecord(pushes.append, 0, 16, "all", torch.tensor([2]), row,
                           torch.tensor([0, 1, 3]), np.array([0, 1, 2]))
    seen = []
    model.convs[-1].register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    model(x, edges, history=record)
    with torch.no_grad():
        exact = model.hidden(x, edges)  # train mode: hidden() applies no dropout to h^(L-1)
    torch.testing.assert_close(pushes[0].rows, exact[[0, 1, 3]])
    pulled = seen[0][2]  # the last layer's input at the pulled row: the row under a fresh mask
    assert ((pulled == 0) | torch.isclose(pulled, 2 * row[0])).all() and (pulled == 0).any()


# -- shutdown paths -----------------------------------------------------------------------------
def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("stop_at", [0, 3, 9])
@pytest.mark.parametrize("ordered", [False, True])
def test_early_break_leaves_nothing_and_next_epoch_matches_the_oracle(dataset: oa.Dataset, stop_at: int,
                                                                     ordered: bool) -> None:
    threads, fds = threading.active_count(), _fds()
    run(_oracle_epochs(dataset, ordered=ordered, seed=stop_at, epochs=3, stop_at=stop_at), timeout=120)
    assert threading.active_count() == threads and _fds() == fds


@pytest.mark.parametrize("stop_at", [1, 6])
def test_exception_and_cancellation_mid_epoch_then_the_oracle_holds(dataset: oa.Dataset, stop_at: int) -> None:
    model = _model().eval()
    exact = _exact_hidden(dataset, model)

    async def body() -> int:
        loader = _loader(dataset, 1000, fanouts=[-1, -1], source=FaultySource(dataset, seed=stop_at))
        async with loader:
            async def consume(fail: bool) -> None:
                async for i, batch in _enumerate(loader):
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                    _check_pulls(batch, exact)
                    if i == stop_at and fail:
                        raise KeyError("boom")
                    if i == stop_at:
                        await asyncio.sleep(10)

            with pytest.raises(KeyError):
                await consume(True)
            task = asyncio.ensure_future(consume(False))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            pulled = 0
            async for batch in loader:
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                pulled += _check_pulls(batch, exact)
            return pulled

    threads, fds = threading.active_count(), _fds()
    assert run(body(), timeout=60) > 0
    assert threading.active_count() == threads and _fds() == fds


# -- admission, GCN -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("staleness", "admission", "runs"), [(100, "auto", "grad"), (3, "auto", "all"),
                                                              (100, "all", "all"), (3, "grad", "grad")])
def test_auto_admission_is_grad_when_a_row_may_be_reused_for_an_epoch(dataset: oa.Dataset, staleness: int,
                                                                        admission: str, runs: str) -> None:
    with _loader(dataset, staleness, hist={"admission": admission}) as loader:
        steps = len(loader._setup.plan(0))
        assert 3 < steps <= 100  # the dataset's epoch lies between the two staleness values
        assert loader.stats()["history"]["admission"] == runs
        assert oa.HistoryConfig(staleness=staleness, dim=HID).admission == "auto"  # the default


def test_grad_admission_writes_at_most_half_of_each_push(dataset: oa.Dataset) -> None:
    model = _model(cls=oa.GCN)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with _loader(dataset, 50, hist={"admission": "grad"}) as loader:
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
            opt.zero_grad()
            loss.backward()
            opt.step()
        stats = loader.stats()["history"]
    assert 0 < stats["pushed"] <= stats["offered"] * 0.6


def test_gcn_seeds_see_the_unpruned_normalisation_of_a_pulled_node() -> None:
    """GCN weighs a message by 1/sqrt(deg of its source); a pulled node has no in-edges in its batch,
    so the hook's degree must stand in for them: seed outputs equal the unpruned batch's."""
    from outre_async.loader._history_record import HistoryRecord

    model = oa.GCN(3, 4, 2, 2).eval()
    x = torch.randn(5, 3)
    full = torch.tensor([[1, 2, 3, 4], [0, 0, 1, 1]])  # seed 0 <- 1, 2; node 1 <- 3, 4
    with torch.no_grad():
        h = model.hidden(x, full)
        want = model.convs[-1](h, full)[0]
        record = HistoryRecord(lambda push: None, 0, 4, "all", torch.tensor([1]), h[1:2].clone(),
                               torch.tensor([], dtype=torch.long), np.empty(0, np.int64))
        record.pull_degree = torch.tensor([2])
        got = model(x, full[:, :2], history=record)[0]  # node 1 pruned: its in-edges are gone
    torch.testing.assert_close(got, want)


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{"staleness": 0}, {"staleness": 2, "dim": 0}, {"staleness": 2, "admission": "x"},
                                {"staleness": 2, "budget": -1}, {"staleness": 2, "window": -1},
                                {"staleness": 2, "warmup": -1}, {"staleness": 2, "warmup": 1.5},
                                {"staleness": 2, "jitter": 1.0}, {"staleness": 2, "jitter": -0.1},
                                {"staleness": 2, "jitter": "half"}])
def test_bad_history_config_is_a_one_line_config_error(kw: dict) -> None:
    with pytest.raises(oa.ConfigError) as err:
        oa.HistoryConfig(**{"dim": HID, **kw})
    assert "\n" not in str(err.value) and "=" in str(err.value)


def test_budget_below_one_slot_and_one_layer_are_config_errors(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="smaller than one slot"):
        _loader(dataset, 10, hist={"budget": 4 * N + 10})
    with pytest.raises(oa.ConfigError, match="at least 2 layers"):
        _loader(dataset, 10, fanouts=[4])
    small = _loader(dataset, 10, hist={"budget": 4 * N + 10 * (4 * HID + 21 + 2)})
    assert small._history.table.num_slots == 10


def test_a_model_without_the_hook_prunes_nothing(dataset: oa.Dataset) -> None:
    """History starts at the first exchange: a model that never calls the hook gets whole subgraphs
    (nothing pruned, nothing to stand in for), and stats() says the history never started."""
    model = _model()
    with _loader(dataset, 10) as loader:
        for _ in range(2):
            for batch in loader:
                assert len(batch.history.pull_index) == 0
                model(batch.x, batch.edge_index)  # history= not passed
        stats = loader.stats()["history"]
    assert stats["started_at"] is None and stats["pulled"] == 0 and stats["clock"] == 28


def test_a_batch_that_skips_the_hook_after_the_history_started_is_a_history_error(dataset: oa.Dataset) -> None:
    model = _model().eval()
    with _loader(dataset, 10) as loader, pytest.raises(oa.errors.HistoryError, match="never reached the history hook"):
        for i, batch in enumerate(loader):
            if i != 3:
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)


# -- peeking before the model exists (issue 28.8) ------------------------------------------------------
@pytest.mark.parametrize("ordered", [False, True])
def test_peeking_at_batches_without_a_model_then_training_keeps_the_bound(dataset: oa.Dataset, ordered: bool) -> None:
    """A notebook's first cells: look at a couple of batches (sync and async), then build the model and
    train.  Nothing raises, the peeked batches pruned nothing, and afterwards every pulled row equals
    the exact recompute within the bound."""
    async def body() -> tuple[list[int], dict]:
        loader = _loader(dataset, 6, fanouts=[-1, -1], ordered=ordered, source=FaultySource(dataset, seed=4))
        peeked = []
        async with loader:
            for _ in range(2):
                async for i, batch in _enumerate(loader):
                    peeked.append(len(batch.history.pull_index))
                    if i == 1:
                        break
            model = _model().eval()
            exact = _exact_hidden(dataset, model)
            pulled = 0
            for _ in range(3):
                async for batch in loader:
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                    pulled += _check_pulls(batch, exact)
            stats = loader.stats()["history"]
        assert pulled > 0
        return peeked, stats

    peeked, stats = run(body(), timeout=120)
    assert peeked == [0, 0, 0, 0] and stats["started_at"] == 4
    assert all(1 <= age <= 6 for age in stats["realised_staleness"]), stats["realised_staleness"]
    with _loader(dataset, 6) as loader:  # the sync form
        it = iter(loader)
        first, second = next(it), next(it)
        del it
        assert len(first.history.pull_index) == len(second.history.pull_index) == 0
        model = _model()
        for batch in loader:
            seed_logits(model, batch)


# -- one epoch at a time (issue 27.2) -----------------------------------------------------------------
def test_a_second_epoch_iterated_at_once_is_refused_sync(dataset: oa.Dataset) -> None:
    model = _model().eval()
    with _loader(dataset, 20) as loader:
        first = iter(loader)
        batch = next(first)
        model(batch.x, batch.edge_index, history=batch.history)
        with pytest.raises(oa.errors.ConcurrentEpochError, match="still being iterated") as err:
            next(iter(loader))
        assert "\n" not in str(err.value) and "epoch 0" in str(err.value)
        for batch in first:  # the first epoch goes on, within the bound
            with torch.no_grad():
                model(batch.x, batch.edge_index, history=batch.history)
        for batch in loader:  # and once it is done, the next one runs
            with torch.no_grad():
                model(batch.x, batch.edge_index, history=batch.history)
        stats = loader.stats()["history"]
    assert stats["clock"] == 2 * 14 and max(stats["realised_staleness"]) <= 20


def test_a_second_epoch_iterated_at_once_is_refused_async(dataset: oa.Dataset) -> None:
    """The first epoch holds its iterator while a second one starts: refused (after the grace a
    dropped iterator gets), the first goes on within the bound, and one at a time works afterwards."""
    async def body() -> dict:
        model = _model().eval()
        loader = _loader(dataset, 20, source=FaultySource(dataset, seed=9))
        async with loader:
            async def consume(it) -> int:  # type: ignore[no-untyped-def]
                n = 0
                async for batch in it:
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                    n += 1
                return n

            first = loader.__aiter__()
            batch = await first.__anext__()
            model(batch.x, batch.edge_index, history=batch.history)
            with pytest.raises(oa.errors.ConcurrentEpochError, match="still being iterated"):
                await consume(loader)
            assert await consume(first) == 13
            assert await consume(loader) == 14
            return loader.stats()["history"]

    stats = run(body(), timeout=60)
    assert stats["clock"] == 28 and max(stats["realised_staleness"]) <= 20


def test_two_epochs_at_once_are_refused_under_python_O(dataset: oa.Dataset, tmp_path) -> None:
    """The refusal is a ConcurrentEpochError, not an assert: ``python -O`` keeps it."""
    import subprocess
    import sys

    script = tmp_path / "two_epochs.py"
    script.write_text(
        "import sys\nimport outre_async as oa\n"
        "try:\n    assert False\nexcept AssertionError:\n    sys.exit('asserts are on: not python -O')\n"
        "h = oa.HistoryConfig(staleness=20, dim=8, warmup=0, admission='all')\n"
        "loader = oa.OutreLoader(sys.argv[1], fanouts=[4, 3], batch_size=24, history=h, io=oa.IOOptions(backend='memory'))\n"
        "with loader:\n"
        "    first = iter(loader)\n"
        "    next(first)\n"
        "    try:\n"
        "        next(iter(loader))\n"
        "    except oa.errors.ConcurrentEpochError as exc:\n"
        "        print('refused:', exc)\n"
        "    else:\n"
        "        print('not refused')\n"
        "    first.close()\n"
        "import asyncio\n"
        "async def main():\n"
        "    async with oa.OutreLoader(sys.argv[1], fanouts=[4, 3], batch_size=24, history=h,\n"
        "                              io=oa.IOOptions(backend='memory')) as aloader:\n"
        "        first = aloader.__aiter__()\n"
        "        await first.__anext__()\n"
        "        try:\n"
        "            await aloader.__aiter__().__anext__()\n"
        "        except oa.errors.ConcurrentEpochError as exc:\n"
        "            print('refused:', exc)\n"
        "        await first.aclose()\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-O", str(script), str(dataset.path)], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused: epoch 1 of this loader") for line in lines), lines


# -- public per-batch history (issue 28.11) ----------------------------------------------------------
def test_the_record_exposes_ages_and_refused_pushes(dataset: oa.Dataset) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for admission in ("all", "grad"):
        ages, refused, records = [], 0, []
        with _loader(dataset, 8, hist={"admission": admission}) as loader:
            for _ in range(2):
                for batch in loader:
                    rec = batch.history
                    assert rec.refused_index is None and rec.pull_age.shape == rec.pull_index.shape
                    assert rec.pull_rows.shape == (len(rec.pull_index), HID) and isinstance(rec.step, int)
                    loss = torch.nn.functional.cross_entropy(seed_logits(model, batch), seed_targets(batch))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    ages += rec.pull_age.tolist()
                    stamp_ok = bool(((rec.pull_age >= 1) & (rec.pull_age <= 8)).all())
                    assert stamp_ok and "HistoryRecord(step=" in repr(rec)
                    records.append(rec)
            for rec in records:  # the sync bridge applies a push before the next delivery
                assert set(rec.refused_index.tolist()) <= set(rec.push_index.tolist())
                refused += len(rec.refused_index)
            stats = loader.stats()["history"]
        assert sorted(set(ages)) == sorted(stats["realised_staleness"]) and stats["refused"] == refused
        if admission == "all":
            assert refused == 0 and stats["pulled"] > 0
        else:
            assert 0 < refused <= stats["offered"] * 0.6


def test_wrong_width_and_a_second_exchange_are_history_errors(dataset: oa.Dataset) -> None:
    with _loader(dataset, 10) as loader:
        batch = next(iter(loader))
        with pytest.raises(oa.errors.HistoryError, match=r"expected \[nodes, 8\]") as err:
            batch.history.exchange(torch.zeros(len(batch.n_id), HID + 1))
        assert "\n" not in str(err.value)
        batch.history.exchange(torch.zeros(len(batch.n_id), HID))
        with pytest.raises(oa.errors.HistoryError, match="twice"):
            batch.history.exchange(torch.zeros(len(batch.n_id), HID))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_pins_a_host_table_and_pulls_onto_the_device(dataset: oa.Dataset) -> None:
    model = _model().cuda().eval()
    with _loader(dataset, 1000, fanouts=[-1, -1], device="cuda", hist={"placement": "host"}) as loader:
        assert loader._history.table.rows.is_pinned()
        for _ in range(2):
            for batch in loader:
                assert batch.history.pull_rows.device.type == "cuda"
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
        assert loader.stats()["history"]["pulled"] > 0
