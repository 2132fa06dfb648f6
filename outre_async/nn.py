"""Models that train on outre-async batches: PyG's own, and :class:`GraphSAGE`, :class:`GCN`,
:class:`GAT` (PyG's classes with the history hook built in and a dropout default of 0.5).

A batch is a PyG ``Data`` whose first ``batch_size`` nodes are the seeds; models return one row per
sampled node and the caller keeps ``out[:batch.batch_size]``.

The history hook (``OutreLoader(..., history=HistoryConfig(...))``): a model takes ``history=`` (the
batch's ``batch.history``, None without the cache) and calls ``h = history.exchange(h)`` on h^(L-1),
the input of its last layer, before that input's dropout: the fresh rows are pushed (detached) and the
rows of the pruned frontier nodes are replaced by their history.  Before dropout, because a pushed row
is reused for up to ``staleness`` steps: pushed after dropout, every use would replay one frozen mask
(half its units zero, the rest doubled) instead of the exact h^(L-1) that evaluation computes.
:func:`with_history` adds the hook to any of PyG's ``BasicGNN`` models (``model =
oa.with_history(torch_geometric.nn.GraphSAGE(...))``, see :mod:`outre_async._history_hook`);
:class:`GraphSAGE`, :class:`GCN` and :class:`GAT` have it out of the box.

Signatures are PyG's: ``GraphSAGE(in_channels, hidden_channels, num_layers, out_channels=None,
dropout=0.5, act="relu", norm=None, jk=None, ...)``; ``out_channels=None`` gives ``hidden_channels``
outputs, as PyG's does.  Two differences, both kept from the layer math the docs' accuracy figures
were measured with: ``dropout`` defaults to 0.5 (PyG: 0.0), and :class:`GAT`'s last layer has one
head and no attention dropout (PyG's averages ``heads`` heads and drops attention with ``dropout``).
With the defaults the layers are ReLU, no norm, dropout, exactly as before the change to PyG's
signature (same parameters in the same order, so the same initial weights for a seed and the same
``state_dict`` keys).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GAT as PygGAT
from torch_geometric.nn import GCN as PygGCN
from torch_geometric.nn import GATConv
from torch_geometric.nn import GraphSAGE as PygGraphSAGE

from .errors import ConfigError
from .gnn import _basic_gnn
from .gnn._history_hook import attach as attach_history
from .gnn._history_hook import with_history

__all__ = ["GAT", "GCN", "MLP", "GraphSAGE", "with_history"]

DROPOUT = 0.5  # our default (PyG's is 0.0): what the README's accuracy figures were measured with


class _Layers:
    """The layer-wise protocol (:func:`outre_async.inference`) and h^(L-1), from PyG's own loop body."""

    def layer(self, i: int, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """Layer ``i`` alone, as ``forward`` applies it (its norm, activation and dropout; the last layer's
        only with ``jk``): what layer-wise inference applies to every node, one layer at a time."""
        return _basic_gnn.layer(self, i, x, edge_index, edge_weight)

    def hidden(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """h^(L-1) before the last dropout: what the history caches (the last layer's input in eval mode)."""
        return _basic_gnn.hidden(self, x, edge_index)


def _check_sizes(model: nn.Module, in_channels: Any, hidden_channels: int, num_layers: int, out_channels: int | None) -> None:
    sizes = {"hidden_channels": hidden_channels, "num_layers": num_layers,
             "out_channels": 1 if out_channels is None else out_channels}
    if isinstance(in_channels, int) and in_channels != -1:  # -1: PyG's lazy size; a tuple: bipartite
        sizes["in_channels"] = in_channels
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ConfigError(f"{_basic_gnn.qualname(model)} sizes must be integers >= 1 (in_channels may be -1): got "
                          + " ".join(f"{k}={v!r}" for k, v in bad.items())
                          + "; the order is (in_channels, hidden_channels, num_layers, out_channels), as PyG's")


class GraphSAGE(_Layers, PygGraphSAGE):
    """Mean-aggregator GraphSAGE (Hamilton et al. 2017): ``torch_geometric.nn.GraphSAGE`` with the
    history hook and ``dropout=0.5`` by default.  Every other keyword is PyG's (``act``, ``norm``,
    ``jk``, ``aggr``, ...)."""

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, out_channels: int | None = None,
                 dropout: float = DROPOUT, **kwargs: Any) -> None:
        _check_sizes(self, in_channels, hidden_channels, num_layers, out_channels)
        super().__init__(in_channels, hidden_channels, num_layers, out_channels, dropout=dropout, **kwargs)
        attach_history(self)


class GCN(_Layers, PygGCN):
    """GCN (Kipf & Welling 2017) on sampled subgraphs: ``torch_geometric.nn.GCN`` (self-loops, symmetric
    normalisation over the sampled edges) with the history hook and ``dropout=0.5`` by default.  A
    pulled node keeps the normalisation its in-edges would give it (:mod:`outre_async._history_hook`)."""

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, out_channels: int | None = None,
                 dropout: float = DROPOUT, **kwargs: Any) -> None:
        _check_sizes(self, in_channels, hidden_channels, num_layers, out_channels)
        super().__init__(in_channels, hidden_channels, num_layers, out_channels, dropout=dropout, **kwargs)
        attach_history(self)


