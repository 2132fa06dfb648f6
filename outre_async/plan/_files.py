"""``<dataset>/profile/<name>/``: a profile written atomically, read back only for the setup it fits.

Layout: ``meta.json`` (format, version, the dataset's identity, the loader setup profiled, the
measured costs, the plan's split and predicted epoch time, and per array file its dtype, count and
crc32) plus raw little-endian arrays: ``static_rows.bin``, ``history_nodes.bin``, ``neighbor_nodes.bin``
(int64 node ids, ascending, unique: the plan) and ``row_hot.bin``, ``list_hot.bin`` (float64 [N]: the
counts, for inspection and re-planning).

Writing goes through the store's temp folder and atomic install (replacing a profile of the same
name only when it is ours).  Reading trusts nothing: the meta's format and version, the identity
(:class:`ProfileMismatchError` for another dataset or another version of it, and for a setup other
than the loader's: a stale profile), every file's name (confined to the folder), size, checksum and,
for node ids, range and order, before anything indexes with them.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ProfileCorruptError, ProfileMismatchError, ProfileNotFoundError
from ..store._dataset import Dataset
from ..store._identity import check_identity, dataset_identity
from ..store._install import fsync_path, install_directory
from ..store._litter import open_temp_dir
from ..store._overwrite import check_overwrite, meta_folder_names
from ..store._paths import confined
from ..store._safe_read import open_regular, read_json

FORMAT_NAME = "outre-async-profile"
FORMAT_VERSION = 1
META_NAME = "meta.json"
PROFILE_DIR = "profile"
PLAN_ARRAYS = ("static_rows", "history_nodes", "neighbor_nodes")
COUNT_ARRAYS = ("row_hot", "list_hot")
_FIX = "re-run `outre profile`"
_DTYPES = {"static_rows": "<i8", "history_nodes": "<i8", "neighbor_nodes": "<i8", "row_hot": "<f8", "list_hot": "<f8"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """A profile read back: its meta and arrays (node ids checked against the dataset)."""

    path: Path
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def setup(self) -> dict[str, Any]:
        return dict(self.meta["setup"])


def check_profile_name(name: str) -> str:
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name \
            or name != name.strip() or "\x00" in name:
        raise ConfigError(f"profile name {name!r} must be a plain folder name (no '/', not starting with '.')")
    return name


def profile_path(ds: Dataset, name: str) -> Path:
    return ds.path / PROFILE_DIR / check_profile_name(name)


def write_profile(ds: Dataset, name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Path:
    """Write ``profile/<name>/`` atomically, replacing an outre profile of that name; returns the path."""
    path = profile_path(ds, name)
    check_overwrite(path, owned=_profile_names, what="profile folder", inputs=(ds.path / "manifest.json",))
    tmp = open_temp_dir(path.parent, name, "tmp")
    try:
        files = {}
        for stem in (*PLAN_ARRAYS, *COUNT_ARRAYS):
            data = np.ascontiguousarray(arrays[stem], dtype=_DTYPES[stem])
            raw = data.tobytes()
            (tmp.path / f"{stem}.bin").write_bytes(raw)
            files[stem] = {"file": f"{stem}.bin", "dtype": _DTYPES[stem], "count": len(data), "crc32": zlib.crc32(raw)}
        full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": name,
                "dataset": dataset_identity(ds), **meta, "files": files}
        with open(tmp.path / META_NAME, "w") as f:
            f.write(json.dumps(full, indent=2, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        for stem in files:
            fsync_path(tmp.path / f"{stem}.bin")
        check_overwrite(path, owned=_profile_names, what="profile folder", inputs=(ds.path / "manifest.json",))
        install_directory(tmp.path, path, overwrite=True, exists=ConfigError(f"{path} appeared while writing"))
        tmp.release()
    except BaseException:
        tmp.remove()
        raise
    return path


def read_profile(ds: Dataset, name: str, *, setup: dict[str, Any] | None = None) -> Profile:
    """The profile ``name`` of ``ds``, checked (module docstring); ``setup`` = the loader's, which must
    equal the profiled one."""
    path = profile_path(ds, name)
    meta = _read_meta(path)
    check_identity(ds, path, meta["dataset"], error=ProfileMismatchError, made="measured on",
                   redo="re-run `outre profile`")
    if setup is not None:
        _check_setup(path, meta, setup)
    arrays = {stem: _read_array(path, meta, stem, ds.num_nodes) for stem in (*PLAN_ARRAYS, *COUNT_ARRAYS)}
    return Profile(path=path, meta=meta, arrays=arrays)


def _check_setup(path: Path, meta: dict[str, Any], setup: dict[str, Any]) -> None:
    have = meta.get("setup")
    if not isinstance(have, dict):
        raise ProfileCorruptError(f"{path}/{META_NAME} lacks its 'setup'; re-run `outre profile`")
    diff = [f"{k}: profiled {have.get(k)!r}, loader {v!r}" for k, v in setup.items() if have.get(k) != v]
    if diff:
        raise ProfileMismatchError(f"{path} was profiled for another loader setup ({'; '.join(diff[:3])}); "
                                   "re-run `outre profile` with the loader's options or drop profile=")


def _read_meta(path: Path) -> dict[str, Any]:
    file = path / META_NAME
    if not path.is_dir():
        raise ProfileNotFoundError(f"no profile at {path}; run `outre profile {path.parent.parent} --name "
                                   f"{path.name} ...` first")
    try:  # a regular file of at most 16 MiB, bounded JSON (``store._safe_read``)
        meta = read_json(file, error=ProfileCorruptError, fix=_FIX)
    except FileNotFoundError as exc:
        raise ProfileCorruptError(f"{path} has no {META_NAME} (an interrupted write?); re-run `outre profile`") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ProfileCorruptError(f"{file} is not an outre-async profile meta; re-run `outre profile`")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ProfileCorruptError(f"{path} has format_version {meta.get('format_version')!r}, this outre-async "
                                  f"reads {FORMAT_VERSION}; re-run `outre profile`")
    if not isinstance(meta.get("files"), dict) or not isinstance(meta.get("dataset"), dict):
        raise ProfileCorruptError(f"{file} lacks its 'files' or 'dataset' entry; re-run `outre profile`")
    return meta


def _read_array(path: Path, meta: dict[str, Any], stem: str, num_nodes: int) -> np.ndarray:
    entry = meta["files"].get(stem)
    if not isinstance(entry, dict) or entry.get("dtype") != _DTYPES[stem]:
        raise ProfileCorruptError(f"{path}/{META_NAME}: entry {stem!r} is missing or malformed; re-run `outre profile`")
    file = confined(path, entry.get("file"), ProfileCorruptError, stem)
    count = entry.get("count")
    limit = num_nodes
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= limit:
        raise ProfileCorruptError(f"{file}: count {count!r} must be an integer in [0, {limit}]; re-run `outre profile`")
    if stem in COUNT_ARRAYS and count != num_nodes:
        raise ProfileCorruptError(f"{file}: holds {count} counts, the dataset has {num_nodes} nodes; re-run `outre profile`")
    data = _read_exact(file, count, _DTYPES[stem])
    if zlib.crc32(memoryview(data).cast("B")) != entry.get("crc32"):  # type: ignore[arg-type]  # an ndarray is a buffer
        raise ProfileCorruptError(f"{file} was changed (its crc32 differs from the meta's); re-run `outre profile`")
    if stem in PLAN_ARRAYS and len(data) and (data[0] < 0 or data[-1] >= num_nodes or (np.diff(data) <= 0).any()):
        raise ProfileCorruptError(f"{file}: node ids must be ascending, unique and in [0, {num_nodes}); "
                                  "re-run `outre profile`")
    if stem in COUNT_ARRAYS and not np.isfinite(data).all():
        raise ProfileCorruptError(f"{file}: counts must be finite; re-run `outre profile`")
    return data.astype(np.int64) if stem in PLAN_ARRAYS else data


def _read_exact(file: Path, count: int, dtype: str) -> np.ndarray:
    """``count`` items read in place from a regular file of exactly ``count`` items (size checked on
    the descriptor before anything is allocated or read: a 64 GiB sparse file is refused, not read)."""
    out = np.empty(count, dtype=dtype)
    try:
        fd = open_regular(file, error=ProfileCorruptError, fix=_FIX, exact_bytes=out.nbytes)
    except FileNotFoundError as exc:
        raise ProfileCorruptError(f"{file} is missing (an interrupted write?); {_FIX}") from exc
    try:
        view, done = memoryview(out).cast("B"), 0  # type: ignore[arg-type]
        while done < len(view) and (got := os.preadv(fd, [view[done:]], done)):
            done += got
    except OSError as exc:
        raise ProfileCorruptError(f"{file}: read failed at byte {done} ({exc.strerror}); {_FIX}") from exc
    finally:
        os.close(fd)
    if done != len(view):
        raise ProfileCorruptError(f"{file} ends at byte {done}, expected {len(view)} (truncated meanwhile); {_FIX}")
    return out


def _profile_names(path: Path) -> set[str]:
    return meta_folder_names(path, "profile folder", META_NAME, FORMAT_NAME)
