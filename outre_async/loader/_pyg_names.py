"""What a PyG user types, mapped onto the loader's knobs: one place for the ``NeighborLoader`` names.

A ``NeighborLoader(data, num_neighbors=..., batch_size=..., input_nodes=..., num_workers=...,
pin_memory=..., transform=...)`` call becomes an :class:`OutreLoader` call by changing the class
name.  The names that mean the same thing are aliases (``num_neighbors`` → ``fanouts``,
``input_nodes`` → ``split``, ``num_workers >= 1`` → ``num_samplers``), and giving both names of
one knob is a :class:`ConfigError`; what has no counterpart is refused with an error that names the
equivalent, never a bare ``TypeError``.  ``transform`` is applied to each batch (as PyG's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from .._errors import ConfigError
from ._config import LoaderConfig, check_count

# the defaults of LoaderConfig's fields as the loader's signature shows them (None: required or a factory)
CONFIG_DEFAULTS: dict[str, Any] = {f.name: None if f.default is MISSING else f.default for f in fields(LoaderConfig)}


def given_options(values: dict[str, Any]) -> dict[str, Any]:
    """The LoaderConfig knobs among the loader's keywords that differ from their defaults."""
    out = {}
    for name, default in CONFIG_DEFAULTS.items():
        value = values[name]
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
