"""Models that train on outre-async batches.

A batch is a PyG ``Data`` whose first ``batch_size`` nodes are the seeds; models return one row per
sampled node and the caller keeps ``out[:batch.batch_size]``.

The history hook (``OutreLoader(..., history=HistoryConfig(...))``): a model takes ``history=`` (the
batch's ``batch.history``, None without the cache) and calls ``h = history.exchange(h)`` on h^(L-1),
the input of its last layer, before that input's dropout: the fresh rows are pushed (detached) and the
rows of the pruned frontier nodes are replaced by their history.  Before dropout, because a pushed row
is reused for up to ``staleness`` steps: pushed after dropout, every use would replay one frozen mask
(half its units zero, the rest doubled) instead of the exact h^(L-1) that evaluation computes.
:class:`GraphSAGE` and :class:`GCN` do it out of the box.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from ._errors import ConfigError

__all__ = ["GAT", "GCN", "GraphSAGE", "MLP"]


class _Stack(nn.Module):
    """``num_layers`` PyG convolutions with ReLU and dropout between them, and the history hook."""

    def __init__(self, convs: list[nn.Module], dropout: float) -> None:
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor, history=None) -> Tensor:  # type: ignore[no-untyped-def]
        last = len(self.convs) - 1
        edge_index, weight = self._edges(x, edge_index, history)
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index) if weight is None else conv(x, edge_index, weight)
            if i < last:
                x = F.relu(x)
                if i == last - 1 and history is not None:
                    # Before dropout: the cache holds h^(L-1) as evaluation computes it, and a pulled
                    # row gets a fresh dropout mask each use instead of replaying its push's mask.
                    x = history.exchange(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x

    def _edges(self, x: Tensor, edge_index: Tensor, history) -> tuple[Tensor, Tensor | None]:  # type: ignore[no-untyped-def]
        return edge_index, None

    def layer(self, i: int, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """Layer ``i`` alone (its activation included, not the last layer's): what layer-wise
        inference (:func:`outre_async.inference`) applies to every node, one layer at a time."""
        conv = self.convs[i]
        x = conv(x, edge_index) if edge_weight is None else conv(x, edge_index, edge_weight)
        if i < len(self.convs) - 1:
            x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x

    def hidden(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """h^(L-1) before the last dropout: what the history caches (the last layer's input in eval mode)."""
        for i, conv in enumerate(self.convs[:-1]):
            x = F.relu(conv(x, edge_index))
            if i < len(self.convs) - 2:
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x


def _dims(name: str, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int) -> list[int]:
    if num_layers < 1 or in_dim < 1 or hidden_dim < 1 or out_dim < 1:
        raise ConfigError(f"{name} sizes must be >= 1: {in_dim=} {hidden_dim=} {out_dim=} {num_layers=}")
    return [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]


class GraphSAGE(_Stack):
    """Mean-aggregator GraphSAGE (Hamilton et al. 2017): ``num_layers`` SAGEConv, ReLU and dropout."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, *, num_layers: int = 2, dropout: float = 0.5):
        dims = _dims("GraphSAGE", in_dim, hidden_dim, out_dim, num_layers)
        super().__init__([SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True)], dropout)


class GCN(_Stack):
    """GCN (Kipf & Welling 2017) on sampled subgraphs: ``num_layers`` GCNConv (self-loops, symmetric
    normalisation over the sampled edges), ReLU and dropout."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, *, num_layers: int = 2, dropout: float = 0.5):
        dims = _dims("GCN", in_dim, hidden_dim, out_dim, num_layers)
        super().__init__([GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True)], dropout)

    def _edges(self, x: Tensor, edge_index: Tensor, history) -> tuple[Tensor, Tensor | None]:  # type: ignore[no-untyped-def]
        """A pulled node has no in-edges in its batch, so GCN's ``1/sqrt(deg)`` would weigh its messages
        as if it had none; its self-loop carries the degree it would have had instead (PyG keeps an
        existing self-loop's weight), so every other node sees the unpruned batch's normalisation."""
        pulled = None if history is None else history.pull_index
        if pulled is None or not len(pulled):
            return edge_index, None
        weight = torch.cat([torch.ones(edge_index.size(1), dtype=x.dtype, device=x.device),
                            history.pull_degree.to(x.dtype) + 1])
        return torch.cat([edge_index, torch.stack([pulled, pulled])], dim=1), weight


class GAT(_Stack):
    """GAT (Veličković et al. 2018) on PyG's ``GATConv``: hidden layers of ``heads`` heads whose
    outputs are concatenated (``hidden_dim`` columns in all, so ``hidden_dim % heads == 0``), a last
    layer of one head; ReLU and dropout between layers, the history hook on h^(L-1) like the others.
    Attention is a softmax over each node's in-edges, so a batch or an inference chunk that holds all
    of a node's in-edges computes exactly what the full graph does."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, *, num_layers: int = 2, heads: int = 4,
                 dropout: float = 0.5):
        dims = _dims("GAT", in_dim, hidden_dim, out_dim, num_layers)
        if heads < 1 or hidden_dim % heads:
            raise ConfigError(f"GAT needs hidden_dim divisible by heads: {hidden_dim=} {heads=}")
        convs: list[nn.Module] = [GATConv(a, b // heads, heads=heads) for a, b in zip(dims[:-2], dims[1:-1], strict=True)]
        convs.append(GATConv(dims[-2], dims[-1], heads=1))
        super().__init__(convs, dropout)


class MLP(nn.Module):
    """The graph-blind baseline: same depth, node features only (``edge_index`` is ignored)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, *, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
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
