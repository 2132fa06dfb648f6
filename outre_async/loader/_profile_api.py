"""``outre_async.profile(...)``: profile a loader setup and write ``profile/<name>/`` (``outre profile``).

The loader the profile is for is built first, without caches, so that the seeds, the (partition)
plan, the memory plan and every check are exactly the loader's (a budget below the loader's fixed
needs is the loader's :class:`ConfigError` naming the minimum); then :func:`run_profile` pre-samples
its plan, measures the costs, chooses the split and writes the profile.  Load it with
``OutreLoader(..., memory_budget=B, profile=name)`` and the same options.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from numpy.typing import ArrayLike

from ..cache._history_config import HistoryConfig
from ..plan._budget_plan import check_split
from ..plan._costs import MissCosts
from ..store._dataset import Dataset, open_dataset
from ._loader import OutreLoader
from ._profiling import run_profile


def profile(dataset: Dataset | str | os.PathLike[str], *, fanouts: Sequence[int], batch_size: int,
            memory_budget: int | str, name: str = "default", split: str | ArrayLike = "train",
            history: HistoryConfig | None = None, cache_split: str | float = "auto", max_batches: int | None = None,
            progress: bool = False, costs: MissCosts | None = None, **options: Any) -> dict[str, Any]:
    """Profile the loader ``OutreLoader(dataset, split=, fanouts=, batch_size=, memory_budget=, history=,
    **options)`` would be over its first ``max_batches`` batches (None: one whole epoch) and write
    ``profile/<name>/``; returns the profile's meta (costs, split, predicted epoch time, seconds).
    ``costs`` (a :class:`~outre_async.plan.MissCosts`) skips measuring them."""
    ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
    bare = OutreLoader(ds, split=split, fanouts=fanouts, batch_size=batch_size, memory_budget=memory_budget,
                       **options)
    cfg = dataclasses.replace(bare.config, history=history, cache_split=check_split(cache_split), profile=None)
    batches = len(bare._plan(0)) if max_batches is None else int(max_batches)
    prof = run_profile(ds, cfg, bare._seeds, bare._partitioned, bare._sizes(), bare._source_kind(), name=name,
                       max_batches=max(1, batches), progress=progress, costs=costs)
    return {"path": str(prof.path), **prof.meta}
