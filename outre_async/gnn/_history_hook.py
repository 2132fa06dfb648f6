"""``with_history(model)``: PyG's own ``BasicGNN`` models take ``history=batch.history`` unchanged.

The history (``OutreLoader(..., history=HistoryConfig(...))``) needs ``h = history.exchange(h)`` on
h^(L-1), the last conv's input, *before* that input's dropout (:mod:`outre_async.nn` says why).
``BasicGNN.forward`` computes h^(L-1) in the body of its layer loop, so instead of copying that
loop (and drifting from PyG's norms, ``act_first``, ``jk`` and ``trim_to_layer`` as they change),
three hooks on the model as it is run PyG's own ``forward`` and step in at one point:

* a forward pre-hook on the model takes ``history=`` out of the call's keywords (``forward`` never
  sees it; every other argument passes through) and starts the call's count of dropouts;
* a forward pre-hook on ``model.dropout`` (the one ``nn.Dropout`` that ``forward`` applies after
  each hidden layer, in order) exchanges the input of dropout number ``L-1``: layer ``L-2``'s output
  after its norm and activation, which is h^(L-1) before its dropout;
* a forward hook on the model checks that ``forward`` called the dropout as often as
  ``BasicGNN.forward`` does (``L-1``, or ``L`` with ``jk``), so a subclass that changed ``forward``
  is a named :class:`HistoryError`, not a silent exchange at the wrong layer.

Without ``history`` (or ``history=None``) nothing is changed: the output is PyG's, bit for bit.
``jk`` is accepted in every mode: it combines a node's own layer outputs after the last conv, and
h^(L-1) stays the last conv's input.  ``num_sampled_nodes_per_hop`` (``trim_to_layer``) works: the
exchange sees layer ``L-2``'s trimmed rows (hops 0..2), and every pulled or pushed row is in hops 0..1.

GCN: a pulled node has no in-edges in its batch, so ``GCNConv``'s ``1/sqrt(deg)`` would weigh its
messages as if it had none.  Its self loop carries the degree it would have had instead (PyG keeps
an existing self loop's weight), so every other node sees the unpruned batch's normalisation; with
``trim_to_layer`` the loops go where an in-edge of a hop-1 node goes (the second hop's block of
edges, whose count grows by as many), so trimming drops them exactly where it drops those in-edges.

State is per call and per model: run one forward of a model at a time (the loader's batches are).
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

import torch
from torch import Tensor, nn
from torch_geometric.nn import GCNConv

from ..errors import ConfigError, HistoryError
from ._basic_gnn import is_basic_gnn, qualname

__all__ = ["attach", "with_history"]

M = TypeVar("M", bound=nn.Module)


def with_history(model: M) -> M:
    """Make a PyG ``BasicGNN`` (``torch_geometric.nn.GraphSAGE``, ``GCN``, ``GAT``, ``GIN``, ``PNA``,
    ``EdgeCNN``...) take ``history=batch.history``; returns the same model (its class, parameters and
    ``state_dict`` unchanged), so ``model = oa.with_history(model)`` is the one line to add.  Calling
    it again is harmless; ``oa.GraphSAGE``, ``oa.GCN`` and ``oa.GAT`` have it already."""
    if isinstance(getattr(model, "_outre_history", None), HistoryHook):
        return model
    if not is_basic_gnn(model):
        raise ConfigError(f"{qualname(model)} is not one of PyG's BasicGNN models (torch_geometric.nn.GraphSAGE, GCN, "
                          "GAT, GIN, PNA, EdgeCNN), whose forward with_history hooks; a model of your own takes "
                          "history= and calls h = history.exchange(h) on the last layer's input, before its dropout")
    if len(model.convs) < 2:  # type: ignore[union-attr, arg-type]
        raise _one_layer(model)
    return attach(model)


def attach(model: M) -> M:
    """The hooks on a ``BasicGNN`` of any depth (``oa.GraphSAGE`` and friends: a one-layer model is
    refused when a call passes a history)."""
    if not isinstance(getattr(model, "dropout", None), nn.Module):
        raise ConfigError(f"{qualname(model)}.dropout is not a module; with_history needs the nn.Dropout that "
                          "torch_geometric >= 2.5's BasicGNN.forward applies after each hidden layer")
    if _loop_degree_fill(model) and not model.supports_edge_weight:  # type: ignore[union-attr]
        raise ConfigError(f"{qualname(model)} has normalising GCNConv layers but does not pass edge_weight to them; "
                          "the history gives a pulled node its degree through an edge weight: set "
                          "supports_edge_weight = True, as torch_geometric.nn.GCN does")
    hook = HistoryHook()
    model._outre_history = hook  # type: ignore[assignment]  # a plain attribute: no state_dict entry
    model.register_forward_pre_hook(hook.enter, with_kwargs=True)
    model.dropout.register_forward_pre_hook(hook.exchange)  # type: ignore[union-attr]
    model.register_forward_hook(hook.leave)
    return model


class HistoryHook:
    """One model's hooks and the state of the call in flight (no reference to the model itself, so
    that ``copy.deepcopy`` of a hooked model gives a copy hooked to itself)."""

    def __init__(self) -> None:
        self.history: Any = None
        self.calls = 0
        self.layers = 0

    def enter(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        history = kwargs.pop("history", None)
        if history is not None and len(model.convs) < 2:  # type: ignore[arg-type]
            raise _one_layer(model)
        self.history, self.calls, self.layers = history, 0, len(model.convs)  # type: ignore[arg-type]
        fill = _loop_degree_fill(model)
        if history is not None and fill and len(history.pull_index):
            return _with_pulled_loops(model, args, kwargs, history, fill)
        return args, kwargs

    def exchange(self, dropout: nn.Module, args: tuple[Any, ...]) -> tuple[Tensor] | None:
        self.calls += 1
        if self.history is None or self.calls != self.layers - 1:
            return None
        return (self.history.exchange(args[0]),)  # h^(L-1): layer L-2's output, before its dropout

    def leave(self, model: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        history, calls, self.history = self.history, self.calls, None
        want = self.layers - 1 + (getattr(model, "jk_mode", None) is not None)
        if history is not None and calls != want:
            raise HistoryError(f"{qualname(model)}.forward applied its dropout {calls} times where BasicGNN's forward "
                               f"applies it {want} times ({self.layers} layers); with_history exchanges h^(L-1) at "
                               "dropout L-1, so a forward of your own calls h = history.exchange(h) itself")


def _one_layer(model: nn.Module) -> ConfigError:
    return ConfigError(f"{qualname(model)} has num_layers={len(model.convs)}; the history caches h^(L-1), a hidden "  # type: ignore[arg-type]
                       "layer's output: use num_layers >= 2")


def _loop_degree_fill(model: nn.Module) -> float:
    """The self-loop fill value of the model's normalising GCNConv layers (0: none)."""
    for conv in getattr(model, "convs", []):
        if isinstance(conv, GCNConv) and conv.normalize and conv.add_self_loops:
            return 2.0 if conv.improved else 1.0
    return 0.0


