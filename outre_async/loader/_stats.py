"""``OutreLoader.stats()``: one dict built from frozen snapshots (design §9).

Each stage owns its counters record (``SampleCounters``, ``ExtractCounters``, ``DeliveryCounters``)
and is the only code that replaces it; this module only reads them.  The flat keys
(``sample_seconds``, ``delivered_batches``, ...) are what the CLI, the bench harness and the
benchmarks read.  ``*_seconds`` are busy wall time summed over a stage's workers; ``*_cpu_seconds``
are thread CPU time (sampling: the executor threads' sampling calls; extraction: the loop-thread
steps of the extract workers, completion handling of the source excluded: that is
``io["io_cpu_seconds"]``).  ``queues`` holds each bounded channel's own statistics for the latest epoch
(``capacity``, ``queued`` = current depth, ``max_queued`` = the deepest it got, ``sent``/``received``).
``tiers`` holds each feature tier's figures, top to bottom (``features._tier``: ``hits``, ``misses``,
``bytes_held``, ``hit_rate`` and the tier's own); ``buffer`` and ``io`` stay as they were for their readers.
``feature_rows`` says how a feature row travels: bytes stored, held and delivered, and where it is decoded.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..aio._channel import ChannelStats
from ..sampling._negatives import NegativeSpec
from ..store._row_format import RowFormat
from ._budget import decodes_on_host
from ._delivery import DeliveryCounters
from ._extract_stage import ExtractCounters
from ._link_input import LinkInput
from ._resources import ResourceStats
from ._sample_stage import SampleCounters


def stage_stats(sample: SampleCounters, extract: ExtractCounters, delivery: DeliveryCounters,
                links: LinkInput | None = None) -> dict[str, Any]:
    """The stages' counters; with edge batches that draw negatives, ``negatives`` too (:func:`negative_stats`)."""
    negatives = negative_stats(links.negatives if links is not None else None, sample)
    return {**negatives,
        "sampled_batches": sample.batches, "sampled_nodes": sample.nodes, "sampled_edges": sample.edges,
        "sample_seconds": sample.seconds, "sample_cpu_seconds": sample.cpu_seconds,
        "extracted_batches": extract.batches, "extract_seconds": extract.seconds,
        "extract_cpu_seconds": extract.cpu_seconds, "extract_rows": extract.rows,
        "delivered_batches": delivery.batches, "stall_seconds": delivery.stall_seconds,
    }


def negative_stats(spec: NegativeSpec | None, sample: SampleCounters) -> dict[str, Any]:
    """``{"negatives": ...}`` for edge batches with negatives (else nothing): the sampler, how many were
    drawn, the share that are edges of the graph (false negatives), and the distinct feature rows per
    batch (``n_id``'s length: what a batch reads)."""
    if spec is None:
        return {}
    return {"negatives": {"sampler": spec.sampler, "mode": spec.mode, "amount": spec.amount, "degree_fraction": spec.degree_fraction,
            "drawn": sample.negatives, "false_negatives": sample.false_negatives,
            "false_negative_rate": sample.false_negatives / sample.negatives if sample.negatives else 0.0,
            "distinct_rows_per_batch": sample.nodes / sample.batches if sample.batches else 0.0}}


def queue_stats(channels: dict[str, ChannelStats]) -> dict[str, dict[str, Any]]:
    return {name: asdict(stats) for name, stats in channels.items()}


def resource_stats(res: ResourceStats | None) -> dict[str, Any]:
    """Backend, buffer and I/O figures of the open resources (or of the last closed opening)."""
    if res is None:
        return {}
    out = {"backend": res.backend, "buffer": res.buffer, "io": res.io, "batch_matrices": res.matrices,
           "tiers": res.tiers}
    if res.device is not None:
        out["copy_engine"] = res.device
    return out


def device_resident(gpu: Any, history: Any) -> dict[str, int]:
    """Bytes the loader keeps in the training device's own memory for the whole run (docs/tutorials/gpu.md, "Device
    memory"), beside the batches in flight: the GPU tier's rows and the history's rows on a GPU."""
    out = {}
    if gpu is not None and gpu.device.type != "cpu":
        out["gpu tier"] = gpu.nbytes
    if history is not None and history.table.device_bytes:
        out["history rows"] = history.table.device_bytes
    return out


def row_stats(row: RowFormat, device: str) -> dict[str, Any]:
    """How a feature row travels (``RowFormat``): its encoding and ``x_dtype``, the bytes a row takes on
    disk, held (buffer, caches, batch matrices, the host-to-device copy) and delivered (``x``), and where
    it is decoded (``features._decode``: ``"device"``, ``"host"``, or ``"none"`` when held is delivered)."""
    where = "none" if not row.decodes else "host" if decodes_on_host(device) else "device"
    return {"encoding": row.encoding, "x_dtype": row.delivered_name, "stored_bytes": row.stored_row_bytes,
            "held_bytes": row.held_row_bytes, "delivered_bytes": row.delivered_row_bytes, "decoded_on": where}
