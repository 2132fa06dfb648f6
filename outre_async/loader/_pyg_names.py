"""What a PyG user types, mapped onto the loader's knobs: one place for the ``NeighborLoader`` names.

A ``NeighborLoader(data, num_neighbors=..., batch_size=..., input_nodes=..., num_workers=...,
pin_memory=..., transform=...)`` call becomes an :class:`OutreLoader` call by changing the class
name.  The names that mean the same thing are aliases (``num_neighbors`` → ``fanouts``,
``input_nodes`` → ``split``, ``num_workers >= 1`` → ``num_samplers``, ``in_order`` → ``ordered``),
and giving both names of one knob is a :class:`ConfigError`; what has no counterpart is refused with
an error that names the equivalent, never a bare ``TypeError``.  ``transform`` is applied to each
batch (as PyG's).

The other ``NeighborLoader`` / ``NodeLoader`` / ``DataLoader`` keywords arrive in the loader's
``**pyg_options`` and are looked up in :data:`NO_COUNTERPART`: a value that means what the loader
does anyway is accepted (``persistent_workers=True``: its threads live as long as it does;
``replace=False``, ``disjoint=False``, ``subgraph_type="directional"``, ``directed=True``: its
sampler's semantics; ``filter_per_worker=True``: features are gathered off the consuming thread;
``is_sorted``: the store's edges are sorted when written), any other value is a :class:`ConfigError`
saying what the loader does instead.  A name that is not PyG's stays Python's ``TypeError``, with the
nearest keyword suggested.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable
from dataclasses import MISSING, fields
from typing import Any

from ..errors import ConfigError, NotSupportedError
from ._config import LoaderConfig, check_count
from ._options import KNOB_GROUP, moved_message

# the defaults of LoaderConfig's fields (None: required or a factory)
CONFIG_DEFAULTS: dict[str, Any] = {f.name: None if f.default is MISSING else f.default for f in fields(LoaderConfig)}
# OutreLoader's own keywords (what a misspelt name is matched against; the options objects' fields too)
LOADER_KEYWORDS = ("split", "input_nodes", "fanouts", "num_neighbors", "batch_size", "shuffle", "seed", "drop_last",
                   "ordered", "memory_budget", "device", "x_dtype", "transform", "partitions", "history", "edge_label_index",
                   "edge_label", "neg_sampling", "neg_sampling_ratio", "io", "cache", "pipeline", "ranks",
                   "num_workers", "pin_memory")


def given_options(values: dict[str, Any]) -> dict[str, Any]:
    """The LoaderConfig knobs among ``values`` (first-row keywords by name) that differ from their defaults."""
    out = {}
    for name, value in values.items():
        default = CONFIG_DEFAULTS[name]
        if value is None or value is default or (isinstance(value, dict) and not value):
            continue
        if _plain(value) and _plain(default) and value == default:
            continue
        out[name] = value
    return out


def _plain(value: object) -> bool:
    return isinstance(value, bool | int | float | str)


def resolve_aliases(options: dict[str, Any], *, split: Any, input_nodes: Any, num_neighbors: Any,
                    num_workers: Any, pin_memory: Any) -> tuple[Any, dict[str, Any]]:
    """``(split, options)`` with PyG's names folded in; a knob named twice is a ConfigError."""
    options = dict(options)
    if num_neighbors is not None:
        if isinstance(num_neighbors, dict):
            raise ConfigError("num_neighbors as a dict is for heterogeneous graphs, which outre-async does not "
                              "support yet; pass one list of fanouts, e.g. num_neighbors=[10, 10]")
        _one_of("fanouts", "num_neighbors", options)
        options["fanouts"] = num_neighbors
    if input_nodes is not None:
        if split is not None:
            raise ConfigError("pass split= or input_nodes= (PyG's name for it), not both")
        if isinstance(input_nodes, tuple):
            raise ConfigError("input_nodes=(node_type, ids) is for heterogeneous graphs, which outre-async does "
                              "not support yet; pass the node ids, a boolean mask or a split name")
        split = input_nodes
    if num_workers is not None and not (isinstance(num_workers, int) and not isinstance(num_workers, bool)
                                        and num_workers == 0):
        # PyG's 0 means "sample in the main process"; the loader always samples in its own threads
        _one_of("num_samplers", "num_workers", options)
        options["num_samplers"] = check_count("num_workers", num_workers, " (PyG's name for num_samplers)")
    _check_pin_memory(pin_memory, options.get("device", "cpu"))
    return ("train" if split is None else split), options


