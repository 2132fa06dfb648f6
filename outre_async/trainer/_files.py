"""What ``outre train`` writes: checkpoints and the metrics JSON, each replaced atomically.

A writer puts the bytes in a hidden temp file beside the target, fsyncs it, renames it over the
target and fsyncs the folder: a crash leaves the old file or the new one, never a torn one (a temp
file of a killed writer is named ``.NAME.tmp-PID`` and replaced by the next writer).  Checkpoints are
``torch.save``-d dicts of state dicts, tensors and plain values only, loaded with
``weights_only=True``: loading one never runs code from the file.  :func:`awrite_atomic` is the same
write through aiofiles for code running on an event loop (it never blocks the loop on the disk).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError
from ..store._install import fsync_path
from ..store._safe_read import open_regular


def _temp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_atomic(path: Path, data: bytes) -> None:
    tmp = _temp(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


async def awrite_atomic(path: Path, data: bytes) -> None:
    import aiofiles
    import aiofiles.os

    tmp = _temp(path)
    try:
        async with aiofiles.open(tmp, "wb") as f:
            await f.write(data)
            await f.flush()
            await aiofiles.os.wrap(os.fsync)(f.fileno())  # type: ignore[attr-defined]
        await aiofiles.os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    await aiofiles.os.wrap(fsync_path)(path.parent)  # type: ignore[attr-defined]


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    buf = io.BytesIO()
    torch.save(state, buf)
    write_atomic(path, buf.getvalue())


CHECKPOINT_MAX_BYTES = 16 << 30  # larger than any model outre train builds (its hidden size is checked to fit)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`, loaded with ``weights_only=True`` from a
    regular file of at most ``CHECKPOINT_MAX_BYTES`` (``store._safe_read``: a FIFO or device in its
    place is refused, not waited on), its entries' types checked (:func:`check_checkpoint`)."""
    fix = "remove it and train without --resume"
    try:
        fd = open_regular(path, error=CheckpointError, fix=fix, max_bytes=CHECKPOINT_MAX_BYTES)
    except FileNotFoundError as exc:
        raise CheckpointError(f"no checkpoint at {path}; train without --resume first") from exc
    with os.fdopen(fd, "rb") as f:
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for a damaged or foreign file
            raise CheckpointError(f"{path} is not a readable outre checkpoint ({type(exc).__name__}); {fix}") from exc
    check_checkpoint(path, state)
    return state


_TYPES: dict[str, tuple[type, ...]] = {"model": (dict,), "optimizer": (dict,), "epoch": (int,), "config": (dict,),
                                       "metrics": (list,), "best": (dict,), "torch_rng": (torch.Tensor,),
                                       "dataset": (dict,), "loader": (dict,), "partial": (dict,)}


def check_checkpoint(path: Path, state: Any) -> None:
    """Raise :class:`CheckpointError` unless ``state`` has the keys and value types that resuming
    uses (a ``uint8`` RNG state, a list of metric rows, ...): a wrong type is a named error here, not
    a traceback from deep inside ``torch.set_rng_state`` or the metrics loop."""
    fix = "remove it and train without --resume"
    if not isinstance(state, dict) or not {"model", "optimizer", "epoch", "config"} <= set(state):
        raise CheckpointError(f"{path} is not an outre checkpoint (keys missing); {fix}")
    for key, types in _TYPES.items():
        if key in state and (not isinstance(state[key], types) or isinstance(state[key], bool)):
            raise CheckpointError(f"{path}: {key} has type {type(state[key]).__name__}, expected "
                                  f"{' or '.join(t.__name__ for t in types)}; {fix}")
    rng = state.get("torch_rng")
    if rng is not None and (rng.dtype != torch.uint8 or rng.dim() != 1):
        raise CheckpointError(f"{path}: torch_rng is a {rng.dtype} tensor of {rng.dim()} dimensions, expected the "
                              f"1-D uint8 state torch.get_rng_state() returns; {fix}")
    rows_ok = all(isinstance(row, dict) and _number(row.get("elapsed_seconds")) for row in state.get("metrics", []))
    best = state.get("best", {})
    best_ok = _number(best.get("val_accuracy", 0.0)) and _number(best.get("val_mrr", 0.0))
    if state["epoch"] < 0 or not rows_ok or not best_ok:
        raise CheckpointError(f"{path}: epoch must be >= 0, metrics a list of rows with elapsed_seconds, best's "
                              f"val_accuracy (or val_mrr) a number; {fix}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(metrics, indent=2) + "\n").encode())
