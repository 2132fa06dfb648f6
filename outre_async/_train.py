"""A plain mini-batch training epoch and evaluation over any iterable of PyG batches.

Used by ``outre quickstart`` and the benchmarks; it is the ordinary PyG loop a user would write, so
that any loader (the synchronous baseline now, the async loader later) plugs in unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .errors import NonFiniteLossError
from .nn import seed_logits, seed_targets


@dataclass(frozen=True, kw_only=True, slots=True)
class EpochResult:
    loss: float
    accuracy: float
    seconds: float
    batches: int
    seeds: int


@dataclass(kw_only=True, slots=True)
class EpochTotals:
    """A training epoch's sums so far: what a mid-epoch checkpoint saves (``outre train
    --checkpoint-every``) so that the resumed epoch reports the whole epoch, not its last part."""

    loss_sum: float = 0.0
    correct: int = 0
    seen: int = 0
    count: int = 0
    seconds: float = 0.0  # training seconds so far (an earlier process's part included)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# what one training batch gives the epoch: its mean loss, the targets it got right, the targets it has
Objective = Callable[[nn.Module, Any], tuple[torch.Tensor, int, int]]


def node_objective(model: nn.Module, batch: Any) -> tuple[torch.Tensor, int, int]:
    """Cross-entropy on the batch's labelled seeds; with none, a zero loss that still reaches every
    parameter (the step :func:`train_epoch` takes with ``every_step``)."""
    logits, target = _labelled(model, batch)
    if not len(target):
        return logits.sum() * 0.0, 0, 0
    return F.cross_entropy(logits, target), int((logits.argmax(-1) == target).sum()), len(target)


def train_epoch(model: nn.Module, batches: Iterable, optimizer: torch.optim.Optimizer, *,
                every_step: bool = False, epoch: int | None = None, totals: EpochTotals | None = None,
                after_batch: Callable[[EpochTotals], None] | None = None,
                objective: Objective = node_objective) -> EpochResult:
    """One pass over ``batches``: ``objective``'s loss (cross-entropy on the labelled seeds by default;
    edge batches: ``trainer._link.link_objective``), one optimizer step per batch.

    A batch without a labelled seed is skipped, unless ``every_step`` (data parallel: every rank must
    take every step, or the others wait forever in DDP's all-reduce): it then takes a step with a zero
    loss that still reaches every parameter, so this rank adds zeros to the averaged gradients.

    A NaN or inf loss raises :class:`NonFiniteLossError` (naming ``epoch``, the step and the batch's
    first seeds) before its backward pass: the weights keep the last finite step's values, where
    training on used to print ``loss = nan`` and ruin them without a word.  Reading the loss before the
    backward pass (not after the step) costs one host sync per step, which ``.item()`` paid anyway.

    ``totals``: the sums of the epoch's earlier part (a run resumed mid-epoch), added to;
    ``after_batch``: called after each batch with the sums so far (a mid-epoch checkpoint)."""
    model.train()
    start = time.perf_counter()
    t = totals if totals is not None else EpochTotals()
    before = t.seconds
    for step, batch in enumerate(batches, 1):  # step: the batch's place in the epoch, skipped ones counted
        loss, correct, seen = objective(model, batch)
        if seen or every_step:
            optimizer.zero_grad(set_to_none=True)
            value = loss.item()
            if not math.isfinite(value):
                raise _non_finite(value, batch, epoch, step)
            loss.backward()
            optimizer.step()
            t.loss_sum += value * seen
            t.correct += correct
            t.seen += seen
            t.count += 1
        if after_batch is not None:
            after_batch(replace(t, seconds=before + time.perf_counter() - start))
    return EpochResult(loss=t.loss_sum / max(t.seen, 1), accuracy=t.correct / max(t.seen, 1),
                       seconds=before + time.perf_counter() - start, batches=t.count, seeds=t.seen)


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable) -> EpochResult:
    """Loss and accuracy on the labelled seeds of ``batches`` (sampled neighbourhoods, as in training)."""
    model.eval()
    start = time.perf_counter()
    loss_sum, correct, seen, count = 0.0, 0, 0, 0
    for batch in batches:
        logits, target = _labelled(model, batch)
        loss_sum += F.cross_entropy(logits, target, reduction="sum").item() if len(target) else 0.0
        correct += int((logits.argmax(-1) == target).sum())
        seen += len(target)
        count += 1
    return _result(loss_sum, correct, seen, count, start)


SEEDS_SHOWN = 5  # the first seeds a NonFiniteLossError names


def _non_finite(value: float, batch, epoch: int | None, step: int) -> NonFiniteLossError:  # type: ignore[no-untyped-def]
    n_id = getattr(batch, "n_id", None)
    seeds = [] if n_id is None else [int(v) for v in n_id[: min(int(batch.batch_size), SEEDS_SHOWN)]]
    more = int(batch.batch_size) - len(seeds) if n_id is not None else 0
    where = f"epoch {epoch}, step {step}" if epoch is not None else f"step {step}"
    shown = f"seeds {seeds}" + (f" and {more:,} more" if more > 0 else "") if n_id is not None else "seeds unknown"
    return NonFiniteLossError(f"training loss is {value} at {where} (batch {shown}); stopped before that step changed "
                              "the weights: check the features for NaN/inf (`outre info --verify`) or lower the "
                              "learning rate", epoch=epoch, step=step, seeds=seeds)


def _labelled(model: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[no-untyped-def]
    logits = seed_logits(model, batch)
    target = seed_targets(batch)
    keep = target >= 0
    return logits[keep], target[keep]


def _result(loss_sum: float, correct: int, seen: int, count: int, start: float) -> EpochResult:
    return EpochResult(
        loss=loss_sum / max(seen, 1), accuracy=correct / max(seen, 1),
        seconds=time.perf_counter() - start, batches=count, seeds=seen,
    )
