"""Tiers by name (:data:`~outre_async.features._tier.TIERS`): :func:`make_tier` stacks the one called
``name`` over its fallback.  Apart from the contract (``_tier``) because it names every tier, and the
static and GPU tiers import the contract."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ._gpu_tier import GpuTier
from ._source import FeatureSource
from ._static_cache import StaticTier
from ._tier import TIERS, BufferTier, FeatureTier, SourceTier


def make_tier(name: str, fallback: FeatureTier | FeatureSource, **opts: Any) -> FeatureTier:
    """The tier called ``name`` over ``fallback`` (a source becomes a :class:`SourceTier` first);
    ``opts`` are the tier's own arguments (``source``: none; ``buffer``: ``buffer=``, ``piece_rows=``;
    ``static``: ``cache=``; ``gpu``: ``cache=``)."""
    if name == "source":
        if opts or not isinstance(fallback, FeatureSource):
            raise ConfigError(f"the source tier wraps a FeatureSource and takes no options, got "
                              f"{type(fallback).__name__} and {sorted(opts)}")
        return SourceTier(fallback)
    if isinstance(fallback, FeatureSource):
        fallback = SourceTier(fallback)
    if name == "buffer":
        return BufferTier(fallback, **opts)
    if name == "static":
        return StaticTier(fallback, **opts)
    if name == "gpu":
        return GpuTier(fallback, **opts)
    raise ConfigError(f"tier {name!r} must be one of {TIERS}")
