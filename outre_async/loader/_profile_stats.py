"""``loader.stats()["profile"]``: the plan in use, the split it realised and each cache's hit rate.

The realised split is what the loader holds (bytes of the memory plan's parts: feature buffer,
static feature cache, history table, neighbour cache), beside the split the profile planned; hit
rates are per cache: the static cache and the feature buffer per row looked up, the neighbour cache
per list sampled; the history reports the rows it served (pulled).
"""

from __future__ import annotations

from typing import Any


def profile_stats(info: dict[str, Any], out: dict[str, Any], static: Any) -> dict[str, Any]:
    memory = out.get("memory", {})
    realised = {part: int(memory.get(part, 0)) for part in
                ("feature buffer", "static feature cache", "history table", "neighbor cache")}
    lists = out.get("neighbor_lists") or {}
    history = out.get("history") or {}
    buffer = out.get("buffer") or {}
    hit_rates = {
        "static_features": static.stats()["hit_rate"] if static is not None else 0.0,
        "feature_buffer": float(buffer.get("hit_rate", 0.0)),
        "neighbor_cache": float(lists.get("global_cache_hit_rate", 0.0)),
        "history_pulled_rows": int(history.get("pulled", 0)),
    }
    return {**info, "realised_split": realised, "hit_rates": hit_rates,
            "static_cache": static.stats() if static is not None else None}
