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

from .._errors import ConfigError, DatasetCorruptError
from ..store._install import fsync_path


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


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`, loaded with ``weights_only=True``."""
    if not path.is_file():
        raise ConfigError(f"no checkpoint at {path}; train without --resume first")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged or foreign file
        raise DatasetCorruptError(f"{path} is not a readable outre checkpoint ({type(exc).__name__}); "
                                  "remove it and train without --resume") from exc
    if not isinstance(state, dict) or not {"model", "optimizer", "epoch", "config"} <= set(state):
        raise DatasetCorruptError(f"{path} is not an outre checkpoint (keys missing); remove it and train again")
    return state


def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(metrics, indent=2) + "\n").encode())
