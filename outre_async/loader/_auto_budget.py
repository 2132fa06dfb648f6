"""``memory_budget=None``: the default budget, sized from the dataset and the machine.

Why: no budget would mean no cap, every part at its default size whatever the machine has, so a
small feature file could plan several times its own size in staging arenas and a deep extract
queue (``tests/loader/test_auto_budget.py``).  The loader plans within::

    auto = max(floor, min(dataset, machine))
    dataset = (floor + features + batches) / (1 - 0.06) + over
    machine = AUTO_SHARE x available / ranks on this host

``over`` is what the plan at that size was found to give other parts past the floor's (staging
arenas grow with the budget where staging is the read path, ``_budget``): the rule is planned again
with it added, at most ``ROUNDS`` times, until the buffer holds every row and the pool its default.
``floor`` is the smallest budget the loader fits in (``_budget.plan_memory_floor``: a few buffer rows,
2.2 expected batches, the least staging, the fixed parts); ``features`` is what holding every row of
the feature file once in the buffer adds to the floor's rows (``f + 40`` bytes a row, ``f`` the held row bytes:
the slot's bookkeeping); ``batches`` is what the batch pool's default (every batch in flight at the
expected size, ``_budget.default_pool``) adds to the floor's 2.2 batches; the ``0.06`` is the share of
any budget the plan may give a deeper extract queue (4 %) and io_uring bounce pages (2 %), so those
do not come out of the buffer.  ``machine`` leaves the other 3/4 of the memory available now
(``_units.available_memory``, cgroup-aware) to the model, the optimizer, PyTorch, layer-wise inference
and the page cache: the budget covers the loader only.

:func:`auto_budget` is the pure rule (numbers in, numbers out, unit-tested with numbers);
:func:`with_default_budget` reads those numbers off a :class:`LoaderSetup` and returns the setup with
its budget set, so the plan (``_budget``) is the one an explicit ``memory_budget`` of that size gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .._units import format_bytes
from ._budget import (BOUNCE_SHARE, LOOKAHEAD_SHARE, MIN_BATCHES, MIN_ROWS_PER_EXTRACTOR,
                      default_pool, expected_batch_bytes, plan_memory, plan_memory_floor)
from ._config import LoaderConfig

if TYPE_CHECKING:
    from ._setup import LoaderSetup

AUTO_SHARE = 0.25  # of the memory available now: the rest is the model's, PyTorch's and the page cache's
PLAN_SHARES = LOOKAHEAD_SHARE + BOUNCE_SHARE  # what a budgeted plan may spend past the floor's parts
ROUNDS = 3  # plans tried at most to find what the dataset can use (``with_default_budget``)


@dataclass(frozen=True, kw_only=True, slots=True)
class AutoBudget:
    """The default budget in bytes and why it is that size (``repr(loader)``, ``outre train``'s header)."""

    bytes: int
    why: str

    def describe(self) -> str:
        return f"auto ({format_bytes(self.bytes)}: {self.why})"


def auto_budget(*, floor: int, features: int, batches: int, available: int, ranks: int = 1, over: int = 0) -> AutoBudget:
    """The rule of the module: what the dataset can use, at most ``AUTO_SHARE`` of ``available`` (split
    over ``ranks`` on this host), never below ``floor``; ``over``: what a plan at this size was found
    to give other parts than the buffer and the pool past the floor's (``with_default_budget``)."""
    dataset = math.ceil((floor + features + batches) / (1 - PLAN_SHARES)) + over
    machine = int(AUTO_SHARE * available) // max(1, ranks)
    if floor >= min(dataset, machine):
        return AutoBudget(bytes=floor, why=f"the loader's minimum; {_machine_why(machine, available, ranks)} is less")
    if dataset <= machine:
        return AutoBudget(bytes=dataset, why=f"what the dataset can use (its features once, the batches in flight), "
                          f"within {_machine_why(machine, available, ranks)}")
    return AutoBudget(bytes=machine, why=f"{_machine_why(machine, available, ranks)}; the dataset could use "
                      f"{format_bytes(dataset)}")


def _machine_why(machine: int, available: int, ranks: int) -> str:
    share = f"1/{round(1 / AUTO_SHARE)} of the {format_bytes(available)} available"
    return f"{share} ({format_bytes(machine)}{f' over {ranks} ranks' if ranks > 1 else ''})"


def with_default_budget(setup: LoaderSetup, cfg: LoaderConfig, extra: dict[str, int] | None,
                        available: int) -> tuple[LoaderSetup, AutoBudget]:
    """``setup`` with :func:`auto_budget` as its budget, for ``cfg`` (the config the loader runs with)
    and the parts other owners size (``extra``: the history table, ...)."""
    sizes = setup.sizes
    floor = plan_memory_floor(cfg, sizes, source=setup.source_kind, extra=extra or None)
    slot = sizes.slot_bytes  # one buffer row: its held bytes and bookkeeping
    floor_rows = min(sizes.num_nodes, MIN_ROWS_PER_EXTRACTOR * cfg.num_extractors)
    features = (sizes.num_nodes - floor_rows) * slot if cfg.buffer_rows is None else 0
    batches = max(0, default_pool(cfg, sizes) - math.ceil(MIN_BATCHES * expected_batch_bytes(cfg, sizes)))
    rows = sizes.num_nodes if cfg.buffer_rows is None else min(cfg.buffer_rows, sizes.num_nodes)
    args = {"floor": floor, "features": features, "batches": batches, "available": available,
            "ranks": setup.place.local_world_size or 1}
    auto, over = auto_budget(**args), 0
    for _ in range(ROUNDS):  # the plan's staging grows with its budget where staging is the read path
        plan = plan_memory(replace(cfg, memory_budget=auto.bytes), sizes, source=setup.source_kind, extra=extra or None)
        short = (rows - plan.buffer_rows) * slot + max(0, default_pool(cfg, sizes) - plan.batch_bytes)
        if short <= 0 or auto.bytes < math.ceil((floor + features + batches) / (1 - PLAN_SHARES)) + over:
            break  # the dataset's all fits, or the machine's share (or the floor) bounds the budget anyway
        over += short
        auto = auto_budget(**args, over=over)
    return replace(setup, budget=auto.bytes), auto
