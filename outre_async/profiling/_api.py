"""``outre_async.profile(...)``: profile a loader setup and write ``profile/<name>/`` (``outre profile``).

The setup the profile is for is the loader's own (:func:`~outre_async.loader._setup.loader_setup` on
the loader's keywords, without caches), so that the seeds, the (partition) plan, the memory plan and
every check are exactly the loader's (a budget below the loader's fixed needs is the loader's
:class:`ConfigError` naming the minimum); then :func:`run_profile` pre-samples its plan, measures the
costs, chooses the split and writes the profile.  Load it with
``OutreLoader(..., memory_budget=B, cache=CacheOptions(profile=name))`` and the same options.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Sequence
from typing import Any

from numpy.typing import ArrayLike

from ..errors import ConfigError
from ..cache._history_config import HistoryConfig
from ..loader._loader import OutreLoader
from ..loader._options import IOOptions
from ..loader._profiling import run_profile
from ..loader._pyg_names import check_transform
from ..loader._setup import loader_config, loader_setup
from ..plan._budget_plan import check_split
from ..plan._costs import MissCosts
from ..store._dataset import Dataset, open_dataset


def profile(dataset: Dataset | str | os.PathLike[str], *, fanouts: Sequence[int], batch_size: int,
            memory_budget: int | str, name: str = "default", split: str | ArrayLike = "train",
            history: HistoryConfig | None = None, cache_split: str | float = "auto", max_batches: int | None = None,
            progress: bool = False, costs: MissCosts | None = None, step_seconds: float | None = None,
            **options: Any) -> dict[str, Any]:
    """Profile the loader ``OutreLoader(dataset, split=, fanouts=, batch_size=, memory_budget=, history=,
    **options)`` would be over its first ``max_batches`` batches (None: one whole epoch) and write
    ``profile/<name>/``; returns the profile's meta (costs, split, predicted epoch time, seconds).
    ``costs`` (a :class:`~outre_async.plan.MissCosts`) skips measuring them; ``step_seconds`` models
    the training step as a fixed wait per batch (``outre bench --step-ms``: the loader-bound regime of
    a GPU, measured on a CPU), in place of the measured step per row."""
    # the loader's own keyword surface (an unknown option is its TypeError), defaults filled in
    values = inspect.signature(OutreLoader.__init__).bind(None, dataset, split=split, fanouts=fanouts,
                                                          batch_size=batch_size, memory_budget=memory_budget,
                                                          **options)
    values.apply_defaults()
    given = values.arguments
    loader_split, cfg = loader_config(**{name: given[name] for name in inspect.signature(loader_config).parameters})
    check_transform(given["transform"])
    ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
    source = given["io"].source if isinstance(given["io"], IOOptions) else None
    setup = loader_setup(ds, cfg, loader_split, source)
    memory = setup.memory_plan(cfg)  # the loader's check: a budget below its fixed needs is refused here
    if cfg.extract_queue is None:  # the depth the loader would run with
        cfg = dataclasses.replace(cfg, extract_queue=memory.extract_queue)
    cfg = dataclasses.replace(cfg, history=history, cache_split=check_split(cache_split), profile=None)
    batches = len(setup.first_plan) if max_batches is None else int(max_batches)
    if step_seconds is not None and not (0 <= step_seconds < float("inf")):
        raise ConfigError(f"step_seconds={step_seconds!r} must be a finite number of seconds >= 0 (or None)")
    prof = run_profile(setup, cfg, name=name, max_batches=max(1, batches), progress=progress, costs=costs,
                       step_seconds=step_seconds)
    return {"path": str(prof.path), **prof.meta}
