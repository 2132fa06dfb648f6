"""Models that train on outre-async batches.

A batch is a PyG ``Data`` whose first ``batch_size`` nodes are the seeds; models return one row per
sampled node and the caller keeps ``out[:batch.batch_size]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from ._errors import ConfigError

__all__ = ["GraphSAGE", "MLP"]


class GraphSAGE(nn.Module):
    """Mean-aggregator GraphSAGE (Hamilton et al. 2017): ``num_layers`` SAGEConv, ReLU and dropout."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, *, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        if num_layers < 1 or in_dim < 1 or hidden_dim < 1 or out_dim < 1:
            raise ConfigError(f"GraphSAGE sizes must be >= 1: {in_dim=} {hidden_dim=} {out_dim=} {num_layers=}")
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


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
    """Run ``model`` on a batch and keep the seed rows."""
    out = model(batch.x, batch.edge_index)
    return out[: batch.batch_size]


def seed_targets(batch) -> Tensor:  # type: ignore[no-untyped-def]
    return torch.as_tensor(batch.y[: batch.batch_size], dtype=torch.long)
