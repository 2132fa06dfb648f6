"""PyG's ``GraphStore`` over an on-disk dataset: the CSC it stores, as ``(row, colptr)`` tensors.

The dataset *is* a CSC (``indices`` = sources, ``indptr`` = per-target offsets, edges u -> v), so
``get_edge_index(layout="csc")`` hands out the store's own arrays (no copy when ``indices`` is in
RAM; a memory-mapped ``indices`` is copied, since a tensor over a read-only map cannot be written
safely).  COO and CSR are built on request (O(E) memory).  Our :class:`OutreNodeSampler` never calls
these: it samples the dataset's CSC directly, out of core, which is why this adapter does not need
PyG's sampler (pyg-lib / torch-sparse) at all.  Read-only; homogeneous only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.data.graph_store import EdgeLayout

from ..errors import ConfigError, NotSupportedError
from ..store._dataset import Dataset

__all__ = ["OutreGraphStore"]


class OutreGraphStore(GraphStore):
    """The dataset's topology for PyG (edge type ``None``: one homogeneous edge set)."""

    def __init__(self, dataset: Dataset) -> None:
        super().__init__()
        self.dataset = dataset

    def _csc_attr(self) -> EdgeAttr:
        n = self.dataset.num_nodes
        return EdgeAttr(edge_type=None, layout=EdgeLayout.CSC, is_sorted=True, size=(n, n))

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [self._csc_attr()]

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[torch.Tensor, torch.Tensor] | None:
        if edge_attr.edge_type is not None:
            raise NotSupportedError(f"heterogeneous graphs are not supported yet (edge_type={edge_attr.edge_type!r}); "
                                    "use edge_type=None on a homogeneous dataset")
        indices = self.dataset.indices
        row = torch.from_numpy(indices if indices.flags.writeable else np.array(indices)).to(torch.long)
        colptr = torch.from_numpy(self.dataset.indptr)
        if edge_attr.layout == EdgeLayout.CSC:
            return row, colptr
        col = torch.repeat_interleave(torch.arange(self.dataset.num_nodes), colptr.diff())
        if edge_attr.layout == EdgeLayout.COO:
            return row, col
        perm = torch.argsort(row, stable=True)  # CSR: sources' out-edges, targets ascending within
        rowptr = torch.zeros(self.dataset.num_nodes + 1, dtype=torch.long)
        rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=self.dataset.num_nodes), 0)
        return rowptr, col[perm]

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        raise ConfigError("OutreGraphStore is read-only; write a dataset with `outre convert` or oa.from_pyg")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise ConfigError("OutreGraphStore is read-only; write a dataset with `outre convert` or oa.from_pyg")

    def __repr__(self) -> str:
        return (f"OutreGraphStore({str(self.dataset.path)!r}, num_nodes={self.dataset.num_nodes}, "
                f"num_edges={self.dataset.num_edges})")
