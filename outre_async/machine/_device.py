"""The training device from a name: ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (``--device`` and
``device=`` everywhere).

``auto`` is CUDA when a GPU is visible (the current CUDA device), else the CPU.  A device that is not
on this machine is a :class:`DeviceNotFoundError` listing the ones that are, raised here, before a
loader, a model or a history table is built on it (torch's own error comes late, from deep inside
the first copy, and names no alternative).  The syntax alone is checked by :func:`check_device_name`
without importing torch, so the CLI can parse ``--device`` before it pays for torch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import ConfigError, DeviceNotFoundError

if TYPE_CHECKING:
    import torch

DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda:N")
_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")


def check_device_name(name: str, flag: str = "device") -> str:
    """``name`` if it is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; else a one-line :class:`ConfigError`."""
    if not isinstance(name, str) or not _PATTERN.fullmatch(name):
        raise ConfigError(f"{flag}={name!r} must be one of {', '.join(DEVICE_NAMES)}")
    return name


def available_devices() -> list[str]:
    """The devices this process can use: ``cpu`` and one ``cuda:N`` per visible GPU."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu"] + [f"cuda:{i}" for i in range(count)]


def resolve_device(name: str | torch.device, flag: str = "device") -> torch.device:
    """The :class:`torch.device` of ``name``, with its index for CUDA (``cuda`` -> ``cuda:<current>``),
    so that two names of one device compare equal; ``auto`` picks CUDA when present."""
    import torch

    if isinstance(name, torch.device):
        name = str(name)
    check_device_name(name, flag)
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if name == "auto":
        name = "cuda" if cuda else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    index = int(name.partition(":")[2]) if ":" in name else (torch.cuda.current_device() if cuda else 0)
    if not cuda or index >= torch.cuda.device_count():
        raise DeviceNotFoundError(f"{flag}={name!r}: no such device on this machine; available: "
                                  f"{', '.join(available_devices())} (or auto)")
    return torch.device("cuda", index)


def device_memory(device: torch.device) -> int | None:
    """Total bytes of a GPU's memory (None for the CPU, whose memory ``memory_budget`` counts): what a
    default device budget is a share of (the history's ``placement="auto"``)."""
    import torch

    if device.type != "cuda":
        return None
    return int(torch.cuda.get_device_properties(device).total_memory)