def _one_of(ours: str, theirs: str, options: dict[str, Any]) -> None:
    if ours in options:
        raise ConfigError(f"pass {ours}= or {theirs}= (PyG's name for it), not both")


def _check_pin_memory(pin_memory: Any, device: str) -> None:
    if not isinstance(pin_memory, bool):
        raise ConfigError(f"pin_memory={pin_memory!r} must be True or False")
    if pin_memory and not (str(device).startswith("cuda") or (device == "auto" and _cuda_present())):
        raise ConfigError("pin_memory=True only helps a later copy to a GPU: pass device='cuda' and the loader "
                          "copies each batch there from page-locked memory for you (pin_memory is then implied)")


def _cuda_present() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def check_transform(transform: Any) -> Callable[[Any], Any] | None:
    if transform is not None and not callable(transform):
        raise ConfigError(f"transform must be a callable taking and returning a batch, got {type(transform).__name__}")
    return transform


def _is(*values: Any) -> Callable[[Any], bool]:
    """The values (compared by type and value: ``True`` is not ``1``) that mean what the loader does."""
    return lambda value: any(type(value) is type(v) and value == v for v in values)


def _any_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _directional(value: Any) -> bool:  # a str or PyG's SubgraphType enum
    return getattr(value, "value", value) == "directional"


_THREADS = "samplers and extractors are threads of this process, not worker processes"
_PLAN = ("the epoch plan orders the seeds: input_nodes= says which, shuffle= and seed= their order, "
         "partitions= groups them")
_TEMPORAL = "temporal sampling is not offered; leave it out"
_LINK_TIME = "temporal link sampling is not offered; leave edge_label_time out (edge_label_index= works without it)"

# name -> (the values that mean what the loader does, what it does instead)
NO_COUNTERPART: dict[str, tuple[Callable[[Any], bool], str]] = {
    # NeighborLoader / NodeLoader
    "data": (_is(), "OutreLoader reads an on-disk dataset: pass its path or an oa.Dataset first (a PyG Data "
                    "object is converted once with oa.from_pyg)"),
    "replace": (_is(False), "the sampler draws each node's neighbours without replacement (replace=False); a "
                            "fanout at or above a degree takes every in-neighbour once"),
    "subgraph_type": (_directional, "a batch holds the sampled edges, each from the sampled neighbour to the node "
                                    "that drew it (subgraph_type='directional'); 'bidirectional' and 'induced' "
                                    "are not offered"),
    "directed": (_is(True), "a batch holds the sampled edges only (directed=True, PyG's "
                            "subgraph_type='directional'); induced subgraphs are not offered"),
    "disjoint": (_is(False), "the seeds of a batch share their sampled nodes (disjoint=False); per-seed "
                             "subgraphs are not offered"),
    "input_time": (_is(None), _TEMPORAL),
    "temporal_strategy": (_is("uniform"), _TEMPORAL),
    "time_attr": (_is(None), _TEMPORAL),
    "weight_attr": (_is(None), "neighbours are drawn uniformly; weighted sampling is not offered"),
    "transform_sampler_output": (_is(None), "the loader turns its own sampler's output into batches; change "
                                            "each batch with transform="),
    "is_sorted": (_any_bool, "the store's edges are sorted by destination (CSC) when the dataset is written, so "
                             "there is no sort to skip: pass True or False, or leave it out"),
    "filter_per_worker": (_is(None, True), "features are always gathered off your thread, by the loader's "
                                           "extractor threads (filter_per_worker=True); "
                                           "pipeline=oa.PipelineOptions(num_extractors=N) sets how many"),
    "neighbor_sampler": (_is(None), "the loader samples with its own sampler (fanouts=, seed=); to drive PyG's "
                                    "NodeLoader with it instead, use outre_async.pyg.OutreNodeSampler"),
    "custom_cls": (_is(None), "batches are OutreBatch (a PyG Data with NeighborLoader's fields); change each "
                              "batch with transform="),
    "node_sampler": (_is(), "the loader samples with its own sampler (fanouts=, seed=); to drive PyG's NodeLoader "
                            "with it instead, pass outre_async.pyg.OutreNodeSampler to NodeLoader"),
    "input_id": (_is(None), "batch.input_id is each seed's position in input_nodes, as PyG's default"),
    # LinkNeighborLoader / LinkLoader
    # (edge_label_index, edge_label, neg_sampling, neg_sampling_ratio are the loader's own keywords: _link_input)
    "edge_label_time": (_is(None), _LINK_TIME),
    "link_sampler": (_is(), "the loader samples edge batches with its own sampler (edge_label_index=, neg_sampling=, "
                            "fanouts=, seed=)"),
    # torch.utils.data.DataLoader
    "sampler": (_is(None), _PLAN),
    "batch_sampler": (_is(None), _PLAN),
    "collate_fn": (_is(None), "the loader builds each batch itself; change each batch with transform="),
    "timeout": (_is(0, 0.0), "a stage that fails closes the pipeline and its error reaches your loop at once "
                             "(there is no worker to wait for); timeout=0 is what it does"),
    "worker_init_fn": (_is(None), f"{_THREADS}: there is nothing to initialise; seed= seeds the sampling"),
    "multiprocessing_context": (_is(None), f"{_THREADS}: there is no process to start"),
    "generator": (_is(None), "shuffling and sampling draw from seed= (an int), not a torch.Generator: pass seed="),
    "prefetch_factor": (_is(None), "how far the loader runs ahead is its queues' depth: "
                                   "pipeline=oa.PipelineOptions(ready_queue=N) (batches ready for your loop) and "
                                   "extract_queue=N (sampled batches waiting for features)"),
    "persistent_workers": (_is(True), "samplers and extractors are threads of this process that live as long as "
                                      "the loader (persistent_workers=True); close the loader (a with block or "
                                      "close()) to stop them"),
    "pin_memory_device": (_is(""), "pass device='cuda:N': the loader pins each batch and copies it there"),
}


