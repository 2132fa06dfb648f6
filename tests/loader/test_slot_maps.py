"""The loader's per-node maps sized by what they hold: on a graph much larger than what a batch and the
queues reach, a small budget plans the feature buffer's map as a hash table (and the samplers relabel
through tables), a large one the direct array; both deliver the same batches, and the plan's parts are
what the buffer and samplers hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.features import _buffer_kernels as K
from outre_async.sampling._sampler import NeighborSampler

N = 200_000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(0)
    indptr, indices = random_graph(rng, N, 6)
    features = rng.standard_normal((N, 4)).astype(np.float32)
    return write_store(tmp_path_factory.mktemp("maps") / "ds", indptr, indices, features=features,
                       labels=rng.integers(0, 3, N), num_classes=3, splits={"train": np.arange(0, 3000)})


def _epoch(loader: oa.OutreLoader) -> list[tuple[torch.Tensor, ...]]:
    return [(b.n_id.clone(), b.x.clone(), b.edge_index.clone()) for b in loader]


def test_small_budget_maps_by_hash_table_and_delivers_the_same_batches(dataset: oa.Dataset) -> None:
    small = oa.OutreLoader(dataset, split="train", fanouts=[3, 2], batch_size=32, memory_budget="3MiB", ordered=True)
    large = oa.OutreLoader(dataset, split="train", fanouts=[3, 2], batch_size=32, memory_budget="64MiB", ordered=True)
    got, want = _epoch(small), _epoch(large)
    buf = small._res.buffer
    assert isinstance(buf._map, tuple) and isinstance(large._res.buffer._map, np.ndarray)
    parts = small.stats()["memory"]
    assert buf.map_nbytes == parts["slot table"] < K.table_bytes(N) // 10  # planned, held, far below 8 N
    assert large.stats()["memory"]["slot table"] == K.table_bytes(N)
    assert parts["sampler scratch"] < 2 * NeighborSampler.relabel_bytes(N, None)  # tables, not 4 N each
    rows = torch.from_numpy(np.array(dataset.features[:]))
    assert len(got) == len(want) == 94
    for (n_a, x_a, e_a), (n_b, x_b, e_b) in zip(got, want, strict=True):
        assert torch.equal(n_a, n_b) and torch.equal(e_a, e_b) and torch.equal(x_a, x_b)
        assert torch.equal(x_a, rows[n_a])
    assert buf.pinned_rows() == buf.foreseen_rows() == 0
    keys = buf._map[0]
    assert int((keys >= 0).sum()) <= buf.num_slots  # only the slots' nodes are left once nothing is queued
