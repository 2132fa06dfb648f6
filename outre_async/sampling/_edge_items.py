"""Edge batches (link prediction): :class:`EdgeTargets`, and :class:`EdgeItems`, the plan of an
epoch of supervision pairs with their negatives, laid out as PyG's ``edge_sample`` lays them out.

An edge batch is still a :class:`BatchItem`: its ``seeds`` are the unique (sorted, as
``torch.unique``) endpoints of its pairs and negatives, so the sampler, buffer and foresight see a
node batch and n_id starts with them; its targets say which pairs of seeds are supervised:

* no negatives: ``edge_label_index`` (the inverse index into the seeds, ``[2, B]``) and the caller's
  ``edge_label`` (or None);
* ``binary``: ``ceil(B * amount)`` random (src, dst) pairs appended, ``edge_label`` the positives'
  labels (ones when none were given; the loader shifted 0-based labels by one) then zeros;
* ``triplet``: ``B * amount`` random destinations, ``src_index``, ``dst_pos_index`` and
  ``dst_neg_index`` (``[B]`` for amount 1, ``[B, amount]`` otherwise).

Negatives are drawn by the negatives stage (``_negatives``: ``uniform`` over all nodes as PyG's,
``degree``-weighted, or ``resident`` among the batch's own endpoints), from a generator seeded by
``(seed, epoch, rank, seq)``: the same plan, foresight and replays see the same negatives.  Each
item counts its negatives and how many of them are edges of the graph (``stats()["negatives"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._items import BatchItem
from ._negatives import NegativeSpec, draw_nodes, false_negatives
from ._plan import num_batches, plan_epoch

_NEGATIVES = 0x4E4547  # the negatives' stream tag ("NEG"): apart from the shuffle's and the sampler's draws


__all__ = ["EdgeItems", "EdgeTargets", "NegativeSpec", "edge_item", "max_edge_seeds"]


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeTargets:
    """An edge batch's targets, in local ids (positions in the batch's seeds, which lead n_id)."""

    input_id: np.ndarray                       # the positives' positions in the loader's input pairs
    edge_label_index: np.ndarray | None = None  # [2, B (+ negatives)]: no negatives or binary
    edge_label: np.ndarray | None = None
    src_index: np.ndarray | None = None         # triplet
    dst_pos_index: np.ndarray | None = None
    dst_neg_index: np.ndarray | None = None
    num_negatives: int = 0                      # negative pairs drawn
    false_negatives: int = 0                    # of them, edges of the graph

    def batch_fields(self) -> dict[str, np.ndarray]:
        """The fields a batch carries besides ``input_id`` (PyG's names), those that are set."""
        names = ("edge_label_index", "edge_label", "src_index", "dst_pos_index", "dst_neg_index")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


def max_edge_seeds(batch_size: int, negatives: NegativeSpec | None) -> int:
    """The most seeds an edge batch of ``batch_size`` pairs has: every endpoint distinct."""
    if negatives is None:
        return 2 * batch_size
    if negatives.mode == "binary":
        return 2 * (batch_size + math.ceil(batch_size * negatives.amount))
    return 2 * batch_size + batch_size * int(negatives.amount)


@dataclass(frozen=True, slots=True)
class Graph:
    """What the negatives stage reads of the message-passing graph: CSC ``indptr`` (in RAM) and
    ``indices`` (memory-mapped); None in either: no degree weights, no false-negative count."""

    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None

    def false_negatives(self, src: np.ndarray, dst: np.ndarray) -> int:
        if self.indptr is None or self.indices is None:
            return 0
        return false_negatives(self.indptr, self.indices, src, dst)


def edge_item(pairs: np.ndarray, labels: np.ndarray | None, positions: np.ndarray, negatives: NegativeSpec | None,
              rng: np.random.Generator, num_nodes: int, graph: Graph = Graph()) -> BatchItem:
    """The item of the input pairs at ``positions`` (see the module for the layout)."""
    src, dst = pairs[0, positions], pairs[1, positions]
    num_pos = len(positions)
    label = None if labels is None else labels[positions]
    resident = np.concatenate([src, dst])
    if negatives is not None and negatives.mode == "triplet":
        dst_neg = draw_nodes(negatives, num_pos * int(negatives.amount), rng, num_nodes, graph.indptr, resident)
        seeds, inverse = np.unique(np.concatenate([src, dst, dst_neg]), return_inverse=True)
        neg_index = inverse[2 * num_pos:].reshape(num_pos, -1)
        found = graph.false_negatives(np.repeat(src, int(negatives.amount)), dst_neg)
        targets = EdgeTargets(input_id=positions, src_index=inverse[:num_pos], dst_pos_index=inverse[num_pos:2 * num_pos],
                              dst_neg_index=neg_index[:, 0] if neg_index.shape[1] == 1 else neg_index,
                              num_negatives=len(dst_neg), false_negatives=found)
        return BatchItem(seeds=seeds, targets=targets)
    num_neg = found = 0
    if negatives is not None:  # binary: random pairs, labelled 0
        num_neg = math.ceil(num_pos * negatives.amount)
        src_neg = draw_nodes(negatives, num_neg, rng, num_nodes, graph.indptr, resident)
        dst_neg = draw_nodes(negatives, num_neg, rng, num_nodes, graph.indptr, resident)
        found = graph.false_negatives(src_neg, dst_neg)
        src, dst = np.concatenate([src, src_neg]), np.concatenate([dst, dst_neg])
        pos = np.ones(num_pos, np.float32) if label is None else label
        label = np.concatenate([pos, np.zeros((num_neg, *pos.shape[1:]), pos.dtype)])
    seeds, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return BatchItem(seeds=seeds, targets=EdgeTargets(input_id=positions, edge_label_index=inverse.reshape(2, -1),
                                                      edge_label=label, num_negatives=num_neg, false_negatives=found))


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeItems:
    """The plain plan of edge batches: the input ``pairs`` ([2, E] int64) cut by :func:`plan_epoch`
    over their positions, each batch with its negatives (an :class:`~outre_async.sampling.Items`)."""

    pairs: np.ndarray
    labels: np.ndarray | None
    negatives: NegativeSpec | None
    num_nodes: int
    batch_size: int
    shuffle: bool
    seed: int
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1
    graph: Graph = Graph()  # degree weights and the false-negative count (None arrays: neither)

    @property
    def max_seeds(self) -> int:
        return min(max_edge_seeds(self.batch_size, self.negatives), self.num_nodes)

    def plan(self, epoch: int) -> list[BatchItem]:
        cuts = plan_epoch(np.arange(self.pairs.shape[1], dtype=np.int64), self.batch_size, shuffle=self.shuffle,
                          seed=self.seed, epoch=epoch, drop_last=self.drop_last, rank=self.rank,
                          world_size=self.world_size)
        return [edge_item(self.pairs, self.labels, positions, self.negatives,
                          np.random.default_rng([self.seed, epoch, self.rank, seq, _NEGATIVES]), self.num_nodes,
                          self.graph)
                for seq, positions in enumerate(cuts)]

    def num_batches(self, epoch: int) -> int:
        return num_batches(self.pairs.shape[1], self.batch_size, self.drop_last, self.world_size)
