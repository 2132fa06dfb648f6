"""From counts, costs and a byte budget to a plan: what each cache holds and the epoch time it predicts.

Byte prices (the loader's own accounting, so that the plan and the memory plan agree):

* a static feature row ``held_row_bytes + 8`` (the row in its held dtype, ``RowFormat``, + its node id),
  table ``4 N`` (node -> row, int32);
* a history slot ``4 h + 21 + samplers`` (``cache.history_bytes``), table ``4 N``; with its rows on a
  GPU (placement ``"device"``) ``21 + samplers`` of host bytes, at most the device budget's
  ``device_budget // 4 h`` slots (``cache.slot_prices``: the profile solves each placement the
  config allows and keeps the better);
* a neighbour list ``deg x itemsize + 16`` (``NeighborCache``), table ``4 N + 8``; partition mode only.

Predicted epoch time.  The knapsack's objective is the serial sum ``rows read x row_us + lists read
x list_us + rows computed x recompute_us`` minus what the plan saves (``epoch_seconds_serial``).  The
loader overlaps reading with training; what it cannot overlap is work on the same resource.  Three
resources, each less its share of the plan's savings (the histories' spared rows are compute, the
rest reads):

* ``compute``: the training steps (``rows x recompute_us``), plus with a GPU tier its assembly on the
  device (``accesses x gpu_hit_us`` for the rows it holds, ``x gpu_miss_us`` for the rest);
* ``reads``: the disk, ``rows read x row_us + lists x list_us`` (wall time at the loader's depth);
* ``loader_cpu``: the loader's own CPU work: sampling, the reads' CPU (``rows read x row_cpu_us``)
  and the gathers into batch matrices (``rows delivered x copy_us``).

On a CPU device the trainer's intra-op threads already use every core, so the loader's CPU work
takes its cores from the steps and adds to them: ``epoch = max(compute + loader_cpu, reads)``.  On
an accelerator the three overlap: ``epoch = max(compute, reads, loader_cpu)``; so do they when the
step is a fixed wait (``costs.step_us``, ``outre bench --step-ms``: a sleep that leaves the cores
to the loader, ``batches x step_us`` of compute whatever the rows).  (Why not ``sample +
max(compute, reads)``: on a CPU device it ignores the loader's CPU, which stalls the steps even
when the reads are predicted well within them; and a fixed wait must be charged as the wait, not
as the measured GraphSAGE step, or a ``--step-ms`` epoch is predicted several times too long.)
``benchmarks/bench_profile_prediction.py`` sets the prediction and each part against measured epochs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError
from ..cache._history_config import SlotPrice, history_slot_bytes
from ..store._row_format import RowFormat
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


def device_row_us(costs: MissCosts, num_nodes: int, gpu_held: np.ndarray | None) -> np.ndarray | None:
    """µs the GPU tier's assembly spends on one access of each node's row: ``gpu_hit_us`` for the
    rows it holds, ``gpu_miss_us`` for the others (float64 [N]); None without a tier."""
    if gpu_held is None:
        return None
    per = np.full(num_nodes, costs.gpu_miss_us)
    per[gpu_held] = costs.gpu_hit_us
    return per


def knapsack_input(counts: Counts, costs: MissCosts, *, num_nodes: int, row: RowFormat, hist_dim: int | None,
                   num_samplers: int, list_bytes: np.ndarray | None,
                   gpu_held: np.ndarray | None = None, price: SlotPrice | None = None) -> KnapsackInput:
    """The knapsack's view of a profile (module docstring for the prices; ``row``: the feature rows'
    format, whose held bytes a static row costs); no history without
    ``hist_dim``, no neighbour lists without ``list_bytes`` (not partition mode).  With a GPU tier
    (``gpu_held``: its node ids; ``counts`` already without their host reads, ``_profiling.host_counts``),
    a history slot also spares the tier's assembly of its subtree's rows, each at the tier's own
    measured cost per hit or miss (:func:`device_row_us`).  ``price``: a slot's host bytes and the
    device's bound in slots under the placement it will have (default: rows on the host); a pulled
    row costs what moving it to the trainer costs there (``costs.pull_us``: a gather on the GPU, or
    a host gather and a copy over), netted from what the slot spares each time it is fresh."""
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
    own = counts.cand_rows[:c] * costs.recompute_us - counts.cand_hits[:c] * pull_us(costs, price)
    per = device_row_us(costs, num_nodes, gpu_held)
    if per is not None and c and counts.attr_access is not None:
        own = own + np.bincount(counts.attr_cand, weights=counts.attr_access * per[counts.attr_node], minlength=c)
    return KnapsackInput(
        row_hot=counts.row_hot, list_hot=list_hot, list_bytes=lb,
        hist_nodes=counts.cand[:c], hist_fresh=counts.cand_fresh[:c],
        hist_own=own, attribution=attr,
        row_us=costs.row_us, list_us=costs.list_us, row_bytes=row.held_row_bytes + 8,
        slot_bytes=price.host_bytes if price is not None else history_slot_bytes(hist_dim or 1, num_samplers),
        max_slots=price.max_slots if price is not None else None, tables=tables)


def pull_us(costs: MissCosts, price: SlotPrice | None) -> float:
    """µs one pulled row costs the step under ``price``'s placement (measured, ``MissCosts``)."""
    return costs.pull_device_us if price is not None and price.placement == "device" else costs.pull_host_us


