"""Eviction policies of dynamic tiers, by name (the feature buffer's today; ``_tier``).

``EVICTION_POLICIES`` holds what is built; ``PLANNED_POLICIES`` names what is planned (the I/O
issue's next-use policy) so that asking for it says so instead of "unknown".
"""

from __future__ import annotations

from typing import Literal

from .._errors import ConfigError

EvictionPolicy = Literal["lru-lookahead"]
EVICTION_POLICIES: dict[str, str] = {
    "lru-lookahead": "least recently released slot first; rows of queued batches (look-ahead pins) evicted last",
}
PLANNED_POLICIES: dict[str, str] = {
    "next-use": "the row needed furthest ahead in the window of planned batches (Belady), the I/O issue's",
}


def check_policy(policy: object) -> str:
    """``policy`` if it is a built eviction policy, else a :class:`ConfigError` naming the choices."""
    if isinstance(policy, str) and policy in EVICTION_POLICIES:
        return policy
    planned = f" ({policy!r} is planned, not built yet)" if isinstance(policy, str) and policy in PLANNED_POLICIES else ""
    raise ConfigError(f"eviction policy={policy!r} must be one of {tuple(EVICTION_POLICIES)}{planned}")
