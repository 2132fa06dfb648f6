"""Chunk sizes that keep one layer's chunk inside ``memory_budget``: fixed node counts per chunk let a
wide layer's chunk grow past any budget (``benchmarks/bench_inference_memory.py`` measures the peak).

What one chunk holds at once, for a layer whose input (or output) is ``w`` floats wide and a chunk of
``n`` targets and ``e`` in-edges (rows read ``<= n + e``, ``_chunks``)::

    rows read        (n + e) x 4 w     (the layer's input rows, h^(l) or the features)
    messages         e x 4 w           (a message-passing conv gathers x[src] per edge: PyG's x_j)
    aggregate        (n + e) x 4 w     (the scatter's output, sized to the rows; the conv's own output)
    edges            e x 48            (global src, dst and local pairs int64, as numpy and as torch)

so at most ``(n + e) x (12 w + 48)`` bytes: with thousands of features a node and a chunk of
thousands of targets, the messages alone take gigabytes.  :func:`chunk_limits` lowers ``chunk_nodes`` and
``chunk_edges`` to half of ``budget / (12 w + 48)`` each (never below 1: a single node with more
in-edges is still a chunk of its own); narrow layers keep the caller's sizes.  The output kept in RAM
(``N x out_dim``) and the model's weights are outside it.  ``memory_budget=None`` is the loader's
default rule's machine share (``loader._auto_budget.AUTO_SHARE`` of the memory available now).
"""

from __future__ import annotations

from torch import nn

from .._units import available_memory
from ..loader._auto_budget import AUTO_SHARE

EDGE_INDEX_BYTES = 48  # per edge: src, dst, two local ids (int64), and their torch copy on the way in


def chunk_limits(width: int, budget: int, chunk_nodes: int, chunk_edges: int) -> tuple[int, int]:
    """``(chunk_nodes, chunk_edges)`` for a layer ``width`` floats wide within ``budget`` bytes (module)."""
    half = budget // (12 * width + EDGE_INDEX_BYTES) // 2
    return max(1, min(chunk_nodes, half)), max(1, min(chunk_edges, half))


def layer_width(conv: nn.Module, in_width: int) -> int:
    """The wider of the layer's input and output rows (GAT: heads x out_channels when concatenated)."""
    out = int(getattr(conv, "out_channels", 0) or 0)
    if getattr(conv, "concat", False):
        out *= int(getattr(conv, "heads", 1) or 1)
    return max(in_width, out)


def default_budget() -> int:
    """``memory_budget=None``: the loader's default share of the memory available now."""
    return int(AUTO_SHARE * available_memory())
