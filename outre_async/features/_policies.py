"""Eviction policies of dynamic tiers, by name (the feature buffer's, ``_feature_buffer``; ``_tier``).

``EVICTION_POLICIES`` holds what is built; ``PLANNED_POLICIES`` names what is planned, so that asking
for one says so instead of "unknown" (none at the moment: next-use is built).
"""

from __future__ import annotations

from typing import Literal

from ..errors import ConfigError

EvictionPolicy = Literal["lru-lookahead", "next-use"]
EVICTION_POLICIES: dict[str, str] = {
    "lru-lookahead": "least recently released slot first; rows of batches beyond the queue (foresight) after "
                     "those, rows of queued batches (look-ahead pins) last",
    "next-use": "the row whose next use (first queued batch needing it) is furthest; rows no queued batch "
                "needs first, least recently released first (Belady within the window, LRU beyond)",
}
PLANNED_POLICIES: dict[str, str] = {}


def check_policy(policy: object) -> str:
    """``policy`` if it is a built eviction policy, else a :class:`ConfigError` naming the choices."""
    if isinstance(policy, str) and policy in EVICTION_POLICIES:
        return policy
    planned = f" ({policy!r} is planned, not built yet)" if isinstance(policy, str) and policy in PLANNED_POLICIES else ""
    raise ConfigError(f"eviction policy={policy!r} must be one of {tuple(EVICTION_POLICIES)}{planned}")