def choose(inp: KnapsackInput, budget: int, split: str | float) -> tuple[Choice, float | None]:
    """The plan for ``budget`` bytes of caches: ``(choice, alpha)``, alpha None for ``"auto"``."""
    if split == "auto":
        return solve(inp, max(0, budget)), None
    if split == "outre":
        return outre_split(inp, max(0, budget), beta=OUTRE_BETA)
    return alpha_choice(inp, max(0, budget), float(split), beta=OUTRE_BETA), float(split)


def predict(counts: Counts, costs: MissCosts, choice: Choice, *, sample_seconds: float,
            gpu_held: np.ndarray | None = None) -> dict[str, Any]:
    """Epoch time without caches and with the plan (seconds; see the module docstring)."""
    rows = float(counts.row_hot.sum())
    computed = counts.accesses * counts.epoch_batches / max(counts.batches, 1)
    reads_us = rows * costs.row_us + float(counts.list_hot.sum()) * costs.list_us
    compute_us = computed * costs.recompute_us + counts.epoch_batches * costs.step_us
    per = device_row_us(costs, len(counts.row_hot), gpu_held)
    if per is not None:
        access = counts.row_access if counts.row_access is not None else np.zeros(len(per))
        compute_us += float(access @ per)
    saved_reads = choice.saved_us - choice.compute_saved_us
    serial = sample_seconds + (reads_us + compute_us) / 1e6
    reads_left = max(0.0, reads_us - saved_reads)
    compute_left = max(0.0, compute_us - choice.compute_saved_us)
    # the loader's CPU, each part shrinking with the savings of the resource it serves
    io_cpu = rows * costs.row_cpu_us * (reads_left / reads_us if reads_us > 0 else 0.0)
    copy_cpu = computed * costs.copy_us * (compute_left / compute_us if compute_us > 0 else 0.0)
    loader_cpu = sample_seconds + (io_cpu + copy_cpu) / 1e6
    loader_cpu_no_cache = sample_seconds + (rows * costs.row_cpu_us + computed * costs.copy_us) / 1e6
    on_cores = costs.device.split(":")[0] == "cpu" and costs.step_us == 0
    return {"epoch_seconds_no_cache": epoch_seconds(compute_us / 1e6, reads_us / 1e6, loader_cpu_no_cache, on_cores),
            "epoch_seconds": epoch_seconds(compute_left / 1e6, reads_left / 1e6, loader_cpu, on_cores),
            "epoch_seconds_serial": max(0.0, serial - choice.saved_us / 1e6),
            "compute_seconds": compute_left / 1e6, "read_seconds": reads_left / 1e6,
            "loader_cpu_seconds": loader_cpu, "saved_seconds": choice.saved_us / 1e6, "sample_seconds": sample_seconds,
            "rows_read_no_cache": rows, "lists_read_no_cache": float(counts.list_hot.sum())}


def epoch_seconds(compute: float, reads: float, loader_cpu: float, on_cores: bool) -> float:
    """The epoch from its three resources (module docstring): when the steps run on the cores (a CPU
    device, a real step) the loader's CPU work adds to them, otherwise everything overlaps."""
    if on_cores:
        return max(compute + loader_cpu, reads)
    return max(compute, reads, loader_cpu)
