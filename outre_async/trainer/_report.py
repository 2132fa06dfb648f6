"""What ``outre train`` prints besides the loss: which of partitions / history / profile are on (and
with what) before the first epoch, and what each did in every epoch.

Plain functions of :meth:`OutreLoader.stats` dicts, so a run's header and epoch lines say what the
loader really runs with (a profile's split, the history table's size), not what was asked for.
The epoch figures are differences of two ``stats()`` taken around the epoch (the loader's counters
run over its whole life).
"""

from __future__ import annotations

from typing import Any

from .._units import format_bytes
from ._config import TrainConfig


def setup_lines(config: TrainConfig, stats: dict[str, Any], world_size: int) -> list[str]:
    """The header lines under the model line: ranks, memory, partitions, history, profile."""
    lines = []
    if world_size > 1:
        lines.append(f"ranks        {world_size} data-parallel ranks; --batch-size {config.batch_size} is per rank: "
                     f"{world_size * config.batch_size} seeds per step (rank 0 reports)")
    memory = stats.get("memory", {})
    budget, auto = memory.get("budget"), memory.get("budget_auto")  # auto: --memory-budget unset (``_auto_budget``)
    said = auto if auto is not None else "none" if budget is None else format_bytes(budget)
    lines.append(f"memory       budget {said} for the loader (not the model, optimizer or inference), "
                 f"planned {format_bytes(memory.get('planned', 0))}"
                 + (" (this rank's share of the host's)" if world_size > 1 and budget is not None else ""))
    lists = stats.get("neighbor_lists")
    if lists is not None:
        lines.append(f"partitions   on: {lists['partitions']} ({lists['num_parts']} parts, {lists['parts_per_batch']} "
                     f"per macro batch), neighbour cache {format_bytes(lists.get('global_cache_bytes', 0))}")
    else:
        lines.append("partitions   off (random batches; --partitions NAME for partition-based batches)")
    history = stats.get("history")
    if history is not None:
        lines.append(f"history      on: h^(L-1) rows up to {history['staleness']} steps old, admission "
                     f"{history['admission']}, table {format_bytes(history['bytes'])} ({history['slots']:,} slots x {history['dim']}, "
                     f"rows on {history.get('rows_on', 'cpu')})")
    elif "history" in (stats.get("profile") or {}).get("dropped", ()):
        lines.append(dropped_history_line(config, stats["profile"], said))
    else:
        lines.append("history      off (--staleness 1; --staleness S > 1 caches h^(L-1))")
    profile = stats.get("profile")
    if profile is not None:
        split = ", ".join(f"{part} {format_bytes(int(n))}" for part, n in (profile.get("planned_split") or {}).items())
        lines.append(f"profile      on: {profile['name']} ({profile.get('cache_split')}) splits the budget: {split}")
    else:
        lines.append("profile      off (--profile NAME|auto with --memory-budget splits the budget between the caches)")
    return lines


def dropped_history_line(config: TrainConfig, profile: dict[str, Any], budget: str) -> str:
    """The history line when ``--staleness S`` asked for a history and the profile's plan gave it no
    slot: say so and why (a run once said "--staleness 1" after ``--staleness 10 --profile auto``)."""
    left = int(profile.get("cache_budget") or 0)
    slot = profile.get("history_slot_bytes")
    parts = ", ".join(f"{part} {format_bytes(int(n))}" for part, n in (profile.get("planned_split") or {}).items()
                      if int(n) > 0)
    if left <= 0:
        why = "the loader's fixed parts took all of it, none was left for caches"
    elif slot is not None and left < int(slot):
        why = f"a slot needs {format_bytes(int(slot))}, {format_bytes(left)} was left for caches"
    elif not parts:
        why = f"no slot saved time in the {format_bytes(left)} left for caches"
    else:
        rule = "saves more per byte" if profile.get("cache_split") == "auto" else f"by its {profile.get('cache_split')} split"
        why = f"its plan: {parts} of the {format_bytes(left)} left for caches {rule}"
    return (f"history      off: --staleness {config.staleness} asked for it, but the profile {profile['name']} gave it no "
            f"room in {budget} ({why}); raise --memory-budget, or pass --staleness 1 to silence this")


