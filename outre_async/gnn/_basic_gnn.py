"""PyG's ``BasicGNN`` family (``torch_geometric.nn.GraphSAGE``, ``GCN``, ``GAT``, ``GIN``, ``PNA``,
``EdgeCNN`` and subclasses that keep its ``forward``) as the layers the rest of outre-async needs.

``BasicGNN.forward`` runs, for layer ``i`` of ``L``: the conv (with ``edge_weight`` / ``edge_attr``
as the class declares it takes them), then, except after the last conv when ``jk`` is None:
activation (``act_first``), ``norms[i]``, activation (otherwise), ``dropout``; then ``jk`` and
``lin`` when the model has them.  :func:`layer` is that loop's body for one ``i``, so that layer-wise
inference (:func:`outre_async.inference`) and :meth:`outre_async.GraphSAGE.layer` apply exactly what
the model's own forward does, one layer at a time (PyG's own ``inference_per_layer`` is the same
body minus the edge weights, which GCN's full-graph normalisation needs).

Layer by layer is exact only when every node's output reads its own in-edges and nothing else:
``jk`` modes that combine all layers (``"cat"``, ``"max"``, ``"lstm"``) would need every layer's
output at once, and a norm that pools over the nodes it is given (``LayerNorm(mode="graph")``,
``GraphNorm``, ``InstanceNorm``, ``PairNorm``, a ``BatchNorm`` without running statistics) would
compute one chunk's statistics instead of the graph's; :func:`check_layerwise` refuses both by name.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torch_geometric.nn import GCNConv
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.nn.norm import BatchNorm as PygBatchNorm
from torch_geometric.nn.norm import LayerNorm as PygLayerNorm

from ..errors import ConfigError

__all__ = ["BasicGNN", "check_layerwise", "conv_call", "hidden", "is_basic_gnn", "layer", "qualname"]

_WHOLE_GRAPH_JK = ("cat", "max", "lstm")


def qualname(obj: object) -> str:
    """``module.Class`` of ``obj``, as errors name a model (two libraries both have a ``GraphSAGE``)."""
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def is_basic_gnn(model: object) -> bool:
    return isinstance(model, BasicGNN)


def conv_call(model: Any, conv: nn.Module, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None,
              edge_attr: Tensor | None = None) -> Tensor:
    """``conv`` called as ``BasicGNN.forward`` calls it: with the edge inputs its class declares."""
    if model.supports_edge_weight and model.supports_edge_attr:
        return conv(x, edge_index, edge_weight=edge_weight, edge_attr=edge_attr)
    if model.supports_edge_weight:
        return conv(x, edge_index, edge_weight=edge_weight)
    if model.supports_edge_attr:
        return conv(x, edge_index, edge_attr=edge_attr)
    return conv(x, edge_index)


def layer(model: Any, i: int, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None, *,
          dropout: bool = True) -> Tensor:
    """Layer ``i`` of a ``BasicGNN``: its conv and what ``forward`` applies after it (``dropout=False``:
    all but the dropout, which is where the history hook reads h^(L-1))."""
    last = i == len(model.convs) - 1
    x = conv_call(model, model.convs[i], x, edge_index, edge_weight)
    if not last or model.jk_mode is not None:
        if model.act is not None and model.act_first:
            x = model.act(x)
        x = model.norms[i](x)
        if model.act is not None and not model.act_first:
            x = model.act(x)
        if dropout:
            x = model.dropout(x)
    if last and hasattr(model, "lin"):
        x = model.lin(x)
    return x


def hidden(model: Any, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
    """h^(L-1), the last conv's input before its dropout: what the history caches (in eval mode, the
    last conv's input itself)."""
    last = len(model.convs) - 1
    if last < 1:
        raise ConfigError(f"{qualname(model)} has one layer: h^(L-1) is a hidden layer's output, it needs two")
    for i in range(last):
        x = layer(model, i, x, edge_index, edge_weight, dropout=i < last - 1)
    return x


def check_layerwise(model: Any) -> None:
    """Refuse, by name, a ``BasicGNN`` whose output layer by layer would differ from its forward."""
    if model.jk_mode in _WHOLE_GRAPH_JK:
        raise ConfigError(f"{qualname(model)} has jk={model.jk_mode!r}, which combines every layer's output of a node; "
                          "layer-wise inference keeps one layer at a time (PyG's BasicGNN.inference refuses it too): "
                          "use jk=None or jk='last'")
    if not model.supports_edge_weight and any(isinstance(c, GCNConv) and c.normalize for c in model.convs):
        raise ConfigError(f"{qualname(model)} has normalising GCNConv layers but does not pass edge_weight to them; "
                          "layer-wise inference gives GCNConv the full graph's normalisation as edge weights: set "
                          "supports_edge_weight = True, as torch_geometric.nn.GCN does")
    for name, module in model.named_modules():
        why = _pooling_norm(module)
        if why:
            raise ConfigError(f"{qualname(model)}.{name} is {qualname(module)}, {why}; layer-wise inference computes "
                              "chunks of nodes and would use one chunk's statistics: use a per-node norm "
                              "(batch_norm with running statistics, LayerNorm(mode='node')) or none")


def _pooling_norm(module: nn.Module) -> str:
    """Why ``module`` normalises over the nodes it is given rather than node by node ('' if it does not)."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return "" if module.track_running_stats else "a batch norm without running statistics"
    if isinstance(module, nn.modules.instancenorm._InstanceNorm):
        return "an instance norm (over the nodes)"
    if isinstance(module, PygLayerNorm):
        return "" if module.mode == "node" else f"a layer norm with mode={module.mode!r} (over the graph)"
    if isinstance(module, PygBatchNorm):
        return ""
    if type(module).__module__.startswith("torch_geometric.nn.norm"):
        return "a norm that pools over nodes"
    return ""
