"""Importers (``outre convert``): arrays, PyG ``Data``, ``.npz``, OGB, edge lists → a dataset.

This module only dispatches: :func:`convert` tells the format from the path and calls its
importer (``_arrays``, ``_pyg``, ``_npz``, ``_edge_list``, ``_ogb``); every importer streams its
input through the one write path of ``_source``, so an edge list larger than RAM converts.

Formats, as :func:`convert` detects them from the path (override with ``format=``):

=============  ==========================================================================
``ogb``        directory with ``raw/`` (``edge.csv``, optional ``node-feat``, ``node-label``,
               ``num-node-list`` .csv or .csv.gz) and optional ``split/<scheme>/{train,valid,test}``
``npz``        ``.npz`` in the schema of ``shared/data/README.md`` (dense ``x`` or CSR ``x_*``)
``pyg``        ``.pt``/``.pth``: a ``torch.save``-d PyG ``Data`` (or its ``to_dict()``).  Loaded
               with ``torch.load(weights_only=False)``, which unpickles and so can run code
               stored in the file: convert only files you trust (or re-save them as ``.npz``)
``edgelist``   text: ``.txt .csv .tsv .edges .el`` (optionally ``.gz``): two integer columns per
               line separated by blanks, tabs and/or a comma; ``#``/``%`` lines are comments;
               further columns (weights, timestamps) are ignored
``binary``     ``.i32``/``.i64``/``.bin``: little-endian int32/int64 pairs ``src dst`` back to back
=============  ==========================================================================

OGB notes (without the ``ogb`` package, ``undirected=True`` for ogbn-products and ogbn-proteins,
``valid`` → ``val``): see ``_ogb``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputFormatError
from ..store._overwrite import check_overwrite, dataset_names
from ._edge_list import BINARY_SUFFIXES, TEXT_SUFFIXES, from_binary_edges, from_text_edges
from ._formats import FORMATS
from ._npz import from_npz
from ._ogb import from_ogb
from ._pyg import from_pt
from ._source import PathLike, existing_path

__all__ = ["FORMATS", "convert", "detect_format"]



def convert(src: PathLike, out: PathLike, *, format: str | None = None, **opts: Any) -> Path:
    """Import ``src`` into the dataset directory ``out``; the format is detected from ``src``
    (module docstring) unless ``format`` is one of ``ogb, npz, pyg, edgelist, binary``."""
    path = Path(src)
    fmt = detect_format(path) if format is None else format
    if fmt not in _IMPORTERS:
        raise ConfigError(f"unknown input format {fmt!r}; the formats are {', '.join(FORMATS)}")
    if opts.get("overwrite"):  # replacing OUT must never delete the input (nor anything not ours)
        check_overwrite(Path(out), owned=dataset_names, what="dataset", inputs=(path,))
    return _IMPORTERS[fmt](path, out, **opts)


def detect_format(path: PathLike) -> str:
    """The format name for ``path``: an OGB folder, else by file name (see the module docstring)."""
    path = existing_path(path)
    if path.is_dir():
        if (path / "raw").is_dir():
            return "ogb"
        raise InputFormatError("is a directory but not an OGB folder (no raw/ inside)", path=path)
    return _format_from_name(path)


def _format_from_name(path: Path) -> str:
    name = path.name.lower()
    gz = name.endswith(".gz")
    suffix = Path(name[:-3] if gz else name).suffix
    by_suffix = {
        **dict.fromkeys(TEXT_SUFFIXES, "edgelist"),
        **dict.fromkeys(BINARY_SUFFIXES, "binary"),
        ".npz": "npz",
        ".pt": "pyg",
        ".pth": "pyg",
    }
    fmt = by_suffix.get(suffix)
    if fmt is None or (gz and fmt != "edgelist"):
        raise ConfigError(
            f"cannot tell the format of {path} from its name; "
            f"pass format= one of {', '.join(FORMATS)}"
        )
    return fmt


_IMPORTERS: dict[str, Callable[..., Path]] = {
    "ogb": from_ogb,
    "npz": from_npz,
    "pyg": from_pt,
    "edgelist": from_text_edges,
    "binary": from_binary_edges,
}
