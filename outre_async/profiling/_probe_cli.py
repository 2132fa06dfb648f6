"""The ``outre probe`` verb: arguments and the run (``cli`` keeps a thin wrapper).

    outre probe PATH [--seconds S] [--depths 1,4,16,64,256] [--sizes 4k,16k,64k,256k,1m]
                     [--refresh] [--cache-dir DIR] [--scratch-size 1GiB] [--plot FILE]

PATH is a dataset folder (its features file is read), any file (read), or another folder: a scratch
file of ``--scratch-size`` is written there under a hidden temporary name, read, and removed (the
folder's file system is what is measured; a dataset's own file is the better target, since a
scratch file just written may sit in a cache below the file system).  Nothing is written to a
dataset.  The grid is cached per device under ``--cache-dir`` (default
``$XDG_CACHE_HOME/outre/probe/``, else ``~/.cache/outre/probe/``): this CLI is the one place that
reads the environment for it.  A file system without O_DIRECT (tmpfs) is measured with buffered
reads instead, and the output says so (``"direct": false`` and ``"fallback"`` in the JSON).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import _cli_checks as checks
from .._units import format_bytes

Say = Callable[[str], None]
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(i?b)?\s*$", re.IGNORECASE)


def read_size(text: str) -> int:
    """An argparse type: a read size; ``k``/``m``/``g`` are binary, as in fio's ``--bs`` (4k = 4096)."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a read size like 4k, 64KiB or 1m, got {text!r}")
    size = int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]
    if size < 512 or size % 512 or size > 64 << 20:
        raise argparse.ArgumentTypeError(f"must be a multiple of 512 B up to 64 MiB, got {text!r}")
    return size


def _listed(item: Callable[[str], int]) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        return tuple(item(part) for part in text.split(",") if part.strip())
    return parse


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/outre/probe`` (or ``~/.cache/outre/probe``): the CLI's choice of cache folder."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "outre" / "probe"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..features._probe_grid import DEPTHS, SECONDS, SIZES

    p.add_argument("path", type=Path, help="a dataset folder, a file, or a folder to write a scratch file in")
    p.add_argument("--seconds", type=checks.finite(positive=True), default=SECONDS,
                   help=f"per cell of the grid (default {SECONDS}; {len(DEPTHS) * len(SIZES)} cells)")
    p.add_argument("--depths", type=_listed(checks.count()), default=DEPTHS, help="queue depths, e.g. 1,4,16,64,256")
    p.add_argument("--sizes", type=_listed(read_size), default=SIZES, help="read sizes, e.g. 4k,16k,64k,256k,1m")
    p.add_argument("--refresh", action="store_true", help="measure again even if the device's probe is cached")
    p.add_argument("--cache-dir", type=Path, help="default: $XDG_CACHE_HOME/outre/probe or ~/.cache/outre/probe")
    p.add_argument("--scratch-size", type=checks.byte_size(allocated=False), default=1 << 30,
                   help="the scratch file written when PATH is a folder without a dataset (default 1GiB)")
    p.add_argument("--plot", type=Path, help="write IOPS and MB/s by depth and size to this image (matplotlib)")


def target_of(path: Path) -> tuple[Path, str]:
    """What the probe reads for ``path``: ``(file, kind)``, kind ``features``, ``file`` or ``folder``."""
    from ..errors import ProbeError

    if (path / "manifest.json").is_file():
        from ..store._dataset import open_dataset

        return open_dataset(path).features_path, "features"
    if path.is_file():
        return path, "file"
    if path.is_dir():
        return path, "folder"
    raise ProbeError(f"{path} is neither a file nor a folder; give a dataset folder, a file or a folder")


def run(args: argparse.Namespace, *, say: Say) -> dict[str, Any]:
    from ..features._disk_probe import in_flight_for

    cache_dir = args.cache_dir or default_cache_dir()
    if args.plot is not None:
        _check_matplotlib()
    target, kind = target_of(args.path)
    probe, cached, fallback = _probe(args, target, kind, cache_dir, say)
    result = probe.to_json()
    result.update(target=str(target), target_kind=kind, cached=cached, age_seconds=round(probe.age(), 1),
                  cache_dir=str(cache_dir), fallback=fallback,
                  in_flight={str(s): in_flight_for(probe, s) for s in probe.sizes})
    _table(probe, cached, fallback, say)
    if args.plot is not None:
        result["plot"] = str(_plot(probe, args.plot))
        say(f"plot written to {args.plot}")
    return result


def probe_for_loader(features: Path, cache_dir: Path, say: Say) -> Any:
    """The default grid on ``features`` (cached per device), as ``outre profile`` records it for the
    loader; where O_DIRECT is refused, buffered reads, said."""
    from ..errors import DirectIOUnsupported

    try:
        return _cached_for_loader(features, cache_dir, True, say)
    except DirectIOUnsupported as exc:
        say(f"O_DIRECT refused, probing buffered reads (the page cache may answer): {exc}")
        return _cached_for_loader(features, cache_dir, False, say)


