"""Out-of-core layer-wise inference: every node's output with full neighbourhoods, one layer at a time.

Sampled evaluation is noisy; full-neighbourhood evaluation of an L-layer model on the whole graph
needs every node's h^(l) at once.  So, as PyG's ``BasicGNN.inference`` and DGL do, compute layer
``l`` for all nodes before layer ``l+1``: the nodes are cut into chunks of consecutive targets
(``_chunks``), each chunk reads its targets' and in-neighbours' rows of h^(l) (layer 0: the
dataset's features) through a :class:`FeatureSource`, runs ``model.layer(l, ...)`` and writes its
targets' rows of h^(l+1) to a spill file (``_spill``) that the next layer reads the same way.

Memory: O(N) for the output kept in RAM (N x out_dim float32) and, for GCN, one float32 degree per
node; plus one chunk at a time: at most ``chunk_nodes + chunk_edges`` rows of the widest layer input
(float32), its edges (three int64 per edge) and the layer's own per-edge work (a message per edge;
``GATConv``: heads floats per edge), with both chunk sizes lowered per layer so that a chunk fits in
``memory_budget`` (``_chunk_budget``).  Spill files take N x hidden x 4 bytes of disk (two layers at a time).

GCN: ``GCNConv`` normalises by degrees *in the graph it is given*, and a chunk's subgraph has the
sources' in-edges missing.  So for a normalising ``GCNConv`` the weights are computed here from the
full graph's degrees, exactly as ``gcn_norm`` does on the whole graph (one self loop per node, weight
``1/sqrt(d_u d_v)`` with ``d`` = in-degree without self loops + 1), and the conv is called with
``normalize`` off for that call.  SAGE (mean over in-edges) and GAT (softmax over in-edges) need
nothing: a chunk holds all of its targets' in-edges.

The model protocol: ``model.convs`` (the layers) and ``model.layer(i, x, edge_index, edge_weight)``
(:class:`~outre_async.GraphSAGE`, :class:`~outre_async.GCN`, :class:`~outre_async.GAT` have both).
PyG's own ``BasicGNN`` models (``torch_geometric.nn.GraphSAGE``, ``GCN``, ``GAT``, ``GIN``, ``PNA``,
``EdgeCNN``) need no ``layer``: it is built from their ``convs`` and their own activation, norms,
dropout and ``jk='last'`` output layer (:mod:`outre_async._basic_gnn`, which also refuses by name the
``jk`` modes and norms that layer-by-layer cannot reproduce).  A normalising ``GCNConv`` must add
plain self loops (``add_self_loops=True``, ``improved=False``: the weights here are ``gcn_norm``'s
for those).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch_geometric.nn import GCNConv
from tqdm import tqdm

from ..errors import ConfigError
from .._units import parse_bytes
from ..features._backends import Backend, open_source
from ..features._row_reader import RowReader
from ..gnn._basic_gnn import check_layerwise, is_basic_gnn, qualname
from ..gnn._basic_gnn import layer as basic_gnn_layer
from ..store._dataset import Dataset
from ..store._tempdir import TempDir
from ._chunk_budget import chunk_limits, default_budget, layer_width
from ._chunks import Chunk, build_chunk, chunk_bounds
from ._spill import SpillFile, open_file_source

__all__ = ["inference"]


@torch.no_grad()
def inference(model: nn.Module, dataset: Dataset, *, embeddings: bool = False, chunk_nodes: int = 8192,
              chunk_edges: int = 1 << 20, backend: Backend = "auto", device: str | torch.device = "cpu",
              tmp_dir: str | Path | None = None, progress: bool = False,
              memory_budget: int | str | None = None) -> torch.Tensor:
    """Every node's output ``[N, out_dim]`` (``embeddings=True``: h^(L-1), the last layer's input),
    computed layer by layer with full neighbourhoods, out of core (see the module for the memory
    bound).  ``memory_budget`` bounds one chunk's working memory: wide layers get smaller chunks
    (``_chunk_budget``; None: a quarter of the memory available, as the loader's default).  The model
    is put in eval mode.  Spill files live in a temp folder under ``tmp_dir`` (default: beside the
    dataset), removed on return, error or interrupt."""
    convs, layer = _checked_model(model, chunk_nodes, chunk_edges)
    budget = default_budget() if memory_budget is None else parse_bytes(memory_budget)
    layers = len(convs) - 1 if embeddings else len(convs)
    if layers < 1:
        raise ConfigError("embeddings=True needs a model of at least two layers (h^(L-1) is a hidden layer)")
    model.eval()
    device = torch.device(device)
    degree = None  # GCN's degrees: edges only, so at the caller's chunk sizes
    if any(_normalising_gcn(c) for c in convs[:layers]):
        degree = _gcn_degree(dataset, list(chunk_bounds(dataset.indptr, chunk_nodes, chunk_edges)))
    folder = TempDir(Path(tmp_dir) if tmp_dir is not None else dataset.path.parent, f"{dataset.path.name}-inference", "sort")
    bar = tqdm(total=layers * dataset.num_nodes, unit="node", desc="inference", disable=not progress)
    try:
        reader = RowReader(lambda: open_source(dataset, backend), name="outre-inference")
        width = dataset.feature_dim  # layer i's input width (then the spilled h^(i)'s)
        for i in range(layers):
            last = i == layers - 1
            out: torch.Tensor | None = None
            spill: SpillFile | None = None
            limits = chunk_limits(layer_width(convs[i], width), budget, chunk_nodes, chunk_edges)
            try:
                for chunk in _chunks(dataset, list(chunk_bounds(dataset.indptr, *limits))):
                    h = _layer(layer, convs[i], i, reader.read(chunk.rows), chunk, degree, device)
                    if last:
                        out = torch.empty(dataset.num_nodes, h.shape[1]) if out is None else out
                        out[chunk.start : chunk.stop] = h
                    else:
                        spill = spill or SpillFile(folder.path / f"h{i + 1}.bin", dataset.num_nodes, h.shape[1])
                        spill.write(chunk.start, h.numpy())
                        width = h.shape[1]
                    bar.update(chunk.stop - chunk.start)
            finally:
                reader.close()
                if spill is not None:
                    spill.close()
            if out is not None:
                return out
            assert spill is not None  # every layer but the last spilled at least one chunk
            reader = RowReader(lambda f=spill.file: open_file_source(f, backend), name="outre-inference")  # type: ignore[misc]
        raise ConfigError(f"{dataset.path} has no nodes; there is nothing to infer")
    finally:
        bar.close()
        folder.remove()


Layer = Callable[[int, torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def _checked_model(model: nn.Module, chunk_nodes: int, chunk_edges: int) -> tuple[list[nn.Module], Layer]:
    """The model's layers and its ``layer(i, x, edge_index, edge_weight)``: its own, else a ``BasicGNN``'s."""
    convs = getattr(model, "convs", None)
    own = getattr(model, "layer", None)
    if not isinstance(convs, nn.ModuleList) or not len(convs) or not (callable(own) or is_basic_gnn(model)):
        raise ConfigError(f"{qualname(model)} lacks the layer-wise protocol: give it `convs` (a ModuleList) and "
                          "`layer(i, x, edge_index, edge_weight)`, as oa.GraphSAGE, oa.GCN and oa.GAT have, or use "
                          "one of PyG's BasicGNN models (torch_geometric.nn.GraphSAGE, GCN, GAT, GIN, ...)")
    if chunk_nodes < 1 or chunk_edges < 1:
        raise ConfigError(f"chunk sizes must be >= 1, got {chunk_nodes=} {chunk_edges=}")
    if is_basic_gnn(model):
        check_layerwise(model)
    for i, conv in enumerate(convs):
        if isinstance(conv, GCNConv) and conv.normalize and (conv.improved or not conv.add_self_loops):
            raise ConfigError(f"{qualname(model)}.convs[{i}] is a GCNConv with improved={conv.improved} "
                              f"add_self_loops={conv.add_self_loops}; layer-wise inference computes gcn_norm's weights "
                              "for plain self loops only (improved=False, add_self_loops=True)")
    if callable(own):
        return list(convs), own
    return list(convs), lambda i, x, edge_index, edge_weight: basic_gnn_layer(model, i, x, edge_index, edge_weight)


def _chunks(dataset: Dataset, bounds: list[tuple[int, int]]) -> Iterator[Chunk]:
    for a, b in bounds:
        dataset.check_mapped()  # a truncated memory-mapped indices is a named error, not a SIGBUS
        yield build_chunk(dataset.indptr, dataset.indices, a, b, dataset.path)


def _layer(layer: Layer, conv: nn.Module, i: int, rows: np.ndarray, chunk: Chunk,
           degree: np.ndarray | None, device: torch.device) -> torch.Tensor:
    """Layer ``i`` on one chunk; returns its targets' rows (on the CPU)."""
    x = torch.from_numpy(rows).to(device)
    edge_index, weight = torch.from_numpy(chunk.edge_index), None
    if degree is not None and _normalising_gcn(conv):
        edge_index, weight = _gcn_edges(chunk, degree)
    with _normalize_off(conv) if weight is not None else contextlib.nullcontext():
        h = layer(i, x, edge_index.to(device), None if weight is None else weight.to(device))
    return h[: chunk.stop - chunk.start].float().cpu()


def _normalising_gcn(conv: nn.Module) -> bool:
    return isinstance(conv, GCNConv) and bool(conv.normalize)


def _gcn_degree(dataset: Dataset, bounds: list[tuple[int, int]]) -> np.ndarray:
    """``gcn_norm``'s degree of every node on the full graph: in-edges without self loops, plus one."""
    degree = np.diff(dataset.indptr).astype(np.float32) + 1
    for chunk in _chunks(dataset, bounds):
        loops = chunk.src == chunk.dst
        np.subtract.at(degree, chunk.dst[loops], 1)
    return degree


def _gcn_edges(chunk: Chunk, degree: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunk's edges without self loops plus one self loop per target, weighted as ``gcn_norm``."""
    keep = chunk.src != chunk.dst
    targets = np.arange(chunk.stop - chunk.start, dtype=np.int64)
    edge_index = np.concatenate([chunk.edge_index[:, keep], np.stack([targets, targets])], axis=1)
    inv = 1.0 / np.sqrt(degree)
    ids = np.arange(chunk.start, chunk.stop)
    weight = np.concatenate([inv[chunk.src[keep]] * inv[chunk.dst[keep]], inv[ids] * inv[ids]])
    return torch.from_numpy(edge_index), torch.from_numpy(weight.astype(np.float32))


@contextlib.contextmanager
def _normalize_off(conv: Any) -> Iterator[None]:
    conv.normalize = False
    try:
        yield
    finally:
        conv.normalize = True
