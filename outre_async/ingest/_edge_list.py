"""Edge lists → a dataset: text (two integer columns, optionally gzipped) or binary little-endian
int32/int64 pairs, streamed in blocks so that a list larger than RAM converts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ConfigError, InputFormatError
from ._source import (
    EDGE_BLOCK,
    EdgeChunks,
    PathLike,
    Source,
    existing_path,
    parse_options,
    write_source,
)
from ._text_parsing import text_edges

TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".edges", ".el")
BINARY_SUFFIXES = {".i32": "int32", ".i64": "int64", ".bin": None}


def from_edge_list(
    path: PathLike,
    out: PathLike,
    *,
    binary_dtype: str | None = None,
    num_nodes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an edge list: binary pairs when ``binary_dtype`` is given or the name ends in
    ``.i32``/``.i64``/``.bin``, else text (the grammar is in ``_convert``'s table).  ``num_nodes``
    defaults to max id + 1."""
    if binary_dtype is not None or _suffix(Path(path)) in BINARY_SUFFIXES:
        return from_binary_edges(path, out, binary_dtype=binary_dtype, num_nodes=num_nodes, **opts)
    return from_text_edges(path, out, num_nodes=num_nodes, **opts)


def from_text_edges(
    path: PathLike, out: PathLike, *, num_nodes: int | None = None, **opts: Any
) -> Path:
    o = parse_options(opts)
    path = existing_path(path)
    src = Source(
        description=str(path),
        format="edgelist",
        num_nodes=num_nodes,
        edges=lambda: text_edges(path, o.progress),
    )
    return write_source(out, src, o)


def from_binary_edges(
    path: PathLike,
    out: PathLike,
    *,
    binary_dtype: str | None = None,
    num_nodes: int | None = None,
    **opts: Any,
) -> Path:
    o = parse_options(opts)
    path = existing_path(path)
    dtype = _binary_dtype(path, binary_dtype)
    size = path.stat().st_size
    if size % (2 * dtype.itemsize):
        raise InputFormatError(
            f"{size} bytes is not a whole number of {dtype} pairs ({2 * dtype.itemsize} B "
            "each): truncated, or the wrong binary_dtype",
            path=path,
        )
    src = Source(
        description=str(path),
        format="binary",
        num_nodes=num_nodes,
        edges=lambda: _binary_edges(path, dtype, o.progress),
    )
    return write_source(out, src, o)


def _binary_dtype(path: Path, binary_dtype: str | None) -> np.dtype:
    name = binary_dtype if binary_dtype is not None else BINARY_SUFFIXES.get(_suffix(path))
    if name not in ("int32", "int64"):
        raise ConfigError(
            f"binary edge list {path} needs binary_dtype='int32' or 'int64', got {name!r}"
        )
    return np.dtype(name).newbyteorder("<")


def _binary_edges(path: Path, dtype: np.dtype, progress: bool) -> EdgeChunks:
    with (
        open(path, "rb") as f,
        tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"read {path.name}",
            disable=not progress,
        ) as bar,
    ):
        while len(block := np.fromfile(f, dtype=dtype, count=2 * EDGE_BLOCK)):
            bar.update(block.nbytes)
            yield block[0::2], block[1::2]


def _suffix(path: Path) -> str:
    return path.suffix.lower()
