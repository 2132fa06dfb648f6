"""Every keyword of PyG's ``NeighborLoader`` (and the ``NodeLoader`` / ``DataLoader`` keywords it
passes on) reaches ``OutreLoader`` as a knob, an alias, a value that means what the loader does, or
a one-line ConfigError saying what it does instead: never a bare ``TypeError``.  The names come from
the installed PyG and torch, so a name they add shows up here."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from conftest import labelled_store
from torch.utils.data import DataLoader
from torch_geometric.data import Data
from torch_geometric.loader import LinkLoader, LinkNeighborLoader, NeighborLoader, NodeLoader
from torch_geometric.sampler.base import SubgraphType

import outre_async as oa
from outre_async.loader._pyg_names import NO_COUNTERPART
from outre_async.loader._options import group_knobs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(Path(tmp_path_factory.mktemp("pygnames")) / "ds", dim=6)


def _pyg_names() -> set[str]:
    names: set[str] = set()
    for cls in (NeighborLoader, NodeLoader, LinkNeighborLoader, LinkLoader, DataLoader):
        names |= {n for n, p in inspect.signature(cls.__init__).parameters.items()
                  if n != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD}
    return names - {"dataset"}  # DataLoader's first argument: ours has the same name and meaning


OURS = set(inspect.signature(oa.OutreLoader.__init__).parameters)

# name -> (values that mean what the loader does, a value PyG takes that has no counterpart)
CASES: dict[str, tuple[list, object]] = {
    "data": ([], Data(x=torch.zeros(3, 1))),
    "node_sampler": ([], object()),
    "replace": ([False], True),
    "subgraph_type": (["directional", SubgraphType.directional], "induced"),
    "directed": ([True], False),
    "disjoint": ([False], True),
    "input_time": ([None], torch.arange(3)),
    "temporal_strategy": (["uniform"], "last"),
    "time_attr": ([None], "time"),
    "weight_attr": ([None], "weight"),
    "transform_sampler_output": ([None], lambda out: out),
    "is_sorted": ([True, False], "yes"),
    "filter_per_worker": ([None, True], False),
    "neighbor_sampler": ([None], object()),
    "custom_cls": ([None], Data),
    "input_id": ([None], torch.arange(3)),
    "sampler": ([None], [0, 1, 2]),
    "batch_sampler": ([None], [[0, 1]]),
    "collate_fn": ([None], lambda items: items),
    "timeout": ([0, 0.0], 5),
    "worker_init_fn": ([None], lambda worker: None),
    "multiprocessing_context": ([None], "spawn"),
    "generator": ([None], torch.Generator()),
    "prefetch_factor": ([None], 2),
    "persistent_workers": ([True], False),
    "pin_memory_device": ([""], "cuda"),
    # LinkNeighborLoader's: edge_label_index, edge_label, neg_sampling(_ratio) are the loader's own
    # keywords (tests/loader/test_link_contract.py); temporal links and a sampler object have no counterpart
    "edge_label_time": ([None], torch.arange(3)),
    "link_sampler": ([], object()),
}


def test_every_pyg_name_is_a_knob_an_alias_or_in_the_table() -> None:
    missing = _pyg_names() - OURS - set(NO_COUNTERPART) - {"in_order"}
    assert not missing, f"PyG names with no entry: {sorted(missing)}"
    assert set(CASES) == set(NO_COUNTERPART) == _pyg_names() - OURS - {"in_order"}  # every name tested below


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_value_with_no_counterpart_is_a_config_error_saying_what_we_do(dataset: oa.Dataset, name: str) -> None:
    _, refused = CASES[name]
    with pytest.raises(oa.ConfigError) as err:
        oa.OutreLoader(dataset, **group_knobs(dict(num_neighbors=[2], batch_size=16, **{name: refused})))
    text = str(err.value)
    assert text.startswith(f"{name}=") and "has no counterpart in OutreLoader: " in text and "\n" not in text
    assert len(text.split(": ", 1)[1]) > 30  # says what the loader does instead


@pytest.mark.parametrize("name", sorted(n for n, (ok, _) in CASES.items() if ok))
def test_values_that_mean_what_the_loader_does_are_accepted(dataset: oa.Dataset, name: str) -> None:
    plain = oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16)
    for value in CASES[name][0]:
        loader = oa.OutreLoader(dataset, **group_knobs(dict(num_neighbors=[2], batch_size=16, **{name: value})))
        assert loader.config == plain.config  # accepted, and nothing else changed


def test_in_order_is_ordered(dataset: oa.Dataset) -> None:
    assert oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, in_order=True).config.ordered is True
    assert oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, in_order=False).config.ordered is False
    with pytest.raises(oa.ConfigError, match=r"pass ordered= or in_order= \(PyG's name for it\), not both"):
        oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, in_order=True, ordered=True)
    with pytest.raises(oa.ConfigError, match=r"in_order=1 must be True or False"):
        oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, in_order=1)


def test_a_name_pyg_does_not_have_stays_a_type_error_with_a_suggestion(dataset: oa.Dataset) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'fanout'; did you mean 'fanouts'\?"):
        oa.OutreLoader(dataset, fanout=[2], batch_size=16)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'persistant_workers'; did you mean "
                                        r"'persistent_workers'\?"):
        oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, persistant_workers=True)


@pytest.mark.timeout(60)
def test_a_ported_neighbor_loader_call_runs_as_written(dataset: oa.Dataset) -> None:
    """The keywords of a typical NeighborLoader script, unchanged but for the class name."""
    loader = oa.OutreLoader(dataset, num_neighbors=[3, 2], batch_size=16, input_nodes="train", shuffle=True,
                            num_workers=2, persistent_workers=True, replace=False, disjoint=False,
                            subgraph_type="directional", directed=True, filter_per_worker=True, in_order=True,
                            is_sorted=False, io=oa.IOOptions(backend="memory"))
    with loader:
        batches = list(loader)
    assert len(batches) == len(loader) > 1 and [b.seq for b in batches] == list(range(len(batches)))


def test_a_pyg_graph_in_memory_points_to_from_pyg() -> None:
    from torch_geometric.data import HeteroData

    data = Data(x=torch.zeros(3, 1), edge_index=torch.tensor([[0, 1], [1, 2]]))
    with pytest.raises(oa.ConfigError, match=r"not a PyG Data in memory: convert it once with oa\.from_pyg"):
        oa.OutreLoader(data, num_neighbors=[2], batch_size=2)
    with pytest.raises(oa.NotSupportedError, match="heterogeneous graphs are not supported yet"):
        oa.OutreLoader(HeteroData(), num_neighbors=[2], batch_size=2)
    with pytest.raises(oa.ConfigError, match="a dataset folder .* or an oa.Dataset, got int"):
        oa.OutreLoader(3, num_neighbors=[2], batch_size=2)  # type: ignore[arg-type]


def test_link_prediction_keywords_are_taken_not_refused(dataset: oa.Dataset) -> None:
    loader = oa.OutreLoader(dataset, num_neighbors=[2], batch_size=16, edge_label_index=torch.zeros(2, 3, dtype=torch.long),
                            neg_sampling_ratio=1.0, io=oa.IOOptions(backend="memory"))
    with loader:
        (batch,) = list(loader)
    assert batch.edge_label.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
