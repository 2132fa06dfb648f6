"""One epoch of the pipeline: what its stages share, and the task group that owns every stage.

    plan ─▶ samplers ─▶ [extract channel] ─▶ extractors ─▶ [ready channel] ─▶ delivery ─▶ consumer
                                                   ▲                                        │
                                                   └──────── release (matrix leases) ◀──────┘

:func:`run_stages` is one task that owns an ``asyncio.TaskGroup`` with every sampler and extractor
of the epoch; the first failure cancels the rest, closes both channels, releases the matrix leases
of batches nobody will consume and drops the look-ahead pins (and out-of-turn leases) of sampled
batches nobody will extract.  The consumer side is ``_delivery``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from ..aio._channel import Channel
from ..features import FeatureBuffer, FeatureTier
from ..sampling._items import BatchItem
from ._batch import ExtractedBatch, SampledBatch, Sampler
from ._batch_memory import BatchMemory
from ._extract_stage import ExtractStage
from ._foresight import EpochForesight
from ._history import EpochHistory
from ._out_of_turn import OutOfTurnMemory
from ._sample_stage import SampleStage


@dataclass(frozen=True, kw_only=True, slots=True)
class EpochParts:
    """Everything one epoch's stages use; built by the loader, shared by reference.  The channels
    are the epoch's own (fresh each epoch); the stages and everything else outlive it."""

    plan: Sequence[BatchItem]
    samplers: Sequence[Sampler]
    executor: Executor
    buffer: FeatureBuffer       # the sample stage's look-ahead pins are taken on it
    tiers: FeatureTier          # the top of the feature tiers: the extract stage asks it for rows
    extract: Channel[SampledBatch]
    ready: Channel[ExtractedBatch]
    num_extractors: int
    stream_base: int
    sample_stage: SampleStage
    extract_stage: ExtractStage
    matrices: BatchMemory
    history: EpochHistory | None = None
    gate: OutOfTurnMemory | None = None  # ordered mode: the epoch's out-of-turn budget (``_out_of_turn``)
    stream_stride: int = 1  # batch seq samples with stream ``stream_base + seq * stream_stride`` (one per rank)
    foresight: EpochForesight | None = None  # the batches beyond the extract queue the buffer foresees (``_foresight``)
    seqs: Sequence[int] | None = None  # a resumed epoch: the plan seq of each position of ``plan`` (None: its position)

    def stream(self, position: int) -> int:
        """The RNG stream of the batch at ``position`` of ``plan``: that of its seq in the full epoch's plan,
        so a resumed epoch's remaining batches sample exactly as the uninterrupted epoch's (``_resume``)."""
        seq = position if self.seqs is None else self.seqs[position]
        return self.stream_base + seq * self.stream_stride


async def run_stages(parts: EpochParts) -> None:
    """Run every sampler and extractor of the epoch; close both channels when done or failed."""
    extract, ready = parts.extract, parts.ready
    plan = iter(enumerate(parts.plan))
    try:
        async with asyncio.TaskGroup() as tg:
            samplers = [
                tg.create_task(parts.sample_stage.worker(
                    s, plan=plan, out=extract, executor=parts.executor, stream_of=parts.stream,
                    history=parts.history, lookahead=parts.buffer,
                    gate=parts.gate, tiers=parts.tiers, foresight=parts.foresight))
                for s in parts.samplers
            ]
            extractors = [
                tg.create_task(parts.extract_stage.worker(extract, ready, parts.tiers, parts.matrices,
                                                          holds_back=parts.gate is not None))
                for _ in range(parts.num_extractors)
            ]
            tg.create_task(_close_after(samplers, extract))
            tg.create_task(_close_after(extractors, ready))
    except BaseException:
        for eb in ready.drain_nowait():  # a failed epoch delivers nothing more: the error comes next
            eb.lease.release()
        raise
    finally:
        if parts.foresight is not None:  # its holds go before the pins: nothing foreseen outlives the epoch
            parts.foresight.close()
        extract.close()
        ready.close()
        for sb in extract.drain_nowait():  # sampled, never extracted: their rows are not wanted any more
            if sb.pin is not None:
                sb.pin.release()
            if sb.lease is not None:
                sb.lease.release()


async def _close_after(tasks: list[asyncio.Task[None]], channel: Channel[Any]) -> None:
    """End ``channel``'s stream once every producer task is done (their errors go to the group)."""
    await asyncio.wait(tasks)
    channel.close()