def _cached_for_loader(features: Path, cache_dir: Path, direct: bool, say: Say) -> Any:
    from ..features._disk_probe import cached_probe, read_cached

    if read_cached(features, cache_dir, direct=direct) is None:
        say(f"probing the disk under {features} (about 10 s, cached in {cache_dir}) ...")
    probe, cached = cached_probe(features, cache_dir, direct=direct)
    if cached:
        say(f"disk probe: cached, measured {_age(probe.age())} ago ({probe.device['source']}; "
            "outre probe --refresh measures again)")
    return probe


def _probe(args: argparse.Namespace, target: Path, kind: str, cache_dir: Path, say: Say) -> tuple[Any, bool, str | None]:
    """Measure (or reuse) with O_DIRECT; where it is refused, measure buffered reads and say so."""
    from ..errors import DirectIOUnsupported

    try:
        probe, cached = _measure(args, target, kind, cache_dir, direct=True, say=say)
        return probe, cached, None
    except DirectIOUnsupported as exc:
        fallback = f"{exc}"
        say(f"O_DIRECT refused: measuring buffered reads instead (the page cache may answer): {exc}")
        probe, cached = _measure(args, target, kind, cache_dir, direct=False, say=say)
        return probe, cached, fallback


def _measure(args: argparse.Namespace, target: Path, kind: str, cache_dir: Path, *, direct: bool,
             say: Say) -> tuple[Any, bool]:
    from ..features._disk_probe import cached_probe, read_cached, scratch_file

    grid = {"depths": args.depths, "sizes": args.sizes, "seconds": args.seconds, "direct": direct}
    cells = len(set(args.depths)) * len(set(args.sizes))
    if kind != "folder":
        if args.refresh or not _covered(read_cached(target, cache_dir, direct=direct), args):
            say(f"probing {target} ({cells} cells x {args.seconds:g} s) ...")
        return cached_probe(target, cache_dir, refresh=args.refresh, **grid)
    old = read_cached(target, cache_dir, direct=direct)
    if not args.refresh and _covered(old, args):
        return old, True
    say(f"writing a {format_bytes(args.scratch_size)} scratch file in {target}, probing it "
        f"({cells} cells x {args.seconds:g} s), then removing it ...")
    with scratch_file(target, args.scratch_size) as scratch:
        return cached_probe(scratch, cache_dir, refresh=True, **grid)


def _covered(probe: Any, args: argparse.Namespace) -> bool:
    return probe is not None and probe.covers(args.depths, args.sizes)


def _table(probe: Any, cached: bool, fallback: str | None, say: Say) -> None:
    dev = probe.device
    when = f"cached, measured {_age(probe.age())} ago (--refresh to measure again)" if cached else "measured now"
    say(f"{dev['source'] or dev['dev']} ({dev['fstype']}, {dev['block'] or 'no block device'}) via {probe.path}: "
        f"{when}; {'O_DIRECT' if probe.direct else 'BUFFERED reads (O_DIRECT refused)'}")
    head = "depth | " + " | ".join(f"{_size(s):>15}" for s in probe.sizes)
    say("random reads/s and MB/s, by queue depth (rows) and read size (columns)")
    say(head)
    for d in probe.depths:
        cells = [probe.cell(d, s) for s in probe.sizes]
        say(f"{d:>5} | " + " | ".join(f"{c.iops:>7,.0f} {c.bytes_per_s / 1e6:>7,.0f}" if c else " " * 15 for c in cells))
    from ..features._disk_probe import in_flight_for

    say("reads in flight (Little's law: the knee at 90 % of peak, x2): "
        + ", ".join(f"{_size(s)} -> {in_flight_for(probe, s)}" for s in probe.sizes))
    if fallback:
        say(f"note: {probe.note}")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n >> 10} KiB" if not n % 1024 else f"{n} B"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.1f} {unit}"
    return f"{seconds:.0f} s"


def _check_matplotlib() -> None:
    from ..errors import ConfigError

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("--plot needs matplotlib, which is not installed: pip install matplotlib "
                          "(or drop --plot; --json has every figure)") from None


def _plot(probe: Any, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for s in probe.sizes:
        cells = [c for c in (probe.cell(d, s) for d in probe.depths) if c is not None]
        left.plot([c.depth for c in cells], [c.iops for c in cells], marker="o", label=_size(s))
        right.plot([c.depth for c in cells], [c.bytes_per_s / 1e6 for c in cells], marker="o", label=_size(s))
    for ax, what in ((left, "random reads/s"), (right, "MB/s")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("queue depth")
        ax.set_ylabel(what)
        ax.grid(True, alpha=0.3)
    left.legend(title="read size")
    fig.suptitle(f"{probe.device['source'] or probe.device['dev']} ({probe.device['fstype']}), "
                 f"{'O_DIRECT' if probe.direct else 'buffered'}, {probe.seconds_per_cell:g} s per cell")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
