"""From counts, costs and a byte budget to a plan: what each cache holds and the epoch time it predicts.

Byte prices (the loader's own accounting, so that the plan and the memory plan agree):

* a static feature row ``4 dim + 8`` (float32 row + its node id), table ``4 N`` (node -> row, int32);
* a history slot ``4 h + 13 + samplers`` (``cache.history_bytes``), table ``4 N``;
* a neighbour list ``deg x itemsize + 16`` (``NeighborCache``), table ``4 N + 8``; partition mode only.

Predicted epoch time.  The knapsack's objective is the serial sum ``rows read x row_us + lists read
x list_us + rows computed x recompute_us`` minus what the plan saves (``epoch_seconds_serial``).  The
loader overlaps reading with training, so the prediction (``epoch_seconds``) is ``sample + max(compute,
reads)``, each side less its own savings (the histories' spared rows are compute, the rest reads).
Both are reported; ``benchmarks/bench_alpha_sweep.py`` sets them against measured epochs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import ConfigError
from ..cache._history_config import history_slot_bytes
from ._costs import MissCosts
from ._counts import Counts
from ._knapsack import Attribution, Choice, KnapsackInput, solve
from ._outre_split import alpha_choice, outre_split

SPLITS = ("auto", "outre")
OUTRE_BETA = 1.0  # OUTRE's sampling-vs-gathering weight of a saved list, in feature-read equivalents


def check_split(split: object) -> str | float:
    """``"auto"`` (the knapsack), ``"outre"`` (the α grid) or an ``alpha`` in [0, 1] (fixed share)."""
    if isinstance(split, str) and split in SPLITS:
        return split
    if isinstance(split, int | float) and not isinstance(split, bool) and 0.0 <= float(split) <= 1.0:
        return float(split)
    raise ConfigError(f"cache_split={split!r} must be 'auto', 'outre' or an alpha in [0, 1] (embeddings' share)")


def knapsack_input(counts: Counts, costs: MissCosts, *, num_nodes: int, dim: int, hist_dim: int | None,
                   num_samplers: int, list_bytes: np.ndarray | None) -> KnapsackInput:
    """The knapsack's view of a profile (module docstring for the prices); no history without
    ``hist_dim``, no neighbour lists without ``list_bytes`` (not partition mode)."""
    use_hist = hist_dim is not None and len(counts.cand) > 0
    c = len(counts.cand) if use_hist else 0
    attr = Attribution(cand=counts.attr_cand, node=counts.attr_node, rows=counts.attr_rows,
                       lists=counts.attr_lists) if use_hist else Attribution.empty()
    tables = {"features": 4 * num_nodes, "history": 4 * num_nodes}
    if list_bytes is None:
        list_hot, lb = np.zeros(num_nodes), np.ones(num_nodes, np.int64)
    else:
        list_hot, lb = counts.list_hot, list_bytes
        tables["neighbors"] = 4 * num_nodes + 8
    return KnapsackInput(
        row_hot=counts.row_hot, list_hot=list_hot, list_bytes=lb,
        hist_nodes=counts.cand[:c], hist_fresh=counts.cand_fresh[:c],
        hist_own=counts.cand_rows[:c] * costs.recompute_us, attribution=attr,
        row_us=costs.row_us, list_us=costs.list_us, row_bytes=4 * dim + 8,
        slot_bytes=history_slot_bytes(hist_dim or 1, num_samplers), tables=tables)


def choose(inp: KnapsackInput, budget: int, split: str | float) -> tuple[Choice, float | None]:
    """The plan for ``budget`` bytes of caches: ``(choice, alpha)``, alpha None for ``"auto"``."""
    if split == "auto":
        return solve(inp, max(0, budget)), None
    if split == "outre":
        return outre_split(inp, max(0, budget), beta=OUTRE_BETA)
    return alpha_choice(inp, max(0, budget), float(split), beta=OUTRE_BETA), float(split)


def predict(counts: Counts, costs: MissCosts, choice: Choice, *, sample_seconds: float) -> dict[str, Any]:
    """Epoch time without caches and with the plan (seconds; see the module docstring)."""
    rows = float(counts.row_hot.sum())
    computed = counts.accesses * counts.epoch_batches / max(counts.batches, 1)
    reads_us = rows * costs.row_us + float(counts.list_hot.sum()) * costs.list_us
    compute_us = computed * costs.recompute_us
    saved_reads = choice.saved_us - choice.compute_saved_us
    serial = sample_seconds + (reads_us + compute_us) / 1e6
    overlap = sample_seconds + max(compute_us - choice.compute_saved_us, reads_us - saved_reads, 0.0) / 1e6
    return {"epoch_seconds_no_cache": sample_seconds + max(compute_us, reads_us) / 1e6, "epoch_seconds": overlap,
            "epoch_seconds_serial": max(0.0, serial - choice.saved_us / 1e6),
            "compute_seconds": max(0.0, compute_us - choice.compute_saved_us) / 1e6,
            "read_seconds": max(0.0, reads_us - saved_reads) / 1e6,
            "saved_seconds": choice.saved_us / 1e6, "sample_seconds": sample_seconds,
            "rows_read_no_cache": rows, "lists_read_no_cache": float(counts.list_hot.sum())}
