"""What the ``outre`` CLI checks before it does anything: argument types, output folders, sizes (and
the defaults each option's help shows).

Values are checked where argparse parses them (``type=``), so a wrong value is one line naming the
flag (``outre quickstart: error: argument --lr: must be a finite number > 0, got 'nan'``) and exit
code 2.  Sizes the command would allocate are compared with the memory available now, and files it
would write with the free space of the output's file system, *before* allocating or writing: a
12-digit ``--num-nodes`` is refused at once instead of after minutes of swapping.  Estimates are
lower bounds (what must be held at once, from the command's own documented layout), so a refusal
is never a false alarm; passing them does not promise the run fits.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import ConfigError
from ._units import available_memory, format_bytes, parse_bytes

__all__ = ["byte_size", "check_fits_memory", "check_output_dir", "count", "device", "finite",
           "fanout_list_matcher", "say_if_compiling", "seed"]


def count(minimum: int = 1) -> Callable[[str], int]:
    """An argparse type: an integer ``>= minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        return value
    return parse


seed = count(0)
seed.__name__ = "seed"


def finite(*, positive: bool = False, nonnegative: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float (``> 0`` / ``>= 0`` when asked)."""
    want = "> 0" if positive else ">= 0" if nonnegative else ""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or (positive and value <= 0) or (nonnegative and value < 0):
            raise argparse.ArgumentTypeError(f"must be a finite number {want}".rstrip() + f", got {text!r}")
        return value
    return parse


def device(text: str) -> str:
    """An argparse type: ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (the syntax only: whether the device
    exists is checked by the verb, after it imports torch, :func:`~outre_async.machine._device.resolve_device`)."""
    from .machine._device import check_device_name

    try:
        return check_device_name(text, "--device")
    except ConfigError:
        raise argparse.ArgumentTypeError(f"must be auto, cpu, cuda or cuda:N, got {text!r}") from None


def byte_size(*, allocated: bool) -> Callable[[str], int]:
    """An argparse type: a byte size (``512MiB``); ``allocated``: the command holds that much in RAM,
    so more than the memory available now is refused."""
    def parse(text: str) -> int:
        try:
            size = parse_bytes(text)
            if allocated:
                check_fits_memory("this size", size)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return size
    return parse


def check_fits_memory(what: str, nbytes: float) -> None:
    avail = available_memory()
    if nbytes > avail:
        raise ConfigError(f"{what} needs at least {format_bytes(nbytes)} of memory, {format_bytes(avail)} is "
                          "available; choose a smaller value")


def check_output_dir(flag: str, path: Path, *, need_bytes: float = 0) -> None:
    """``path`` can be created: its nearest existing ancestor is a writable folder (with
    ``need_bytes`` free on its file system)."""
    parent = path.absolute()
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{flag} {path} is a file; give a folder")
    while not parent.exists() and not parent.is_symlink():
        parent = parent.parent
    if path.absolute() != parent and not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is not a folder, so nothing can be created under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {parent} is not writable")
    if need_bytes:
        free = os.statvfs(parent).f_bavail * os.statvfs(parent).f_frsize
        if need_bytes > free:
            raise ConfigError(f"{flag} {path}: the output needs at least {format_bytes(need_bytes)}, "
                              f"{format_bytes(free)} is free there; choose smaller sizes or another folder")


# ``--fanouts -1,5``: argparse takes an argument that starts with '-' for an option unless it looks like
# a negative number; a list of integers (the help's "-1 = full neighbourhood") is a value too.
fanout_list_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-?\d+(,\s*-?\d+)+$")


def say_if_compiling() -> bool:
    """Say "compiling kernels (first run only, about a minute)" on stderr when numba has not compiled
    the kernels every training run calls first (the sampler's, the feature buffer's) on this machine
    yet (``machine._numba_cache``), so a first run's long first step does not look like a hang.
    Returns whether it said so.  The CLIs call it where they show progress (stderr is a terminal, or
    ``--progress``), as it is progress news, not a result: a log or a test's captured stderr stays
    the command's own lines."""
    from .features._buffer_kernels import acquire
    from .machine._numba_cache import NOTE, kernels_to_compile
    from .sampling._sampler_kernels import sample_multihop

    if not kernels_to_compile([sample_multihop, acquire]):
        return False
    print(NOTE, file=sys.stderr, flush=True)
    return True


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Append ``(default: X)`` to the help of every option that takes a value and has a default.

    Done here, once, rather than with ``ArgumentDefaultsHelpFormatter``: that formatter prints
    nothing for an option without a help string, and would add ``(default: False)`` to every flag
    (and ``[]`` to a repeatable option).
    An option whose help already shows ``%(default)s`` is left as it is."""
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or action.default in (None, argparse.SUPPRESS, []):
            continue
        text = action.help or ""
        if "%(default)" not in text:
            action.help = f"{text} (default: %(default)s)" if text else "default: %(default)s"