def check_dataset_argument(dataset: object) -> None:
    """The loader's first argument is an on-disk dataset (a path or an ``oa.Dataset``); a PyG graph in
    memory gets the one-line way to convert it, not ``TypeError: expected str, bytes or os.PathLike``."""
    if isinstance(dataset, str | os.PathLike):
        return
    if hasattr(dataset, "node_types") and hasattr(dataset, "edge_types"):
        raise NotSupportedError("OutreLoader got a HeteroData: heterogeneous graphs are not supported yet; "
                                "convert one homogeneous Data with oa.from_pyg(data, 'path/to/dataset')")
    if hasattr(dataset, "edge_index") or type(dataset).__name__ == "Data":
        raise ConfigError("OutreLoader reads a dataset on disk, not a PyG Data in memory: convert it once with "
                          "oa.from_pyg(data, 'path/to/dataset'), then OutreLoader('path/to/dataset', ...)")
    raise ConfigError(f"OutreLoader's first argument is a dataset folder (a path) or an oa.Dataset, got "
                      f"{type(dataset).__name__}; make one with `outre convert` or oa.from_pyg")


def resolve_pyg_options(options: dict[str, Any], pyg_options: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """``options`` with ``in_order`` folded in as ``ordered``, after refusing every other PyG keyword whose
    value has no counterpart (see the module); a name PyG does not have is a ``TypeError``."""
    options = dict(options)
    for name, value in pyg_options.items():
        moved = moved_message(name, value)
        if moved is not None:
            raise ConfigError(moved)
        if name == "config":
            raise ConfigError("config= is gone: pass OutreLoader's keywords (fanouts=, batch_size=, ...) and the "
                              "options objects io=, cache=, pipeline=, ranks= (oa.IOOptions, ...)")
        if name == "in_order":
            if not isinstance(value, bool):
                raise ConfigError(f"in_order={value!r} must be True or False (PyG's name for ordered=)")
            _one_of("ordered", "in_order", options)
            options["ordered"] = value
            continue
        entry = NO_COUNTERPART.get(name)
        if entry is None:
            near = difflib.get_close_matches(name, [*known, *NO_COUNTERPART, "in_order", *KNOB_GROUP], n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise TypeError(f"OutreLoader() got an unexpected keyword argument {name!r}{hint}")
        accepts, instead = entry
        if not accepts(value):
            shown = f"<{type(value).__name__} of shape {list(value.shape)}>" if hasattr(value, "shape") else repr(value)
            raise ConfigError(f"{name}={shown} has no counterpart in OutreLoader: {instead}")
    return options