class GAT(_Layers, PygGAT):
    """GAT (Veličković et al. 2018) on PyG's ``GATConv``: ``torch_geometric.nn.GAT`` with hidden layers of
    ``heads`` heads whose outputs are concatenated (``hidden_channels`` columns in all, so
    ``hidden_channels % heads == 0``) and, unlike PyG's, a last layer of one head (``out_channels``
    given) and no attention dropout; the history hook and ``dropout=0.5`` by default.  Attention is a
    softmax over each node's in-edges, so a batch or an inference chunk that holds all of a node's
    in-edges computes exactly what the full graph does."""

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, out_channels: int | None = None,
                 dropout: float = DROPOUT, *, heads: int = 4, **kwargs: Any) -> None:
        _check_sizes(self, in_channels, hidden_channels, num_layers, out_channels)
        if not isinstance(heads, int) or heads < 1 or hidden_channels % heads:
            raise ConfigError(f"{_basic_gnn.qualname(self)} needs hidden_channels divisible by heads: "
                              f"{hidden_channels=} {heads=}")
        super().__init__(in_channels, hidden_channels, num_layers, out_channels, dropout=dropout, heads=heads, **kwargs)
        attach_history(self)

    def init_conv(self, in_channels: int | tuple[int, int], out_channels: int, **kwargs: Any) -> GATConv:
        heads = kwargs.pop("heads", 1)
        if getattr(self, "_is_conv_to_out", False):  # PyG sets it before building the output layer
            return GATConv(in_channels, out_channels, heads=1, **kwargs)
        return GATConv(in_channels, out_channels // heads, heads=heads, **kwargs)


class MLP(nn.Module):
    """The graph-blind baseline: same depth, node features only (``edge_index`` is ignored).  Its
    arguments are in :class:`GraphSAGE`'s order, so the two swap: ``(in_channels, hidden_channels,
    num_layers, out_channels=None, dropout=0.5)`` (``torch_geometric.nn.MLP`` takes a channel list
    first and adds batch norm by default; this one is linear, ReLU, dropout)."""

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, out_channels: int | None = None,
                 dropout: float = DROPOUT) -> None:
        super().__init__()
        _check_sizes(self, in_channels, hidden_channels, num_layers, out_channels)
        out = hidden_channels if out_channels is None else out_channels
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor | None = None) -> Tensor:
        for i, lin in enumerate(self.lins):
            x = lin(x)
            if i < len(self.lins) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


def seed_logits(model: nn.Module, batch) -> Tensor:  # type: ignore[no-untyped-def]
    """Run ``model`` on a batch and keep the seed rows (passing ``history=`` when the batch has one)."""
    history = getattr(batch, "history", None)
    out = model(batch.x, batch.edge_index) if history is None else model(batch.x, batch.edge_index, history=history)
    return out[: batch.batch_size]


def seed_targets(batch) -> Tensor:  # type: ignore[no-untyped-def]
    return torch.as_tensor(batch.y[: batch.batch_size], dtype=torch.long)
