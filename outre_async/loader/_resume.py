"""Resuming mid-epoch: what ``OutreLoader.state_dict()`` records and ``load_state_dict()`` checks.

torchdata's ``StatefulDataLoader`` is the convention: the state is plain JSON-able values (ints,
strings, lists, dicts of them) that go into a training checkpoint beside the model's.  A batch's
content is a function of the seed, the epoch's plan and its sequence number ``seq`` (it samples with
stream ``stream_base + seq * world_size``), so the state needs no RNG state: it records the epoch,
which of its batches the caller was handed (:class:`Progress`), and the facts that decide the plan
and the streams, which must match on load (:func:`check_facts`).  The delivered seqs are a set (a
completion-order loader hands batches out of plan order), kept compactly: the length of the
delivered prefix ``0 .. prefix-1`` plus the sorted extra seqs after it.

What is not restored: the feature buffer starts empty (the same rows are read again) and so does
the history table (``history=``): the plan, the seqs and the streams are kept, but what sampling
prunes by the table, and so a batch's subgraph and pulled rows, may differ (with history they vary
between uninterrupted runs too: pruning depends on which batches were sampled first).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CheckpointError, CheckpointMismatchError

__all__ = ["STATE_VERSION", "Progress", "check_facts", "check_header", "decode_progress", "encode_progress", "header",
           "seeds_crc"]

STATE_VERSION = 1
_FORMAT = "outre-loader-state"


@dataclass(kw_only=True, slots=True)
class Progress:
    """One epoch's delivery so far: ``delivered`` are the plan seqs handed to the caller."""

    epoch: int
    num_batches: int
    delivered: set[int] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        return len(self.delivered) >= self.num_batches

    def remaining(self) -> list[int]:
        """The seqs still to deliver, in plan order."""
        return [s for s in range(self.num_batches) if s not in self.delivered]


def encode_progress(delivered: Iterable[int]) -> dict[str, Any]:
    """``{"prefix": k, "extra": [...]}``: seqs ``0 .. k-1`` and the sorted ones after them."""
    done = sorted(set(delivered))
    prefix = 0
    while prefix < len(done) and done[prefix] == prefix:
        prefix += 1
    return {"prefix": prefix, "extra": done[prefix:]}


def decode_progress(value: Any, num_batches: int) -> set[int]:
    """The delivered set of :func:`encode_progress`'s ``value``, checked against ``num_batches``."""
    if not isinstance(value, Mapping) or not _is_int(value.get("prefix")) or not isinstance(value.get("extra"), list):
        raise CheckpointError(f"loader state: delivered must be {{'prefix': int, 'extra': [int, ...]}}, got {value!r:.120}; "
                              "pass a dict made by OutreLoader.state_dict()")
    prefix, extra = int(value["prefix"]), value["extra"]
    if not all(_is_int(s) for s in extra) or not 0 <= prefix <= num_batches \
            or any(not prefix <= s < num_batches for s in extra):
        raise CheckpointError(f"loader state: delivered seqs {value!r:.120} are outside the epoch's {num_batches} batches; "
                              "pass a dict made by OutreLoader.state_dict()")
    return set(range(prefix)) | {int(s) for s in extra}


def seeds_crc(seeds: np.ndarray) -> int:
    """A checksum of the split's seed ids (the plan shuffles and cuts them)."""
    return zlib.crc32(np.ascontiguousarray(seeds, dtype=np.int64).tobytes())


def header() -> dict[str, Any]:
    return {"format": _FORMAT, "version": STATE_VERSION}


def check_header(state: Any) -> None:
    if not isinstance(state, Mapping) or state.get("format") != _FORMAT:
        raise CheckpointError(f"loader state: expected a dict made by OutreLoader.state_dict() (format {_FORMAT!r}), "
                              f"got {type(state).__name__}{'' if not isinstance(state, Mapping) else ' without it'}")
    if state.get("version") != STATE_VERSION:
        raise CheckpointError(f"loader state: version {state.get('version')!r}, this outre-async reads version "
                              f"{STATE_VERSION}; resume with the version that wrote it, or start the epoch afresh")
    if not _is_int(state.get("epoch")) or state["epoch"] < 0 or not isinstance(state.get("facts"), Mapping):
        raise CheckpointError(f"loader state: expected an epoch >= 0 and a dict of facts, got epoch="
                              f"{state.get('epoch')!r}; pass a dict made by OutreLoader.state_dict()")


def check_facts(have: Mapping[str, Any], want: Mapping[str, Any]) -> None:
    """Refuse a state whose plan facts differ from this loader's, naming the first field that does."""
    for key, value in want.items():
        if have.get(key) != value:
            raise CheckpointMismatchError(
                f"loader state has {key}={_short(have.get(key))}, this loader {key}={_short(value)}; resume with the "
                "loader (dataset, split, options, ranks) that wrote the state, or start the epoch afresh")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
