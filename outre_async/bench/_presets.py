"""Benchmark presets: one dataset shape plus the model, fanouts, batch size and memory cap run on it.

Every system of a suite trains the same GraphSAGE on the same dataset with the same fanouts, batch
size, seed and cap, so only the loader differs.  The caps sit well below the feature bytes (the point
of an out-of-core benchmark) and above every system's own working set: torch + PyG + numba (the
interpreter's baseline, which a child reports), plus for ``pyg-mmap`` the int64 copy of the topology
that PyG's sampler needs (8 B per edge), and for ``outre`` its ``memory_budget`` (every part the
loader allocates: the feature buffer gets what the other parts leave, ``loader._budget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

GiB = 1 << 30


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchPreset:
    """What a suite runs: a generator preset (+ overrides) and the training setup on it."""

    name: str
    dataset: str                      # `outre generate` preset
    overrides: dict[str, Any] = field(default_factory=dict)
    fanouts: tuple[int, ...]
    batch_size: int
    hidden: int
    lr: float = 0.003
    cap_bytes: int                    # default memory cap of every child
    timeout_s: float                  # per run (one child)
    quick_max_batches: int            # `--quick`: batches per run
    system_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per system, e.g. partitions
    note: str = ""

    def __post_init__(self) -> None:
        if not self.fanouts or any(f < 1 for f in self.fanouts):
            raise ConfigError(f"fanouts={list(self.fanouts)} must be positive ints")
        for name in ("batch_size", "hidden", "cap_bytes", "quick_max_batches"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")


BENCH_PRESETS: dict[str, BenchPreset] = {
    # CI smoke runs of the harness: 2,000 nodes, 32-dim; the cap only has to hold torch.
    "tiny": BenchPreset(
        name="tiny", dataset="tiny", fanouts=(5, 5), batch_size=64, hidden=32, lr=0.01,
        cap_bytes=2 * GiB, timeout_s=300, quick_max_batches=4,
        system_options={"outre-part": {"parts": 16, "parts_per_batch": 2, "neighbor_cache": 1 << 20},
                        "outre-hist": {"parts": 16, "parts_per_batch": 2, "neighbor_cache": 1 << 20,
                                       "staleness": 100},
                        "outre-auto": {"parts": 16, "parts_per_batch": 2, "memory_budget": "16MiB", "staleness": 100}},
        note="harness smoke test; everything fits in RAM",
    ),
    # 1M nodes, 12M edges, 1024-dim float32 = 3.8 GiB of features: the feature-I/O-bound case.
    "igb-like": BenchPreset(
        name="igb-like", dataset="igb-like", fanouts=(10, 5), batch_size=512, hidden=128,
        cap_bytes=int(2.5 * GiB), timeout_s=3600, quick_max_batches=10,
        # ~390 train seeds per part: a macro batch of 8 parts is ~6 batches of 512
        # memory_budget covers everything the loader allocates; beyond it the run holds torch, the model
        # and the interpreter, so 1.6 GiB leaves the cap room for them (a child's peak RSS is in its result)
        system_options={"outre": {"memory_budget": "1.6GiB"},
                        "outre-part": {"parts": 256, "parts_per_batch": 8, "neighbor_cache": 64 << 20,
                                       "memory_budget": "1.6GiB"},
                        "outre-hist": {"parts": 256, "parts_per_batch": 8, "neighbor_cache": 64 << 20,
                                       "memory_budget": "1.6GiB", "staleness": 100, "warmup": 0},
                        "outre-auto": {"parts": 256, "parts_per_batch": 8, "memory_budget": "1.6GiB", "staleness": 100,
                                       "warmup": 0}},
        note="I/O-bound: 4 KiB rows, small model; cap = 65% of the feature bytes (a much lower cap makes "
             "pyg-mmap-random thrash the page cache)",
    ),
    # 8M nodes, 120M edges, 128-dim float32 = 3.8 GiB of features + 0.45 GiB of topology.
    "papers-like": BenchPreset(
        name="papers-like", dataset="papers-like", fanouts=(10, 10), batch_size=1024, hidden=256,
        cap_bytes=3 * GiB, timeout_s=3600, quick_max_batches=10,
        system_options={"outre": {"memory_budget": "1GiB"},
                        "outre-part": {"parts": 1024, "parts_per_batch": 8, "neighbor_cache": 128 << 20,
                                       "memory_budget": "1GiB"},
                        "outre-hist": {"parts": 1024, "parts_per_batch": 8, "neighbor_cache": 128 << 20,
                                       "memory_budget": "1GiB", "staleness": 100, "warmup": 0},
                        "outre-auto": {"parts": 1024, "parts_per_batch": 8, "memory_budget": "1GiB", "staleness": 100,
                                       "warmup": 0}},
        note="compute and I/O mixed: 512 B rows, wider model; cap = 71% of features + topology",
    ),
}


for _preset in BENCH_PRESETS.values():  # outre-part on the partition-ordered copy: the same settings
    _preset.system_options["outre-part-ordered"] = dict(_preset.system_options["outre-part"])


# Options a run may change with ``outre bench --set SYSTEM.KEY=VALUE`` (what the systems read from
# ``RunSpec.options``); a name outside this list is refused rather than silently ignored.
SYSTEM_OPTION_KEYS = ("parts", "parts_per_batch", "neighbor_cache", "memory_budget", "staleness", "warmup", "jitter",
                      "admission", "history_budget", "cache_split", "profile_batches", "ordered", "workers")


def get_preset(name: str) -> BenchPreset:
    try:
        return BENCH_PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown bench preset {name!r}; choose one of: {', '.join(BENCH_PRESETS)}") from None
