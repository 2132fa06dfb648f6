"""Typed contracts between pipeline stages, and the batch the consumer sees.

``SampledBatch`` (sampler → extractors) carries topology only, as PyG's ``SamplerOutput`` does (and
the batch's look-ahead :class:`Pin` on the feature buffer); ``ExtractedBatch`` (extractors → consumer)
adds the gathered feature rows and the :class:`MatrixLease` that counts their matrix against the
memory budget until the consumer is done with it.  A :class:`Sampler` is whatever the sample stage
can run on a :class:`~outre_async.sampling.BatchItem`: ``ItemSampler`` (a ``NeighborSampler`` over
the item's seeds) and the partition-mode ``PartitionSampler`` both fit.
``OutreBatch`` is a PyG ``Data`` with one extra method, :meth:`OutreBatch.release`, and the loader's
:class:`BatchHandles` (its lease, history record, device copy) attached once at hand-over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch_geometric.data import Data

from ..cache._history import HistoryDecision
from ..features._decode import as_tensor
from ..features._device_rows import DeviceRows
from ..features._feature_buffer import Pin
from ..sampling._items import BatchItem
from ..sampling._sampler import SampledSubgraph
from ..sampling._sampler_kernels import HistoryPrune
from ._batch_memory import MatrixLease
from ._device_copy import Transfer
from ._history_record import HistoryRecord


class Sampler(Protocol):
    """What a sample-stage worker runs in its executor thread; one instance per worker (its scratch
    is its own).  The result depends only on ``(item, stream)``, never on scheduling."""

    def sample(self, item: BatchItem, stream: int = 0, prune: HistoryPrune | None = None, /) -> SampledSubgraph: ...

    def sample_nodes(self, item: BatchItem, stream: int = 0, /) -> np.ndarray:
        """``sample(item, stream).n_id``, for the loader's foresight (``_foresight``)."""
        ...


@dataclass(frozen=True, slots=True)
class SampledBatch:
    seq: int                    # position in the epoch's plan
    subgraph: SampledSubgraph   # n_id, edge_index, num_sampled_nodes/edges, batch_size
    history: HistoryDecision | None = None  # pulled / pushed rows, decided when sampled (history= only)
    pin: Pin | None = None      # look-ahead hold on the feature buffer until an extractor takes the rows
    lease: MatrixLease | None = None  # ordered mode, sent out of turn: its bytes, reserved by the sampler


@dataclass(frozen=True, slots=True)
class ExtractedBatch:
    seq: int
    subgraph: SampledSubgraph
    x: np.ndarray               # [len(n_id), dim] held words, rows in n_id order (GPU tier: only its misses)
    lease: MatrixLease          # released by the consumer (or by the shutdown path)
    history: HistoryDecision | None = None
    device_rows: DeviceRows | None = None  # GPU tier: the rows it holds, assembled with x at delivery


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchHandles:
    """What the loader hands out with a batch besides its PyG fields, attached once at hand-over
    (:func:`attach_handles`) and read through :func:`batch_handles`.  Kept in the batch's ``__dict__``
    under one private key: ``Data`` would take an attribute for a field, then collate it, move it
    with ``.to()`` and print it."""

    lease: MatrixLease | None = None      # a host batch's matrix bytes, given back by ``OutreBatch.release``
    history: HistoryRecord | None = None  # ``OutreBatch.history`` (with ``history=`` only)
    transfer: Transfer | None = None      # a device batch's copy, which a trainer on a stream of its own waits for


NO_HANDLES = BatchHandles()
_HANDLES = "_outre_handles"


def attach_handles(batch: Data, handles: BatchHandles) -> None:
    """Give ``batch`` its handles (the loader does, once, as it hands the batch over)."""
    batch.__dict__[_HANDLES] = handles


def batch_handles(batch: object) -> BatchHandles:
    """``batch``'s handles; :data:`NO_HANDLES` for an object the loader did not hand out (a transform's own)."""
    found = getattr(batch, "__dict__", {}).get(_HANDLES)
    return found if isinstance(found, BatchHandles) else NO_HANDLES


class OutreBatch(Data):
    """A PyG mini-batch with ``NeighborLoader``'s fields: ``x``, ``y``, ``edge_index`` (local ids, row 0
    the source), ``n_id``, ``e_id`` (CSC positions), ``input_id`` (the seeds' positions in the
    loader's ``input_nodes``), ``batch_size``, ``num_sampled_nodes`` (L+1 entries, ``[0] ==
    batch_size``) and ``num_sampled_edges`` (L), nodes and edges hop by hop so PyG's
    ``trim_to_layer`` works; plus ``seq`` (position in the epoch's plan) and ``epoch``.

    Its matrix counts against ``memory_budget`` until :meth:`release` (called for you when the next
    batch is requested; calling it earlier lets the extractors start another batch sooner).  With ``history=``,
    :attr:`history` is the batch's record and hook (``None`` otherwise).
    """

    @property
    def history(self) -> HistoryRecord | None:
        """The batch's :class:`~outre_async.loader._history_record.HistoryRecord`, or None without history."""
        return batch_handles(self).history

    def release(self) -> None:
        lease = batch_handles(self).lease
        if lease is not None:  # idempotent (``MatrixLease.release``)
            lease.release()


def to_batch(eb: ExtractedBatch, labels: np.ndarray | None, epoch: int, input_id: np.ndarray | None = None,
             to_original: Callable[[np.ndarray], np.ndarray] | None = None,
             edges_to_original: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
             fields: dict[str, np.ndarray] | None = None) -> OutreBatch:
    """Wrap an extracted batch as PyG ``Data`` on the host, sharing its arrays (no copy).  A loader
    on a device copies it there through its copy engine (``_device_copy``, ``_delivery``).
    ``to_original``: the loader reads a partition-ordered copy (``_layout``); ``n_id`` is handed out
    in the original's ids (``y`` is looked up in the copy's labels, by the copy's ids), and ``e_id`` in
    the original's CSC positions through ``edges_to_original(e_id, target node of each edge)``.
    ``fields``: an edge batch's targets (``edge_label_index``, ``edge_label``, or the triplet indices;
    ``EdgeTargets.batch_fields``), set as tensors under their PyG names."""
    sub = eb.subgraph
    ids = np.asarray(sub.n_id, dtype=np.int64)
    n_id = torch.from_numpy(ids if to_original is None else np.asarray(to_original(ids), dtype=np.int64))
    e_id = None if sub.e_id is None else np.asarray(sub.e_id, dtype=np.int64)
    if e_id is not None and edges_to_original is not None:
        e_id = edges_to_original(e_id, ids[np.asarray(sub.edge_index[1], dtype=np.int64)])
    batch = OutreBatch(
        x=as_tensor(eb.x),  # held words (bfloat16's as bfloat16): decoded at hand-over (``features._decode``)
        edge_index=torch.from_numpy(np.asarray(sub.edge_index, dtype=np.int64)),
        n_id=n_id,
        e_id=None if e_id is None else torch.from_numpy(e_id),
        input_id=None if input_id is None else torch.from_numpy(input_id),
        batch_size=int(sub.batch_size),
        num_sampled_nodes=list(sub.num_sampled_nodes),
        num_sampled_edges=list(sub.num_sampled_edges),
        seq=eb.seq,
        epoch=epoch,
    )
    if labels is not None:
        batch.y = torch.from_numpy(labels[sub.n_id])
    for name, value in (fields or {}).items():
        batch[name] = torch.from_numpy(value)
    return batch