def _with_pulled_loops(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], history: Any,
                       fill: float) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with one self loop per pulled node, weighted with its would-be degree."""
    bound = inspect.signature(model.forward).bind(*args, **kwargs)
    a = bound.arguments
    x, edge_index = a["x"], a["edge_index"]
    if not isinstance(edge_index, Tensor):
        raise ConfigError(f"{qualname(model)} with history needs edge_index as a [2, E] tensor, got "
                          f"{type(edge_index).__name__} (GCN's pulled nodes get their degree as weighted self loops)")
    pulled = history.pull_index.to(edge_index.device)
    loops = torch.stack([pulled, pulled])
    loop_weight = history.pull_degree.to(x.device, x.dtype) + fill
    weight = a.get("edge_weight")
    if weight is None:
        weight = torch.ones(edge_index.size(1), dtype=x.dtype, device=x.device)
    hops = a.get("num_sampled_edges_per_hop")
    if hops is None or a.get("num_sampled_nodes_per_hop") is None:
        at = edge_index.size(1)
    else:
        counts = [int(c) for c in hops]
        if len(counts) < 2:
            raise ConfigError(f"num_sampled_edges_per_hop={counts} has fewer than 2 hops for a {len(model.convs)}-layer "  # type: ignore[arg-type]
                              "model with history; pass the sampler's counts, one per layer")
        at = counts[0]
        counts[1] += len(pulled)
        a["num_sampled_edges_per_hop"] = counts
    a["edge_index"] = torch.cat([edge_index[:, :at], loops, edge_index[:, at:]], dim=1)
    a["edge_weight"] = torch.cat([weight[:at], loop_weight, weight[at:]])
    return bound.args, bound.kwargs
