"""What one planned batch is: :class:`BatchItem`, and :class:`Items`, what plans an epoch of them.

A batch item says three things apart, so no stage has to guess them from an array's type:

* ``seeds``: the unique node ids to sample.  All the sampler, the feature buffer, the foresight and
  the history ever see of a batch (PyG's ``NodeSamplerInput.node``, GraphBolt's ``MiniBatch.seeds``).
* ``targets``: what the batch supervises.  Today :class:`NodeTargets`, the seeds' positions in the
  loader's input nodes (PyG's ``input_id``, handed out as ``batch.input_id``), or
  ``_edge_items.EdgeTargets`` for link prediction (the supervised pairs and their negatives).
* ``macro``: partition mode's reference (:class:`MacroRef`: the macro batch whose adjacency block the
  batch samples with), or None for a batch of plain seeds.

An :class:`Items` plans an epoch's items for one rank and bounds the seeds per batch
(``max_seeds``: what the memory plan's "seed nodes per batch" is).  :class:`SeedItems` is the plain
plan (:func:`~outre_async.sampling._plan.plan_epoch`, planned over positions so ``input_id`` comes with
it); partition mode's is ``loader._partition_mode.PartitionBatching``.  :class:`ItemSampler` is a
:class:`NeighborSampler` that takes items, as partition mode's sampler does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ._plan import num_batches, plan_epoch
from ._sampler import NeighborSampler, SampledSubgraph
from ._sampler_kernels import HistoryPrune

class Targets(Protocol):
    """What a batch supervises (``NodeTargets``; ``_edge_items.EdgeTargets`` for link prediction): the
    input positions of what it supervises, and the other fields its batch carries."""

    @property
    def input_id(self) -> np.ndarray: ...

    def batch_fields(self) -> dict[str, np.ndarray]: ...

    @property
    def num_negatives(self) -> int: ...  # negatives drawn for the batch (the loader's stats count them)

    @property
    def false_negatives(self) -> int: ...  # of them, edges of the graph


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeTargets:
    """A node batch's targets: ``input_id[i]`` is the position of ``seeds[i]`` in the loader's input nodes."""

    input_id: np.ndarray
    num_negatives = 0    # a node batch draws no negatives (not fields: class constants)
    false_negatives = 0

    def batch_fields(self) -> dict[str, np.ndarray]:
        """The fields a batch carries besides ``input_id``: none for nodes (see ``EdgeTargets``)."""
        return {}


@dataclass(frozen=True, kw_only=True, slots=True)
class MacroRef:
    """The macro batch a micro-batch was cut from: its index in the epoch's plan, its partitions (the
    key of its adjacency block) and the epoch it was planned for (``MacroStore`` keeps two epochs' blocks)."""

    index: int
    parts: tuple[int, ...]
    epoch: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchItem:
    """One planned batch (see the module): the seeds to sample, the targets, the macro batch or None."""

    seeds: np.ndarray
    targets: Targets  # NodeTargets or EdgeTargets
    macro: MacroRef | None = None

    def __len__(self) -> int:
        return len(self.seeds)


def node_item(seeds: np.ndarray, positions: np.ndarray, macro: MacroRef | None = None) -> BatchItem:
    """The item of the input nodes at ``positions`` of ``seeds`` (its ``input_id``)."""
    return BatchItem(seeds=seeds[positions], targets=NodeTargets(input_id=positions), macro=macro)


class Items(Protocol):
    """Plans each epoch's batch items for one rank; the same plan on every call for an epoch."""

    @property
    def max_seeds(self) -> int:
        """The most seed nodes one item has (the plan's batch size)."""
        ...

    def plan(self, epoch: int) -> list[BatchItem]: ...

    def num_batches(self, epoch: int) -> int:
        """``len(plan(epoch))``, without planning when it can."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class SeedItems:
    """The plain plan: ``seeds`` (the loader's input nodes, int64) cut by :func:`plan_epoch`."""

    seeds: np.ndarray
    batch_size: int
    shuffle: bool
    seed: int
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1

    @property
    def max_seeds(self) -> int:
        return self.batch_size

    def plan(self, epoch: int) -> list[BatchItem]:
        # the positions are shuffled, not the ids: the same draws give the same order (and input_id)
        cuts = plan_epoch(np.arange(len(self.seeds), dtype=np.int64), self.batch_size, shuffle=self.shuffle,
                          seed=self.seed, epoch=epoch, drop_last=self.drop_last, rank=self.rank,
                          world_size=self.world_size)
        return [node_item(self.seeds, positions) for positions in cuts]

    def num_batches(self, epoch: int) -> int:
        return num_batches(len(self.seeds), self.batch_size, self.drop_last, self.world_size)


class ItemSampler:
    """A :class:`NeighborSampler` that samples batch items (their seeds): what the loader's sample
    stage and foresight run when the plan is plain seeds.  One per sampler thread, like its sampler."""

    __slots__ = ("plain",)

    def __init__(self, plain: NeighborSampler) -> None:
        self.plain = plain

    def sample(self, item: BatchItem, stream: int = 0, prune: HistoryPrune | None = None) -> SampledSubgraph:
        return self.plain.sample(item.seeds, stream, prune)

    def sample_nodes(self, item: BatchItem, stream: int = 0) -> np.ndarray:
        return self.plain.sample_nodes(item.seeds, stream)