def epoch_cache_stats(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """This epoch's history and profile figures (plain numbers: they go into metrics.json and last.pt)."""
    out: dict[str, Any] = {}
    hb, ha = before.get("history"), after.get("history")
    if ha is not None and hb is not None:
        ages = {int(age): n - int(hb["realised_staleness"].get(age, 0)) for age, n in ha["realised_staleness"].items()}
        out["history"] = {key: int(ha[key]) - int(hb[key]) for key in ("pulled", "pushed", "offered", "batches")}
        out["history"]["max_age"] = max((age for age, n in ages.items() if n > 0), default=0)
    pa = after.get("profile")
    if pa is not None:
        out["profile"] = {
            "static_hit_rate": _rate(before.get("profile", {}).get("static_cache"), pa.get("static_cache"), "hits", "lookups"),
            "buffer_hit_rate": _rate(before.get("buffer"), after.get("buffer"), "hits", "rows"),
        }
        la, lb = after.get("neighbor_lists"), before.get("neighbor_lists") or {}
        if la is not None:
            got = {k: int(la[k]) - int(lb.get(k, 0)) for k in ("lists_from_global_cache", "lists_from_macro_batch", "lists_from_disk")}
            out["profile"]["neighbor_cache_hit_rate"] = got["lists_from_global_cache"] / max(sum(got.values()), 1)
    return out


def _rate(before: dict[str, Any] | None, after: dict[str, Any] | None, hits: str, total: str) -> float:
    if after is None:
        return 0.0
    b = before or {}
    n = int(after.get(total, 0)) - int(b.get(total, 0))
    return (int(after.get(hits, 0)) - int(b.get(hits, 0))) / n if n > 0 else 0.0


def cache_lines(row: dict[str, Any]) -> list[str]:
    """The lines under an epoch's row when history or a profile is on."""
    lines = []
    h = row.get("history")
    if h is not None:
        lines.append(f"      history: pulled {h['pulled']:,} rows of h^(L-1) in {h['batches']:,} batches "
                     f"(oldest {h['max_age']} steps), pushed {h['pushed']:,} of {h['offered']:,} offered")
    p = row.get("profile")
    if p is not None:
        lines.append(f"      profile: static feature cache hit rate {p['static_hit_rate']:.1%}, feature buffer "
                     f"{p['buffer_hit_rate']:.1%}" + (f", neighbour cache {p['neighbor_cache_hit_rate']:.1%}"
                                                       if "neighbor_cache_hit_rate" in p else ""))
    return lines


ACCURACY_DIGITS = 4  # what `outre train` shows of an accuracy: a hundredth of a point
SECONDS_DIGITS = 2   # and of a time: hundredths of a second
RAW = ("config", "loader_stats")  # the options as given, the loader's counters as it reports them


def rounded(result: dict[str, Any]) -> dict[str, Any]:
    """``outre train``'s result as ``--json`` prints it: every ``*_accuracy`` (and a link run's ``*_mrr``, ``*_auc``, ``*_hits@K``) to ``ACCURACY_DIGITS``
    decimals and every ``*_seconds`` to ``SECONDS_DIGITS``, in ``best``, each epoch row and the top
    level.  Why only here: ``metrics.json``, the checkpoints and :func:`run_train`'s own result keep
    every digit (a later comparison or plot should not inherit the display's rounding)."""
    return {k: v if k in RAW else _rounded(k, v) for k, v in result.items()}


def _rounded(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(key, v) for v in value]
    if isinstance(value, float) and (key.endswith(("_accuracy", "_mrr", "_auc")) or "_hits@" in key):
        return round(value, ACCURACY_DIGITS)
    if isinstance(value, float) and key.endswith("_seconds"):
        return round(value, SECONDS_DIGITS)
    return value


def accuracy_text(value: float | None) -> str:
    """An accuracy in a printed line: ``ACCURACY_DIGITS`` decimals, or "none" (no split to measure on)."""
    return "none" if value is None else f"{value:.{ACCURACY_DIGITS}f}"
