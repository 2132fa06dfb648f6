"""What ``outre generate`` builds: :class:`GeneratorConfig`, its validation and the named
:data:`PRESETS`.  The model these fields steer, and the chunk loop that streams it, are in
``_generate``; the configuration reads on its own, so it lives apart.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..store._manifest import FEATURE_ENCODINGS

__all__ = ["MIN_COMMUNITY_SIZE", "PRESETS", "GeneratorConfig", "resolve_config"]

MIN_COMMUNITY_SIZE = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class GeneratorConfig:
    """The shape of a synthetic graph; ``_generate``'s module docstring describes the model.

    ``avg_degree`` is the mean in-degree (the realised mean is within a few percent: hubs in small
    communities may run out of distinct sources).  ``mixing_intra`` is the chance that a source is
    drawn from the node's own community; the realised intra-community fraction of edges is a few
    points lower, because hubs whose community is too small for their intra share take the rest
    from other communities.  ``feature_noise`` is the noise standard deviation per dimension
    against centroids √2 apart.  Nodes outside the splits are labelled too; no split uses them.
    """

    name: str = "custom"
    num_nodes: int = 2_000
    avg_degree: float = 10.0
    max_degree: int = 200
    degree_exponent: float = 2.5
    num_communities: int = 32
    mixing_intra: float = 0.85
    num_classes: int = 8
    feature_dim: int = 32
    feature_dtype: str = "float32"
    feature_noise: float = 1.0
    train_fraction: float = 0.5
    val_fraction: float = 0.2
    test_fraction: float = 0.3
    shuffle_ids: bool = True

    def __post_init__(self) -> None:
        _check_types(self)
        _check_sizes(self)
        _check_model(self)

    def as_dict(self) -> dict[str, Any]:
        """Field values by name (what the dataset's ``meta["generator"]`` records)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


_INT_FIELDS = ("num_nodes", "max_degree", "num_communities", "num_classes", "feature_dim")
_FLOAT_FIELDS = ("avg_degree", "degree_exponent", "mixing_intra", "feature_noise",
                 "train_fraction", "val_fraction", "test_fraction")


def _check_types(c: GeneratorConfig) -> None:
    for name in _INT_FIELDS:
        value = getattr(c, name)
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ConfigError(f"{name}={value!r} must be an integer")
    for name in _FLOAT_FIELDS:
        value = getattr(c, name)
        if isinstance(value, bool) or not isinstance(value, int | float | np.number) \
                or not math.isfinite(value):
            raise ConfigError(f"{name}={value!r} must be a finite number")
    if not isinstance(c.name, str) or not c.name:
        raise ConfigError(f"name={c.name!r} must be a non-empty string")
    if c.feature_dtype not in FEATURE_ENCODINGS:
        raise ConfigError(f"feature_dtype={c.feature_dtype!r} must be one of {sorted(FEATURE_ENCODINGS)}")
    if not isinstance(c.shuffle_ids, bool | np.bool_):
        raise ConfigError(f"shuffle_ids={c.shuffle_ids!r} must be True or False")


def _check_sizes(c: GeneratorConfig) -> None:
    n, k = c.num_nodes, c.num_communities
    if n < 2:
        raise ConfigError(f"num_nodes={n} must be >= 2")
    if not 1 <= k <= n // MIN_COMMUNITY_SIZE:
        raise ConfigError(f"num_communities={k} must be in [1, num_nodes // 2 = {n // 2}]")
    if not 2 <= c.num_classes <= k:
        raise ConfigError(f"num_classes={c.num_classes} must be in [2, num_communities={k}] "
                          "(a class is a union of communities); raise num_communities")
    if c.max_degree < 1:
        raise ConfigError(f"max_degree={c.max_degree} must be >= 1")
    ceiling = min(c.max_degree, n - 1)
    if not 0 < c.avg_degree < ceiling:
        raise ConfigError(f"avg_degree={c.avg_degree} must be in (0, {ceiling}): below "
                          "max_degree and num_nodes - 1")
    if c.feature_dim < 0:
        raise ConfigError(f"feature_dim={c.feature_dim} must be >= 0 (0 = topology only)")


def _check_model(c: GeneratorConfig) -> None:
    if not 1.0 < c.degree_exponent <= 5.0:
        raise ConfigError(f"degree_exponent={c.degree_exponent} must be in (1, 5]; "
                          "real graphs have 2 to 3")
    if not 0.0 <= c.mixing_intra <= 1.0:
        raise ConfigError(f"mixing_intra={c.mixing_intra} must be a probability in [0, 1]")
    if c.feature_noise < 0:
        raise ConfigError(f"feature_noise={c.feature_noise} must be >= 0")
    fractions = (c.train_fraction, c.val_fraction, c.test_fraction)
    if min(fractions) < 0 or sum(fractions) > 1.0 + 1e-9:
        raise ConfigError(f"train_fraction={c.train_fraction}, val_fraction={c.val_fraction}, "
                          f"test_fraction={c.test_fraction} must be >= 0 and sum to at most 1")


PRESETS: dict[str, GeneratorConfig] = {
    # Tests and `outre quickstart --preset tiny`: milliseconds to generate once compiled.
    "tiny": GeneratorConfig(
        name="tiny", num_nodes=2_000, avg_degree=10.0, max_degree=200, degree_exponent=2.5,
        num_communities=32, mixing_intra=0.85, num_classes=8, feature_dim=32, feature_noise=1.0,
        train_fraction=0.5, val_fraction=0.2, test_fraction=0.3,
    ),
    # `outre quickstart`: a 2-layer GraphSAGE clearly beats an MLP, in seconds per epoch.
    "quickstart": GeneratorConfig(
        name="quickstart", num_nodes=30_000, avg_degree=15.0, max_degree=1_000,
        degree_exponent=2.4, num_communities=200, mixing_intra=0.85, num_classes=10,
        feature_dim=64, feature_noise=1.0, train_fraction=0.3, val_fraction=0.1,
        test_fraction=0.2,
    ),
    # ogbn-products (2.45M nodes, 61.9M undirected edges, 100-dim, 47 classes, 8 % train) at
    # 0.4x the nodes and about the same in-degree per node.
    "products-like": GeneratorConfig(
        name="products-like", num_nodes=1_000_000, avg_degree=25.0, max_degree=10_000,
        degree_exponent=2.3, num_communities=2_000, mixing_intra=0.8, num_classes=47,
        feature_dim=100, feature_noise=0.5, train_fraction=0.10, val_fraction=0.02,
        test_fraction=0.20,
    ),
    # ogbn-papers100M (111M nodes, 1.6B edges, 128-dim, 172 classes, 1.1 % train) at 1/14 of
    # the nodes: still 4 GiB of features, so out of core on a small machine.
    "papers-like": GeneratorConfig(
        name="papers-like", num_nodes=8_000_000, avg_degree=15.0, max_degree=20_000,
        degree_exponent=2.2, num_communities=8_000, mixing_intra=0.75, num_classes=172,
        feature_dim=128, feature_noise=0.4, train_fraction=0.02, val_fraction=0.002,
        test_fraction=0.004,
    ),
    # IGB-small (IGB homogeneous: 1M nodes, 12M edges, 1024-dim, 19 classes) at full size: 4 GiB
    # of features for a small graph, the feature-I/O-bound case.  IGB's loader trains on 60 %;
    # 10 % here keeps an epoch short.
    "igb-like": GeneratorConfig(
        name="igb-like", num_nodes=1_000_000, avg_degree=12.0, max_degree=5_000,
        degree_exponent=2.4, num_communities=1_000, mixing_intra=0.8, num_classes=19,
        feature_dim=1024, feature_noise=0.6, train_fraction=0.10, val_fraction=0.05,
        test_fraction=0.05,
    ),
}


def resolve_config(config: GeneratorConfig | str, overrides: dict[str, Any]) -> GeneratorConfig:
    """A preset name or a config, with ``overrides`` replacing fields (validated again)."""
    if isinstance(config, str):
        if config not in PRESETS:
            raise ConfigError(f"unknown preset {config!r}; choose one of: {', '.join(PRESETS)}")
        config = PRESETS[config]
    elif not isinstance(config, GeneratorConfig):
        raise ConfigError("config must be a preset name or a GeneratorConfig, "
                          f"got {type(config).__name__}")
    names = [f.name for f in dataclasses.fields(GeneratorConfig)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ConfigError(f"unknown generator option(s) {unknown}; the options are: "
                          f"{', '.join(names)}")
    return dataclasses.replace(config, **overrides) if overrides else config
