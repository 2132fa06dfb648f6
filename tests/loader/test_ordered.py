"""Ordered delivery end to end: plan order under seeded delays with a tiny out-of-turn budget, every
part within its capacity (the pools' own counters), nothing held after any early end."""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import replace

import numpy as np
import pytest
from conftest import labelled_store, run
from fakes import DelayedSampler, FaultySource

import outre_async as oa
from outre_async.loader._budget import MIN_BATCHES, expected_batch_bytes
from outre_async.loader._options import group_knobs

N, DIM = 600, 20


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("ordered") / "ds")


def _ordered(ds: oa.Dataset, seed: int, out_of_turn: int | None, **kw: object) -> oa.OutreLoader:
    """An ordered loader over a delaying source, under a budget (so the pool refuses to overflow), its
    pool of batch matrices at the floor (2.2 probed batches), the out-of-turn budget replaced by
    ``out_of_turn`` bytes (None: the plan's, 1.1 x 3 batches; a batch here is ~20 KB)."""
    opts = {"fanouts": [4, 3], "batch_size": 16, "seed": 7, "ordered": True, "num_samplers": 3, "num_extractors": 3,
            "memory_budget": "4MiB", "source": FaultySource(ds, seed=seed), **kw}
    loader = oa.OutreLoader(ds, **group_knobs(opts))  # type: ignore[arg-type]
    parts = {**loader.memory.parts, "batches": math.ceil(MIN_BATCHES * expected_batch_bytes(loader.config, loader._setup.sizes))}
    if out_of_turn is not None:
        parts["reorder buffer"] = out_of_turn
    loader.memory = replace(loader.memory, parts=parts)
    return loader


def _nothing_held(loader: oa.OutreLoader) -> None:
    s = loader.stats()
    assert s["out_of_turn"]["used"] == 0 and s["batch_matrices"]["used"] == 0
    assert s["buffer"]["free_slots"] == loader.buffer_rows and s["buffer"]["pinned_rows"] == 0


@pytest.mark.parametrize("out_of_turn", [0, 30_000, None])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plan_order_under_random_delays_within_a_tiny_out_of_turn_budget(dataset: oa.Dataset, out_of_turn: int | None,
                                                                         seed: int) -> None:
    async def body() -> None:
        loader = _ordered(dataset, seed, out_of_turn)
        planned = loader.memory.parts
        rng = random.Random(seed)
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(loader._res.samplers)]
            for _epoch in range(2):
                seqs = []
                async for batch in loader:
                    np.testing.assert_array_equal(batch.x.numpy(), dataset.features[batch.n_id.numpy()])
                    seqs.append(batch.seq)
                    await asyncio.sleep(rng.random() * 2e-3)
                assert seqs == list(range(len(loader)))
                s = loader.stats()
                assert s["out_of_turn"]["peak"] <= planned["reorder buffer"]
                assert s["batch_matrices"]["peak"] <= planned["batches"]
                assert s["out_of_turn"]["in_turn"] + s["out_of_turn"]["out_of_turn"] == len(loader)
                _nothing_held(loader)

    run(body(), timeout=60)


@pytest.mark.parametrize("how", ["break", "cancel", "error"])
@pytest.mark.parametrize("out_of_turn", [0, None])
def test_an_early_end_leaves_no_lease_held(dataset: oa.Dataset, how: str, out_of_turn: int | None) -> None:
    async def body() -> None:
        loader = _ordered(dataset, 3, out_of_turn, extract_queue=6)
        if how == "error":
            loader._setup.source.fail_on = {int(dataset.split("train")[200])}
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, 9 + i) for i, s in enumerate(loader._res.samplers)]

            async def consume() -> None:
                async for batch in loader:
                    await asyncio.sleep(0.01)  # the queues and the reorder buffer fill up meanwhile
                    if how == "break" and batch.seq == 2:
                        break

            task = asyncio.ensure_future(consume())
            if how == "cancel":
                await asyncio.sleep(0.05)
                task.cancel()
            if how == "break":
                await task
            else:
                with pytest.raises((asyncio.CancelledError, oa.errors.ExtractorError)):
                    await task
            await loader.aclose()
            _nothing_held(loader)

    run(body(), timeout=60)
