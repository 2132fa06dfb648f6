"""Reading the dataset's own files: a regular file of the manifest's size (:func:`open_data_file`,
through ``_safe_read``), whole (:func:`load_small`) or in bounded blocks (:func:`blocks`), checksummed,
and the open-time scans of what a kernel will index (indptr monotone, labels and node ids in range,
splits unique and disjoint).  Apart from :class:`~outre_async.store._dataset.Dataset`, which calls them."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetCorruptError, DatasetReadError
from ._manifest import FeatureEntry, FileEntry
from ._safe_read import open_regular

_SCAN_ITEMS = 1 << 20  # items per block of the open-time scans (8 MiB of int64)


def load_small(root: Path, entry: FileEntry) -> np.ndarray:
    """Read a whole file into one array (no intermediate copy) and check its checksum."""
    out = np.empty(entry.shape, dtype=entry.dtype)
    path = root / entry.file
    try:
        with _open_entry(root, entry) as f:
            got = _read_full(f, memoryview(out).cast("B"))  # type: ignore[arg-type]  # an ndarray is a buffer
    except _Failed as failed:
        raise DatasetReadError(f"read failed ({failed.exc.strerror}); check the disk, then re-create the dataset",
                               path=path, offset=failed.offset, errno=failed.exc.errno) from failed.exc
    except OSError as exc:
        raise DatasetReadError(f"cannot open ({exc.strerror})", path=path, offset=0, errno=exc.errno) from exc
    if got != out.nbytes:
        raise DatasetCorruptError(f"{root}: {entry.file} ends at byte {got}, expected {out.nbytes}; re-create the dataset")
    if entry.crc32 is not None and zlib.crc32(memoryview(out).cast("B")) != entry.crc32:  # type: ignore[arg-type]
        raise DatasetCorruptError(f"{root}: {entry.file} fails its checksum; re-create the dataset")
    return out


def blocks(root: Path, entry: FileEntry, items: int = _SCAN_ITEMS) -> Iterator[np.ndarray]:
    """The file's items in blocks of at most ``items`` (one reused buffer), then its checksum
    is checked: bounded memory whatever the file's size."""
    buf = np.empty(max(1, min(items, int(np.prod(entry.shape)))), dtype=entry.dtype)
    crc = 0
    path = root / entry.file
    offset = 0
    try:
        with _open_entry(root, entry) as f:
            while got := _read_full(f, memoryview(buf).cast("B"), offset):  # type: ignore[arg-type]
                crc = zlib.crc32(memoryview(buf).cast("B")[:got], crc)  # type: ignore[arg-type]
                offset += got
                yield buf[: got // buf.itemsize]
    except _Failed as failed:
        raise DatasetReadError(f"read failed ({failed.exc.strerror}); check the disk, then re-create the dataset",
                               path=path, offset=failed.offset, errno=failed.exc.errno) from failed.exc
    except OSError as exc:
        raise DatasetReadError(f"cannot open ({exc.strerror})", path=path, offset=0, errno=exc.errno) from exc
    if entry.crc32 is not None and crc != entry.crc32:
        raise DatasetCorruptError(f"{root}: {entry.file} fails its checksum; re-create the dataset")


_FIX = "re-create the dataset"


def open_data_file(path: Path, nbytes: int) -> int:
    """A descriptor of the dataset file ``path`` through ``_safe_read``: a regular file of the size
    the manifest gives, checked again at each open (it may have been swapped since :func:`open_dataset`)."""
    try:
        return open_regular(path, error=DatasetCorruptError, fix=_FIX, exact_bytes=nbytes)
    except FileNotFoundError as exc:
        raise DatasetCorruptError(f"{path.parent}: file {path.name} is missing; re-create the dataset") from exc


def _open_entry(root: Path, entry: FileEntry) -> Any:
    return os.fdopen(open_data_file(root / entry.file, entry.nbytes), "rb")


class _Failed(Exception):
    """An ``OSError`` at a byte offset of the file being read (turned into a named error by the caller)."""

    def __init__(self, exc: OSError, offset: int) -> None:
        super().__init__(str(exc))
        self.exc, self.offset = exc, offset


def _read_full(f: Any, view: memoryview, base: int = 0) -> int:
    """Fill ``view`` from ``f`` (short reads looped); returns the bytes read (less only at end of file)."""
    done = 0
    try:
        while done < len(view) and (got := f.readinto(view[done:])):
            done += got
    except OSError as exc:
        raise _Failed(exc, base + done) from exc
    return done


def scan_indptr(root: Path, entry: FileEntry, num_edges: int) -> None:
    first, last = None, 0
    for block in blocks(root, entry):
        if first is None:
            first = int(block[0])
        elif block[0] < last:
            raise DatasetCorruptError(f"{root}: indptr is not monotone (non-decreasing); re-create the dataset")
        if len(block) > 1 and (np.diff(block) < 0).any():
            raise DatasetCorruptError(f"{root}: indptr is not monotone (non-decreasing); re-create the dataset")
        last = int(block[-1])
    if first != 0 or last != num_edges:
        raise DatasetCorruptError(f"{root}: indptr must run from 0 to num_edges={num_edges}, runs {first}..{last}")


def scan_features(root: Path, entry: FeatureEntry, num_nodes: int, items: int = _SCAN_ITEMS) -> None:
    """Raise :class:`DatasetCorruptError` if a feature value (padding excluded) is NaN or inf, naming
    the first one's row and column and their count.  Whole rows are read in blocks of about ``items``
    values through :func:`blocks` (bounded memory, a short read is a named error, never a SIGBUS)."""
    width = entry.stride // np.dtype(entry.dtype).itemsize  # values per stored row, padding included
    flat = FileEntry(file=entry.file, dtype=entry.dtype, shape=(num_nodes * width,), nbytes=entry.nbytes)
    row, count, first = 0, 0, None
    for block in blocks(root, flat, items=max(1, items // width) * width):
        if len(block) % width:  # the file shrank during the scan (its size was checked at open)
            raise DatasetCorruptError(f"{root}: {entry.file} ends inside row {row + len(block) // width} (truncated); "
                                      "re-create the dataset")
        bad = not_finite(block.reshape(-1, width)[:, : entry.dim])
        if first is None and bad.any():
            r, c = np.argwhere(bad)[0]
            first = (row + int(r), int(c))
        count += int(bad.sum())
        row += len(block) // width
    if first is not None:
        raise DatasetCorruptError(f"{root}: {entry.file} holds {count:,} non-finite feature value(s) (NaN or inf), the "
                                  f"first at row {first[0]}, column {first[1]}; fix the source's features and re-convert")


def not_finite(words: np.ndarray) -> np.ndarray:
    """Which stored values are NaN or inf: float words by ``isfinite``, bfloat16 words (uint16) by
    their exponent (all ones), int8 words never."""
    if words.dtype == np.uint16:
        return (words & np.uint16(0x7F80)) == np.uint16(0x7F80)
    if words.dtype.kind in "iu":
        return np.zeros(words.shape, dtype=bool)
    return ~np.isfinite(words)


def scan_labels(root: Path, entry: FileEntry, num_classes: int) -> None:
    for block in blocks(root, entry):
        if len(block) and (block.min() < -1 or block.max() >= num_classes):
            raise DatasetCorruptError(f"{root}: labels fall outside [-1, num_classes={num_classes})")


def scan_node_ids(root: Path, entry: FileEntry, num_nodes: int) -> None:
    for block in blocks(root, entry):
        if len(block) and (block.min() < 0 or block.max() >= num_nodes):
            raise DatasetCorruptError(f"{root}: {entry.file} holds node ids outside [0, {num_nodes}); "
                                      "re-create the reordered dataset")


def check_split(root: Path, name: str, ids: np.ndarray, num_nodes: int) -> None:
    if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
        raise DatasetCorruptError(f"{root}: split {name!r} holds node ids outside [0, {num_nodes})")
    if len(np.unique(ids)) != len(ids):
        raise DatasetCorruptError(f"{root}: split {name!r} lists a node id more than once")


def check_disjoint(root: Path, splits: dict[str, np.ndarray]) -> None:
    names = sorted(splits)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            both = np.intersect1d(splits[a], splits[b])
            if len(both):
                raise DatasetCorruptError(f"{root}: splits {a!r} and {b!r} share {len(both)} nodes "
                                          f"(e.g. {int(both[0])}); re-create the dataset")
