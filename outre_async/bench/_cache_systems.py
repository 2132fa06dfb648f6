"""The bench's systems with the historical embedding cache: ``outre-hist`` (partitions + history) and
``outre-auto`` (the same with the memory budget split by a profile).  Registered when ``outre_async.bench``
is imported (its ``__init__`` imports this module), like the systems of ``_systems``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._systems import OutrePart, RunSpec, _partition_name, disk_grid, register_system


@register_system
class OutreHist(OutrePart):
    """``outre-part`` plus the historical embedding cache (OUTRE §4.3): ``staleness`` (default 100)
    and ``history_budget`` (bytes; default: every profiled candidate) from the preset's options; the
    table is taken out of the same ``memory_budget``."""

    name = "outre-hist"
    summary = "outre-part with the historical embedding cache (pruned sampling, pulled h^(L-1))"

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..loader import OutreLoader
        from ..loader._options import group_knobs

        history = history_config(spec)
        self.loader = OutreLoader(ds, **group_knobs(dict(
            split="train", fanouts=list(spec.fanouts), batch_size=spec.batch_size, seed=spec.seed,
            partitions=_partition_name(spec), memory_budget=spec.options.get("memory_budget"),
            parts_per_batch=int(spec.options.get("parts_per_batch", 4)),
            neighbor_cache=int(spec.options.get("neighbor_cache", 64 << 20)), history=history, device=spec.device,
            **disk_grid(ds, spec), **self.loader_options)))
        return iter(self.loader)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["extra"]["history"] = self.loader.stats().get("history")
        return out


def history_config(spec: RunSpec) -> Any:
    """The history of ``outre-hist`` / ``outre-auto`` from the preset's options: ``staleness``
    (default 100), ``history_budget`` (bytes; default every candidate), ``warmup`` (default: the
    library's, ``staleness`` steps), ``jitter`` and ``admission`` (default: the library's).

    Why the presets set ``warmup=0``: the bench times one epoch, and the default warm-up (no pulls for
    the first ``staleness`` steps) would cover 100 of igb-like's 223 steps: the figure would be mostly
    the warm-up, which a real run of many epochs pays once.  Warm-up 0 times the steady state."""
    from ..cache import HistoryConfig

    opts = spec.options
    extra = {k: opts[k] for k in ("warmup", "jitter", "admission") if k in opts}
    return HistoryConfig(staleness=int(opts.get("staleness", 100)), dim=spec.hidden,
                         budget=opts.get("history_budget"), **extra)


@register_system
class OutreAuto(OutrePart):
    """``outre-part`` plus the history, with the memory budget split by a profile (``plan``):
    ``prepare`` (in the harness, untimed, like the partitioning) profiles the child's exact loader
    setup into ``profile/bench-auto-<split>/`` and reports how long it took; the child loads with
    ``profile=`` that name.  Options: those of ``outre-hist`` plus ``cache_split`` ("auto", "outre"
    or an alpha), ``profile_batches`` (default: one epoch) and ``ordered`` (default: with
    ``--max-batches``, as ``outre-part``; ordered mode's reorder buffer comes out of the budget)."""

    name = "outre-auto"
    summary = "outre-part + history with the budget split by profiling (static rows, history, neighbour lists)"

    def prepare(self, dataset_dir: str, spec: RunSpec) -> dict[str, Any]:
        import time

        from ..loader import profile
        from ..loader._options import group_knobs
        from ..store._dataset import open_dataset

        out = super().prepare(dataset_dir, spec)
        start = time.perf_counter()
        # --step-ms: the step the child runs is a fixed wait, and the plan and its prediction model that
        ds = open_dataset(dataset_dir)
        meta = profile(ds, name=self._profile_name(spec), max_batches=spec.options.get(
            "profile_batches"), cache_split=self._split(spec), step_seconds=spec.step_ms / 1e3 if spec.step_ms > 0 else None,
            **group_knobs(dict(**self._options(spec), **disk_grid(ds, spec))))
        out.update(profile=meta["path"], profile_seconds=time.perf_counter() - start,
                   predicted_epoch_seconds=meta["predicted"]["epoch_seconds"], split=meta["memory"]["split"],
                   alpha=meta.get("alpha"))
        return out

    def open(self, ds: Any, spec: RunSpec) -> Iterator[Any]:
        from ..loader import OutreLoader
        from ..loader._options import group_knobs

        # opened here, in the untimed setup: the static feature cache is read once per run, not per epoch
        self.loader = OutreLoader(ds, **group_knobs(dict(profile=self._profile_name(spec), **self._options(spec),
                                                         **disk_grid(ds, spec)))).start()
        return iter(self.loader)

    def _options(self, spec: RunSpec) -> dict[str, Any]:
        return {"split": "train", "fanouts": list(spec.fanouts), "batch_size": spec.batch_size, "seed": spec.seed,
                "partitions": _partition_name(spec), "memory_budget": spec.options.get("memory_budget", "1GiB"),
                "parts_per_batch": int(spec.options.get("parts_per_batch", 4)),
                "ordered": bool(spec.options.get("ordered", spec.max_batches > 0)),
                "history": history_config(spec), "device": spec.device,
                **self.loader_options}

    @staticmethod
    def _split(spec: RunSpec) -> str | float:
        split = spec.options.get("cache_split", "auto")
        return split if split in ("auto", "outre") else float(split)

    def _profile_name(self, spec: RunSpec) -> str:
        return f"bench-auto-{self._split(spec)}"

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        s = self.loader.stats()
        out["extra"]["history"] = s.get("history")
        out["extra"]["profile"] = s.get("profile")  # rows_from_cache counts the static tier's hits already
        return out
