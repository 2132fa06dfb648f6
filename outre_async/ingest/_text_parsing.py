"""Text inputs, read in large blocks of whole lines and parsed by numba/numpy, never value by
value in Python: integer pairs and columns (edge lists, OGB ids), CSV feature rows, OGB labels.
A bad line raises :class:`InputFormatError` with its file and line number."""

from __future__ import annotations

import gzip
import io
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np
from tqdm import tqdm

from ..errors import InputFormatError
from ._convert_kernels import parse_int_column, parse_int_pairs
from ._source import EdgeChunks

TEXT_BLOCK = 16 << 20  # bytes of text parsed per block


def _open_binary(path: Path) -> BinaryIO:
    """The file, or its decompressed stream when it starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return cast(BinaryIO, gzip.open(path, "rb") if gz else open(path, "rb"))  # noqa: SIM115


def _read(f: BinaryIO, size: int, path: Path) -> bytes:
    try:
        return f.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFormatError(
            f"cannot read ({exc}); is the file truncated or not gzip?", path=path
        ) from exc


def line_blocks(path: Path, progress: bool) -> Iterator[bytes]:
    """Blocks of whole lines, each ending with a newline (added to a last line lacking one)."""
    block_size = TEXT_BLOCK  # read at call time so that tests can shrink it
    with (
        _open_binary(path) as f,
        tqdm(unit="B", unit_scale=True, desc=f"read {path.name}", disable=not progress) as bar,
    ):
        carry = b""
        while chunk := _read(f, block_size, path):
            bar.update(len(chunk))
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                yield data[:cut]
        if carry:
            yield carry + b"\n"


def _parse_ints(block: bytes, ncols: int, path: Path, first_line: int) -> tuple[np.ndarray, int]:
    """(``[rows, 2]`` or ``[rows]`` int64, lines in the block); a bad line raises with its line."""
    buf = np.frombuffer(block, dtype=np.uint8)
    out: np.ndarray
    if ncols == 2:
        out = np.empty((len(block) // 4 + 1, 2), dtype=np.int64)  # untouched pages cost no RAM
        rows, bad, lines = parse_int_pairs(buf, out)
    else:
        out = np.empty(len(block) // 2 + 1, dtype=np.int64)
        rows, bad, lines = parse_int_column(buf, out)
    if bad >= 0:
        what = "two integer node ids" if ncols == 2 else "one integer"
        raise InputFormatError(
            f"expected {what} per line, found {_line_of(block, bad)!r} "
            "(comment lines start with # or %)",
            path=path,
            line=first_line + bad,
        )
    return out[:rows], lines


def _line_of(block: bytes, index: int) -> str:
    """Text of line ``index`` of ``block`` (for messages; only on the error path)."""
    line = block.split(b"\n")[index]
    return line[:80].decode("utf-8", "replace").rstrip("\r")


def text_edges(path: Path, progress: bool) -> EdgeChunks:
    """(src, dst) chunks of a text edge list, block by block; further columns are ignored."""
    line = 1
    for block in line_blocks(path, progress):
        pairs, lines = _parse_ints(block, 2, path, line)
        line += lines
        yield pairs[:, 0], pairs[:, 1]


def read_ids(path: Path, progress: bool = False) -> np.ndarray:
    """A file of one integer per line (OGB splits and node counts)."""
    parts, line = [], 1
    for block in line_blocks(path, progress):
        ids, lines = _parse_ints(block, 1, path, line)
        parts.append(ids)
        line += lines
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def csv_width(path: Path) -> int:
    with _open_binary(path) as f:
        try:
            first = f.readline()
        except (OSError, EOFError, zlib.error) as exc:
            raise InputFormatError(f"cannot read ({exc})", path=path) from exc
    if not first.strip():
        raise InputFormatError("is empty; expected comma-separated feature rows", path=path, line=1)
    return len(first.split(b","))


def float_rows(path: Path, dim: int, progress: bool) -> Iterator[np.ndarray]:
    """Feature rows of a CSV, block by block (numpy's C parser; exact float64, cast later)."""
    line = 1
    for block in line_blocks(path, progress):
        rows = _parse_floats(block, dim, path, line)
        line += len(rows)
        yield rows


def _parse_floats(block: bytes, dim: int, path: Path, first_line: int) -> np.ndarray:
    try:
        rows = np.loadtxt(
            io.BytesIO(block), delimiter=",", dtype=np.float64, ndmin=2, comments=None
        )
    except ValueError:
        rows = None
    if rows is None or rows.shape != (block.count(b"\n"), dim):  # loadtxt skips blank lines
        bad = _bad_float_line(block, dim)
        raise InputFormatError(
            f"expected {dim} comma-separated numbers, found {_line_of(block, bad)!r}",
            path=path,
            line=first_line + bad,
        )
    return rows


def _bad_float_line(block: bytes, dim: int) -> int:
    """Index of the first line that is not ``dim`` numbers (re-scan of a failed block only)."""
    for index, line in enumerate(block.split(b"\n")[:-1]):
        values = line.split(b",")
        if len(values) != dim or not all(_is_number(v) for v in values):
            return index
    return 0


def read_labels(path: Path, progress: bool) -> np.ndarray:
    """One label per line; empty or NaN → -1 (OGB marks unlabelled nodes so)."""
    parts, line = [], 1
    for block in line_blocks(path, progress):
        parts.append(_parse_labels(block, path, line))
        line += len(parts[-1])
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _parse_labels(block: bytes, path: Path, first_line: int) -> np.ndarray:
    fields = np.char.strip(np.array(block[:-1].split(b"\n")))
    fields = np.where((fields == b"") | (np.char.lower(fields) == b"nan"), b"-1", fields)
    try:
        values = fields.astype(np.float64)
    except ValueError:
        values = None
    if values is None or not np.isfinite(values).all() or (values != np.round(values)).any():
        bad = next(i for i, v in enumerate(fields) if not _is_integral(v))
        raise InputFormatError(
            f"expected one integer class id (or NaN) per line, found {_line_of(block, bad)!r}"
            " (multi-task labels are not supported)",
            path=path,
            line=first_line + bad,
        )
    return values.astype(np.int64)


def _is_number(value: bytes) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _is_integral(value: bytes) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and number == round(number)
