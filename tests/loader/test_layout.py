"""The partition-ordered copy read by default (issue 26 item 3): partition batches through a loader
on the original find the copy beside it and hand out the same batches as a loader reading the
original (n_id in the original's ids, x, y, edges), say which copy they read, and the choice can be
overridden or required."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import generated
from outre_async.partition import partition, reorder

import outre_async as oa
from outre_async.loader._layout import ordered_copy_path
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    ds = generated(tmp_path_factory.mktemp("layout") / "g", "tiny")
    partition(ds, 8, name="p8")
    partition(ds, 4, name="p4")  # partitions without a copy
    reorder(ds, "p8", ordered_copy_path(ds, "p8"))
    return ds


KW = {"fanouts": [5, 5], "batch_size": 64, "seed": 4, "partitions": "p8", "parts_per_batch": 2, "ordered": True,
      "neighbor_cache": 1 << 14}


def _batches(ds: oa.Dataset, **kw: object) -> tuple[list, dict]:
    with oa.OutreLoader(ds, **group_knobs(dict(**(KW | kw)))) as loader:
        batches = list(loader)
        return batches, loader.stats()


@pytest.mark.parametrize("backend", ["pread", "memory"])
def test_batches_from_the_ordered_copy_equal_the_originals(dataset: oa.Dataset, backend: str) -> None:
    want, want_stats = _batches(dataset, backend=backend, layout="original")
    got, got_stats = _batches(dataset, backend=backend)  # auto: the copy is there
    assert want_stats["layout"] == {"layout": "original", "path": str(dataset.path)}
    assert got_stats["layout"] == {"layout": "ordered", "path": str(ordered_copy_path(dataset, "p8"))}
    assert len(want) == len(got) > 3
    for a, b in zip(want, got, strict=True):
        assert np.array_equal(a.n_id.numpy(), b.n_id.numpy())  # original ids, whichever copy was read
        assert np.array_equal(a.x.numpy(), b.x.numpy())
        assert np.array_equal(a.y.numpy(), b.y.numpy())
        assert np.array_equal(a.y.numpy(), dataset.labels[a.n_id.numpy()])
        assert np.array_equal(a.edge_index.numpy(), b.edge_index.numpy())
        assert np.array_equal(a.e_id.numpy(), b.e_id.numpy())  # the original's CSC positions
        assert np.array_equal(a.input_id.numpy(), b.input_id.numpy())
        assert a.batch_size == b.batch_size


def test_e_id_of_the_ordered_copy_names_the_original_edge(dataset: oa.Dataset) -> None:
    """Each edge's e_id points, in the original's CSC, at its own source in the target's list (not a
    tautology of the mapping: the copy's positions differ for almost every edge)."""
    got, _ = _batches(dataset, backend="memory")
    indptr, indices = dataset.indptr, dataset.indices
    moved = 0
    for b in got:
        n_id, (src, dst), e_id = b.n_id.numpy(), b.edge_index.numpy(), b.e_id.numpy()
        assert np.array_equal(indices[e_id], n_id[src])
        t = n_id[dst]
        assert ((e_id >= indptr[t]) & (e_id < indptr[t + 1])).all()
        copy = oa.open_dataset(ordered_copy_path(dataset, "p8"))
        moved += int((copy.indptr[copy.ids_of_original(t)] != indptr[t]).sum())
    assert moved > 0


def test_seeds_given_as_ids_are_the_originals(dataset: oa.Dataset) -> None:
    seeds = np.sort(np.random.default_rng(0).choice(dataset.num_nodes, size=200, replace=False))
    want, _ = _batches(dataset, backend="memory", layout="original", split=seeds)
    got, stats = _batches(dataset, backend="memory", split=seeds)
    assert stats["layout"]["layout"] == "ordered"
    for a, b in zip(want, got, strict=True):
        assert np.array_equal(a.n_id.numpy(), b.n_id.numpy())
        assert np.isin(b.n_id.numpy()[: b.batch_size], seeds).all()


def test_the_layout_choice_can_be_overridden_or_required(dataset: oa.Dataset) -> None:
    _, stats = _batches(dataset, backend="memory", partitions="p4")  # no copy for p4: the original
    assert stats["layout"]["layout"] == "original"
    with pytest.raises(oa.ConfigError, match="outre reorder"):
        oa.OutreLoader(dataset, **group_knobs(dict(**(KW | {"partitions": "p4", "layout": "ordered", "backend": "memory"}))))
    with oa.OutreLoader(dataset, **group_knobs(dict(**(KW | {"layout": str(ordered_copy_path(dataset, "p8")), "backend": "memory"})))) as lo:
        assert lo.stats()["layout"]["layout"] == "ordered"
    with oa.OutreLoader(dataset, fanouts=[5], batch_size=64, io=oa.IOOptions(backend="memory")) as lo:  # no partitions: original
        assert lo.stats()["layout"]["layout"] == "original"
