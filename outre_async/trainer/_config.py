"""``TrainConfig``: what ``outre train`` trains and how, validated once (errors name the value)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from ..machine._device import check_device_name

MODELS = ("sage", "gcn", "gat")
TASKS = ("node", "link")
DECODERS = ("dot", "mlp")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    model: str = "sage"
    layers: int = 2
    hidden: int = 128
    heads: int = 4  # GAT only
    dropout: float = 0.5
    fanouts: tuple[int, ...] = (10, 10)
    batch_size: int = 512
    epochs: int = 10
    lr: float = 0.01
    weight_decay: float = 0.0
    seed: int = 0
    partitions: str | None = None
    staleness: int = 1  # > 1: historical embedding cache
    memory_budget: int | None = None
    backend: str = "auto"
    deterministic: bool = False  # plan order (ordered=True): a seed gives the same run twice
    eval_every: int = 1  # layer-wise inference every N epochs (and after the last)
    profile: str | None = None  # profile/<name>/ splitting memory_budget (`outre profile`), or "auto"
    device: str = "auto"  # auto (CUDA when present), cpu, cuda, cuda:N; a data-parallel rank uses its own
    checkpoint_every: int | None = None  # also replace last.pt every N training batches (None: at epoch ends only)
    task: str = "node"  # node classification, or link prediction (trainer/_link)
    decoder: str = "dot"  # link: the pair scorer
    neg_amount: float = 1.0  # link: uniform binary negatives per training pair
    candidates: int = 100  # link: each val/test pair ranked against this many (evaluate_links)

    def __post_init__(self) -> None:
        if self.task not in TASKS or self.decoder not in DECODERS:
            raise ConfigError(f"--task must be one of {', '.join(TASKS)} and --decoder one of {', '.join(DECODERS)}, "
                              f"got {self.task!r} and {self.decoder!r}")
        if not math.isfinite(self.neg_amount) or self.neg_amount <= 0 or self.candidates < 1:
            raise ConfigError(f"--neg-amount must be > 0 and --candidates >= 1, got {self.neg_amount!r} and {self.candidates!r}")
        if self.task == "link":
            self._check_link()
        if self.model not in MODELS:
            raise ConfigError(f"--model must be one of {', '.join(MODELS)}, got {self.model!r}")
        for name in ("layers", "hidden", "heads", "batch_size", "epochs", "staleness", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        from .._rng import check_seed  # here, not at import: _rng compiles numba kernels, the CLI parser reads MODELS

        object.__setattr__(self, "seed", check_seed(self.seed))
        for name in ("lr", "weight_decay", "dropout"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0 or (name == "lr" and v == 0) or (name == "dropout" and v >= 1):
                raise ConfigError(f"{name} out of range: {v!r} (lr > 0, weight_decay >= 0, 0 <= dropout < 1)")
        from ..sampling._sampler import check_fanouts  # here, not at import: the CLI parser reads MODELS

        object.__setattr__(self, "fanouts", check_fanouts(self.fanouts))
        if len(self.fanouts) != self.layers:
            raise ConfigError(f"--fanouts lists {len(self.fanouts)} hops but --layers is {self.layers}; "
                              "give one fanout per layer")
        if self.model == "gat" and self.hidden % self.heads:
            raise ConfigError(f"--model gat needs --hidden divisible by --heads: {self.hidden=} {self.heads=}")
        if self.checkpoint_every is not None and self.checkpoint_every < 1:
            raise ConfigError(f"--checkpoint-every must be >= 1 batches, got {self.checkpoint_every}")
        if self.profile is not None and self.memory_budget is None:
            raise ConfigError(f"--profile {self.profile} splits --memory-budget between the caches; pass --memory-budget too")
        check_device_name(self.device, "--device")
        if self.staleness > 1 and self.layers < 2:
            raise ConfigError("--staleness needs at least two layers (the cache holds h^(L-1))")

    def _check_link(self) -> None:
        """What edge batches do not run with yet (the loader's plain mode only), named before anything starts."""
        from ..errors import NotSupportedError

        for flag, given in (("--partitions", self.partitions is not None), ("--staleness", self.staleness > 1),
                            ("--profile", self.profile is not None)):
            if given:
                raise NotSupportedError(f"--task link with {flag} is not supported yet: edge batches run in plain "
                                        f"mode only; leave {flag} out")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fanouts"] = list(self.fanouts)
        return d

    # what a checkpoint must agree on to be resumed (the rest may change between runs, e.g. --epochs)
    SHAPE = ("task", "decoder", "model", "layers", "hidden", "heads")
    # what decides the run a checkpoint continues: another value is refused unless --resume --force
    RESUMED = ("fanouts", "batch_size", "lr", "weight_decay", "dropout", "seed", "partitions", "staleness",
               "deterministic", "neg_amount")

    @classmethod
    def saved(cls, config: dict[str, Any], key: str) -> Any:
        """``key`` of a checkpoint's config, or the default for a key older checkpoints lack (``task``)."""
        return config.get(key, cls.__dataclass_fields__[key].default)
