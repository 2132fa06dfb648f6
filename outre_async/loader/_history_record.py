"""``batch.history``: one batch's pull/push decision as the trainer sees it (:class:`HistoryRecord`) and the
push it sends back to the loader's thread (:class:`Push`).  Apart from ``_history`` (the owner and the
epoch's bookkeeping, on the loop thread) because these two live on the consumer's side: the model's hook
calls :meth:`HistoryRecord.exchange`, which only sends a :class:`Push`; the owner applies it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..errors import HistoryError
from ..cache._device_fence import after, mark


@dataclass(frozen=True, slots=True)
class Push:
    step: int
    slots: np.ndarray
    rows: Tensor | None          # None: the hook ran, rows follow (admission "grad") or there are none
    grad_norm: Tensor | None = None
    record: HistoryRecord | None = None  # told which rows admission "grad" refused (``refused_index``)
    ready: torch.cuda.Event | None = None  # a CUDA event after ``rows`` were made on the trainer's stream (None: ready)


class HistoryRecord:
    """``batch.history``: the batch's pull/push decision and the model hook, :meth:`exchange`.

    Public, read-only (all local row indices are into ``batch.n_id``; tensors on the batch's device):

    * ``step`` (int): the optimizer step the batch was delivered at (the loader's clock);
    * ``pull_index`` (long ``[p]``): rows whose h^(L-1) is taken from the cache, not computed;
    * ``pull_rows`` (``[p, dim]``): those cached rows (a copy), in ``pull_index`` order;
    * ``pull_age`` (long ``[p]``): steps since each pulled row was pushed, ``1 .. staleness``;
    * ``push_index`` (long ``[q]``): rows whose fresh h^(L-1) :meth:`exchange` pushes;
    * ``refused_index`` (long ``[r]`` or None): rows of ``push_index`` that admission ``"grad"`` did
      not write (gradient norm above the batch's median); None until the push is applied (for
      ``"grad"``: after ``backward()``, on the loader's thread, before the next batch is delivered),
      empty under ``"all"``;
    * ``admission`` (``"all"`` or ``"grad"``), ``dim``, ``pull_degree`` (long ``[p]``: the in-degree
      a pulled node would have had in the batch, for GCN's normalisation).

    ``rows_device`` is where pushed rows go (the table's device: no copy when it is the model's);
    ``pulled``, a CUDA event after the pulled rows' gather, which the trainer's stream waits on
    before it reads them (None: nothing to wait for)."""

    __slots__ = ("_send", "step", "dim", "admission", "pull_index", "pull_rows", "push_index", "push_slots",
                 "pull_degree", "pull_age", "refused_index", "_done", "_rows_device", "_pulled")

    def __init__(self, send: Callable[[Push], None], step: int, dim: int, admission: str, pull_index: Tensor,
                 pull_rows: Tensor, push_index: Tensor, push_slots: np.ndarray, *,
                 pull_age: Tensor | None = None, rows_device: torch.device | str = "cpu",
                 pulled: torch.cuda.Event | None = None) -> None:
        self._send, self.step, self.dim, self.admission = send, step, dim, admission
        self._rows_device, self._pulled = torch.device(rows_device), pulled
        self.pull_index, self.pull_rows, self.push_index, self.push_slots = pull_index, pull_rows, push_index, push_slots
        self.pull_degree = torch.zeros(len(pull_index), dtype=torch.long)  # in-degree had they been expanded
        self.pull_age = pull_age if pull_age is not None else torch.zeros(len(pull_index), dtype=torch.long)
        self.refused_index: Tensor | None = None
        self._done = False

    def __repr__(self) -> str:
        refused = "pending" if self.refused_index is None else len(self.refused_index)
        ages = f", ages {int(self.pull_age.min())}..{int(self.pull_age.max())}" if len(self.pull_age) else ""
        return (f"HistoryRecord(step={self.step}, pulled={len(self.pull_index)}{ages}, pushed={len(self.push_index)}, "
                f"admission={self.admission!r}, refused={refused})")

    def follow(self) -> None:
        """The current stream (a consumer thread's own CUDA stream, ``_device_copy.wait_on_own_stream``)
        waits for the record's copy and gather before it reads any of its tensors: they were sent with
        one ``non_blocking`` copy on the loop thread's stream (``cache._record_transfer``).  No-op off CUDA."""
        for t in (self.pull_index, self.pull_rows, self.push_index, self.pull_age, self.pull_degree):
            after(self._pulled, t)

    def exchange(self, h: Tensor) -> Tensor:
        """Push the fresh rows of ``h`` (h^(L-1), every sampled node) and return ``h`` with the pulled
        rows replaced by their history; call once per batch, right before the last layer."""
        if h.dim() != 2 or h.shape[1] != self.dim:
            raise HistoryError(f"history hook got h^(L-1) of shape {tuple(h.shape)}, expected [nodes, {self.dim}]; "
                               "set HistoryConfig(dim=) to the last layer's input width")
        if self._done:
            raise HistoryError(f"batch.history.exchange() called twice for the batch of step {self.step}")
        self._done = True
        fresh = h[self.push_index].detach().to(self._rows_device, torch.float32)  # the table's device: no copy there
        ready = mark(fresh.device)  # the loop thread's scatter waits for this stream's work so far
        if self.admission == "grad" and h.requires_grad:
            self._send(Push(self.step, self.push_slots, None))
            h.register_hook(self._grad_hook(fresh, ready))
        else:
            self.refused_index = self.push_index[:0]
            self._send(Push(self.step, self.push_slots, fresh, ready=ready))  # indexing copied: the push owns its rows
        if not len(self.pull_index):
            return h
        return h.index_copy(0, self.pull_index, after(self._pulled, self.pull_rows).to(h.dtype))

    def _grad_hook(self, fresh: Tensor, ready: torch.cuda.Event | None) -> Callable[[Tensor], None]:
        def hook(grad: Tensor) -> None:
            norm = grad[self.push_index].detach().norm(dim=1).to("cpu")  # the decision is the host's
            self._send(Push(self.step, self.push_slots, fresh, norm, record=self, ready=ready))
        return hook
