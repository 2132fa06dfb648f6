"""The loader's surface: a PyG-shaped first row of keywords and four small options objects.

Pinned here: the first row plus the objects' fields are exactly the resolved config's knobs; each
default is written in one place (the first row's in ``LoaderConfig``, the rest in the objects), and the
loader's keywords are passed by name, never gathered from ``locals()``; a knob passed where it no
longer lives is a one-line error naming its home."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import MISSING, fields

import numpy as np
import pytest
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.loader import _config, _loader, _setup
from outre_async.loader import LoaderConfig
from outre_async.loader._options import GROUPS, KNOB_GROUP, PartitionOptions, group_knobs, partition_knobs

N, DIM = 300, 4
# OutreLoader keywords that are not knobs of the resolved config: what to iterate, edge batches, PyG's
# aliases and pass-throughs, the options objects themselves
NOT_KNOBS = {"split", "input_nodes", "num_neighbors", "edge_label_index", "edge_label", "neg_sampling",
             "neg_sampling_ratio", "transform", "num_workers", "pin_memory", *GROUPS}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(3)
    indptr, indices = random_graph(rng, N, 8)
    return write_store(tmp_path_factory.mktemp("surface") / "ds", indptr, indices,
                       features=rng.standard_normal((N, DIM)).astype(np.float32), labels=rng.integers(0, 3, N),
                       num_classes=3, splits={"train": np.arange(0, 200)})


def _keywords() -> dict[str, inspect.Parameter]:
    params = inspect.signature(oa.OutreLoader.__init__).parameters
    return {n: p for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_first_row_and_the_options_objects_are_the_config_knobs_exactly() -> None:
    first = set(_keywords()) - NOT_KNOBS
    grouped = {f.name for cls in GROUPS.values() for f in fields(cls)} - {"source"}
    counts = {f.name for f in fields(PartitionOptions)} - {"name"}
    assert not first & grouped and not first & counts
    assert first | grouped | counts == {f.name for f in fields(LoaderConfig)}
    assert len(_keywords()) <= 25  # PyG's NeighborLoader has 16 named parameters; ours a first row + 4 objects


def _defaults_in_source(cls: type) -> dict[str, ast.expr]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    return {node.target.id: node.value for node in body if isinstance(node, ast.AnnAssign) and node.value is not None}


def test_every_default_has_one_source() -> None:
    """A literal default is written once: the first row's in LoaderConfig (the signature reads them from
    there by name), an option's in its class (LoaderConfig's field reads it from there by name)."""
    config_defaults = _defaults_in_source(LoaderConfig)
    for name, expr in config_defaults.items():
        if name in KNOB_GROUP or name in ("parts_per_batch", "interleave"):
            call = expr
            if isinstance(expr, ast.Call) and getattr(expr.func, "id", "") == "field":  # field(default_factory=...)
                call = expr.keywords[0].value
            assert isinstance(call, ast.Call) and getattr(call.func, "id", "") in ("default_of", "factory_of"), name
    init = ast.parse(textwrap.dedent(inspect.getsource(oa.OutreLoader.__init__))).body[0]
    args = init.args  # type: ignore[attr-defined]
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is None:
            continue
        literal_ok = isinstance(default, ast.Constant) and default.value in (None, False) and arg.arg not in _config.FIRST_ROW
        read_from_config = (isinstance(default, ast.Subscript) and getattr(default.value, "id", "") == "_FIRST_ROW")
        assert literal_ok or read_from_config, f"{arg.arg}'s default is written in OutreLoader's signature"
    params = _keywords()
    for f in fields(LoaderConfig):
        if f.name in params and f.default is not MISSING:
            assert params[f.name].default == f.default, f.name
        for group, cls in GROUPS.items():
            if f.name in {g.name for g in fields(cls)} and f.default is not MISSING:
                assert getattr(cls(), f.name) == f.default, (group, f.name)


def test_keywords_are_passed_by_name_never_gathered_from_locals() -> None:
    for module in (_loader, _setup):
        tree = ast.parse(inspect.getsource(module))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "locals"]
        assert calls == [], module.__name__


@pytest.mark.parametrize("name", sorted(KNOB_GROUP))
def test_a_knob_passed_flat_names_its_new_home(dataset: oa.Dataset, name: str) -> None:
    group = KNOB_GROUP[name]
    home = "partitions=oa.PartitionOptions" if group == "partitions" else f"{group}=oa."
    with pytest.raises(oa.ConfigError, match=rf"^{name}= is an option of {group}=: pass {home}.*[(, ]{name}=1\)$") as err:
        oa.OutreLoader(dataset, fanouts=[2], batch_size=8, **{name: 1})
    assert "\n" not in str(err.value)


def test_config_object_and_wrong_option_types_are_named_errors(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="config= is gone"):
        oa.OutreLoader(dataset, fanouts=[2], batch_size=8, config=LoaderConfig(fanouts=[2], batch_size=8))
    with pytest.raises(oa.ConfigError, match=r"io= takes an oa.IOOptions\(...\), got CacheOptions"):
        oa.OutreLoader(dataset, fanouts=[2], batch_size=8, io=oa.CacheOptions())  # type: ignore[arg-type]
    with pytest.raises(oa.ConfigError, match="partitions= takes the name of a partition folder"):
        oa.OutreLoader(dataset, fanouts=[2], batch_size=8, partitions=3)  # type: ignore[arg-type]
    with pytest.raises(oa.ConfigError, match="num_samplers=0 must be an int >= 1"):
        oa.OutreLoader(dataset, fanouts=[2], batch_size=8, pipeline=oa.PipelineOptions(num_samplers=0))


def test_options_objects_resolve_to_the_same_config_as_flat_knobs(dataset: oa.Dataset) -> None:
    with oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, seed=5, ordered=True,
                        io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(buffer_rows=100, foresight=0),
                        pipeline=oa.PipelineOptions(num_samplers=1, num_extractors=1, ready_queue=3),
                        ranks=oa.RankOptions(rank=0, world_size=1)) as loader:
        expected = LoaderConfig(fanouts=[3, 2], batch_size=16, seed=5, ordered=True, backend="memory", buffer_rows=100,
                                foresight=0, num_samplers=1, num_extractors=1, ready_queue=3, rank=0, world_size=1)
        assert loader._setup.config == expected  # as validated (the loader then holds the planned queue depth)
        n_ids = [b.n_id for b in loader]
    with oa.OutreLoader(dataset, **group_knobs(dict(fanouts=[3, 2], batch_size=16, seed=5, ordered=True,
                                                    backend="memory", num_samplers=1))) as again:
        assert [b.n_id.tolist() for b in again] == [n.tolist() for n in n_ids]


def test_partition_options_flatten_to_the_config_knobs() -> None:
    assert partition_knobs("fennel-8") == {"partitions": "fennel-8"}
    assert partition_knobs(PartitionOptions(name="fennel-8", parts_per_batch=2)) == {"partitions": "fennel-8",
                                                                                      "parts_per_batch": 2}
    assert group_knobs({"partitions": "p", "interleave": 3, "backend": "pread"}) == {
        "partitions": PartitionOptions(name="p", interleave=3), "io": oa.IOOptions(backend="pread")}
    with pytest.raises(oa.ConfigError, match="need partitions="):
        group_knobs({"parts_per_batch": 2})
