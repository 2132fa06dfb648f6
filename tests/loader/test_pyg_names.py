"""What a PyG user types: PyG's names
as aliases or named errors, masks and tensors as ``input_nodes``, numpy fanouts, ``transform``,
``repr``; and reproducibility: batch content is a function of the seed in both delivery orders."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_graph, run, write_store
from fakes import DelayedSampler, FaultySource

import outre_async as oa
from outre_async.loader._options import group_knobs

N, DIM = 400, 6
@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(11)
    indptr, indices = random_graph(rng, N, 10)
    return write_store(tmp_path_factory.mktemp("names") / "ds", indptr, indices,
                       features=rng.standard_normal((N, DIM)).astype(np.float32), labels=rng.integers(0, 4, N),
                       num_classes=4, splits={"train": np.arange(0, 300, 2), "val": np.arange(1, 300, 2)})


def _seed_batches(loader: oa.OutreLoader) -> list[np.ndarray]:
    """Each batch's seeds, checking ``input_id``: the seeds' positions in the loader's input nodes."""
    out = []
    for b in loader:
        seeds = b.n_id[: b.batch_size].numpy().copy()
        np.testing.assert_array_equal(loader._setup.seeds[b.input_id.numpy()], seeds)
        out.append(seeds)
    return out


@pytest.mark.parametrize("as_type", [np.asarray, torch.tensor])
def test_boolean_mask_and_tensor_ids_are_input_nodes(dataset: oa.Dataset, as_type) -> None:
    mask = np.zeros(N, bool)
    mask[dataset.split("train")] = True
    kw = {"num_neighbors": [3, 2], "batch_size": 16, "backend": "memory", "ordered": True}
    with (oa.OutreLoader(dataset, **group_knobs(dict(input_nodes=as_type(mask), **kw))) as by_mask,
          oa.OutreLoader(dataset, **group_knobs(dict(input_nodes=as_type(dataset.split("train")), **kw))) as by_ids,
          oa.OutreLoader(dataset, **group_knobs(dict(split="train", **kw))) as by_name):
        assert len(by_mask) == len(by_ids) == len(by_name) == 10  # 150 seeds, not N ids "0/1"
        a, b, c = _seed_batches(by_mask), _seed_batches(by_ids), _seed_batches(by_name)
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
    with pytest.raises(oa.ConfigError, match="one entry per node"):
        oa.OutreLoader(dataset, **group_knobs(dict(input_nodes=mask[:-1], **kw)))


def test_pyg_aliases_map_onto_our_knobs(dataset: oa.Dataset) -> None:
    loader = oa.OutreLoader(dataset, num_neighbors=np.array([4, 2]), batch_size=8, num_workers=3, input_nodes="val")
    assert loader.config.fanouts == (4, 2) and loader.config.num_samplers == 3
    assert len(loader) == 19  # the 150 val seeds
    assert oa.OutreLoader(dataset, fanouts=np.array([5]), batch_size=8, num_workers=0).config.num_samplers == 2


@pytest.mark.parametrize(("kw", "match"), [
    ({"fanouts": [2], "num_neighbors": [2]}, r"fanouts= or num_neighbors="),
    ({"num_neighbors": [2], "split": "train", "input_nodes": "val"}, r"split= or input_nodes="),
    ({"num_neighbors": [2], "num_samplers": 3, "num_workers": 4}, r"num_samplers= or num_workers="),
    ({"num_neighbors": [2], "num_workers": -1}, r"num_workers=-1 must be an int >= 1"),
    ({"num_neighbors": [2], "pin_memory": True}, r"device='cuda'"),
    ({"num_neighbors": [2], "transform": "to_dense"}, r"transform must be a callable"),
    ({"num_neighbors": {("a", "to", "b"): [2]}}, r"heterogeneous"),
    ({"num_neighbors": [2], "input_nodes": ("paper", np.arange(3))}, r"heterogeneous"),
])
def test_pyg_names_that_clash_or_do_not_map_are_named_errors(dataset: oa.Dataset, kw: dict, match: str) -> None:
    with pytest.raises(oa.ConfigError, match=match):
        oa.OutreLoader(dataset, **group_knobs(dict(batch_size=8, **kw)))


def test_transform_is_applied_to_each_batch(dataset: oa.Dataset) -> None:
    def add_degree(batch):
        batch.marked = batch.batch_size * 2
        return batch

    with oa.OutreLoader(dataset, num_neighbors=[2], batch_size=32, transform=add_degree, io=oa.IOOptions(backend="memory")) as loader:
        batches = list(loader)
    assert [b.marked for b in batches] == [2 * b.batch_size for b in batches]


def test_repr_says_what_the_loader_is(dataset: oa.Dataset) -> None:
    loader = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, ordered=True, memory_budget="64MiB")
    text = repr(loader)
    for part in (str(dataset.path), "input_nodes='train' (150 seeds)", "fanouts=[3, 2]", "batch_size=16",
                 "batches=10", "order=plan", "backend='auto'", "memory_budget=64.0 MiB", "state=not opened"):
        assert part in text, (part, text)
    next(iter(loader))
    assert "state=open)" in repr(loader)
    loader.close()
    assert repr(loader).endswith("state=closed)"), repr(loader)
    assert len(list(loader)) == 10 and "state=open)" in repr(loader)  # iterating again reopens it
    loader.close()


# -- reproducibility ---------------------------------------------------------------------------------
def _run_with_chaos(ds: oa.Dataset, *, ordered: bool, chaos: int, epochs: int = 2) -> list[tuple]:
    """Every batch of ``epochs`` epochs as (epoch, seq, seeds, edges as global pairs, rows), in the
    order delivered, with seeded random delays (``chaos``) in the samplers and the source."""
    async def body() -> list[tuple]:
        loader = oa.OutreLoader(ds, fanouts=[4, 3], batch_size=24, seed=5, ordered=ordered, 
                                pipeline=oa.PipelineOptions(num_samplers=3, num_extractors=3), io=oa.IOOptions(source=FaultySource(ds, seed=chaos)))
        out = []
        async with loader:
            res = loader._res
            res.samplers[:] = [DelayedSampler(s, chaos * 10 + i) for i, s in enumerate(res.samplers)]
            for _ in range(epochs):
                async for b in loader:
                    n_id = b.n_id.numpy()
                    edges = tuple(map(tuple, n_id[b.edge_index.numpy()].T.tolist()))
                    out.append((b.epoch, b.seq, tuple(n_id[: b.batch_size]), edges, b.x.numpy().tobytes(),
                                tuple(b.e_id.tolist()), tuple(b.input_id.tolist())))
        return out

    return run(body())


def test_batch_content_is_a_function_of_the_seed_in_completion_order(dataset: oa.Dataset) -> None:
    first = _run_with_chaos(dataset, ordered=False, chaos=1)
    second = _run_with_chaos(dataset, ordered=False, chaos=2)
    assert set(first) == set(second) and len(first) == len(set(first)) == 2 * 7
    in_plan_order = [(e, s) for e in range(2) for s in range(7)]
    assert [b[:2] for b in first] != in_plan_order or [b[:2] for b in second] != in_plan_order  # delays reorder


def test_plan_order_repeats_the_same_sequence(dataset: oa.Dataset) -> None:
    first = _run_with_chaos(dataset, ordered=True, chaos=1)
    assert first == _run_with_chaos(dataset, ordered=True, chaos=3)
    assert [b[:2] for b in first] == [(e, s) for e in range(2) for s in range(7)]
