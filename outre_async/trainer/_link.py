"""``outre train --task link``: an encoder and a decoder trained on edge batches, ranked each epoch.

The encoder is one of the node task's models (``--model sage|gcn|gat``) whose output rows, ``--hidden``
wide, are the node embeddings; the decoder scores a pair of them: ``dot`` (``(h_u * h_v).sum()``, no
weights) or ``mlp`` (a two-layer MLP on ``h_u * h_v``, as PyG's link examples).  A step is the binary
cross-entropy of the scores of an edge batch (``OutreLoader(edge_label_index="train",
neg_sampling=binary)``: positives labelled 1, uniform negatives 0); its "accuracy" is the share of
pairs the score's sign gets right.  Evaluation is :func:`~outre_async.evaluate_links` on ``val`` and
``test`` with one layer-wise inference for both: MRR, hits@10 and AUC against ``--candidates`` each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._train import EpochResult, EpochTotals, train_epoch
from ..layerwise import inference
from ..links import dot, evaluate_links
from ..store._dataset import Dataset

LINK_METRICS = ("mrr", "hits@10", "auc")


class MLPDecoder(nn.Module):
    """``mlp``: Linear, ReLU, Linear on the product of the two embeddings (symmetric in u and v)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lins = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.lins(h_src * h_dst).squeeze(-1)


class DotDecoder(nn.Module):
    """``dot``: the dot product (no weights)."""

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return dot(h_src, h_dst)


class LinkModel(nn.Module):
    """``encoder`` (node embeddings) and ``decoder`` (pair scores), saved as one state dict."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_label_index: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x, edge_index)
        return self.decoder(h[edge_label_index[0]], h[edge_label_index[1]])


def make_decoder(name: str, hidden: int) -> nn.Module:
    return MLPDecoder(hidden) if name == "mlp" else DotDecoder()


def link_objective(model: nn.Module, batch: Any) -> tuple[torch.Tensor, int, int]:
    """BCE on the batch's ``edge_label`` (positives 1, negatives 0); "correct": the score's sign agrees."""
    score = model(batch.x, batch.edge_index, batch.edge_label_index)
    label = batch.edge_label.float()
    loss = F.binary_cross_entropy_with_logits(score, label)
    return loss, int(((score > 0).float() == label).sum()), len(label)


def train_link_epoch(model: nn.Module, batches: Iterable, optimizer: torch.optim.Optimizer, *, epoch: int | None = None,
                     totals: EpochTotals | None = None, every_step: bool = False,
                     after_batch: Callable[[EpochTotals], None] | None = None) -> EpochResult:
    """One pass over edge batches: :func:`~outre_async._train.train_epoch` with :func:`link_objective`
    (an edge batch always has pairs, so every batch takes its step)."""
    return train_epoch(model, batches, optimizer, every_step=every_step, epoch=epoch, totals=totals,
                       after_batch=after_batch, objective=link_objective)


@torch.no_grad()
def evaluate_link_model(model: LinkModel, ds: Dataset, *, candidates: int, seed: int, backend: str,
                        device: torch.device, budget: int | None, progress: bool) -> dict[str, Any]:
    """``val_mrr``, ``val_hits@10``, ``val_auc`` and the same for ``test`` (None for a split the
    dataset lacks), from one layer-wise inference of the encoder."""
    model.eval()
    h = inference(model.encoder, ds, backend=backend, device=device, progress=progress,  # type: ignore[arg-type]
                  memory_budget=budget)
    out: dict[str, Any] = {}
    for split in ("val", "test"):
        have = split in ds.edge_split_names
        got = evaluate_links(h, ds, split=split, candidates=candidates, metrics=LINK_METRICS, decoder=model.decoder,
                             seed=seed, device=device) if have else {}
        out.update({f"{split}_{m}": got.get(m) for m in LINK_METRICS})
    return out
