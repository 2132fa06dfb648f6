"""The manifest's entry parsers: one array file (:class:`FileEntry`), the feature matrix
(:class:`FeatureEntry`), and the strict checks of the values inside them.

Apart from ``_manifest`` because both the manifest and its optional ``types`` section
(``_type_manifest``) describe files with these entries: each builds on this module, neither on the
other, so the two parsers never import each other.  Each entry is checked against itself
(``nbytes == prod(shape) * itemsize``, 1-D arrays, ``[2, E]`` edge splits, a feature stride of whole
items) and a malformed value raises :class:`ManifestError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ManifestError

# the logical dtype of the feature values (``features.encoding``) -> the dtype of its stored words
FEATURE_ENCODINGS = {"float32": "float32", "float16": "float16", "bfloat16": "uint16", "int8": "int8"}
QUANTIZERS = ("minmax",)  # how an int8 entry's scale and zero were chosen (``_row_codec.QUANTIZER``)
ALLOWED_DTYPES = {
    "indptr": ("int64",),
    "indices": ("int32", "int64"),
    "features": ("float32", "float16", "uint16", "int8"),  # the storage words of FEATURE_ENCODINGS
    "feature_params": ("float32",),
    "labels": ("int64",),
    "split": ("int64",),
    "node_ids": ("int64",),
    "edge_split": ("int64",),
    "type_per_edge": ("uint8", "uint16"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class FileEntry:
    """One array file: raw little-endian values, row-major, no header."""

    file: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    crc32: int | None = None  # recorded for the small files that are read whole


@dataclass(frozen=True, kw_only=True, slots=True)
class FeatureEntry:
    """The feature matrix: ``num_nodes`` rows of ``dim`` values, row ``v`` at byte ``v * stride``.

    ``dtype`` is the numpy dtype of the stored words, ``encoding`` the logical dtype of the values
    (``FEATURE_ENCODINGS``: bfloat16 is stored as uint16 words); an int8 entry names its per-column
    ``scale`` and ``zero`` files (float32 ``[dim]``, ``x = scale * (q - zero)``) and the ``quantizer``
    that chose them."""

    file: str
    dtype: str
    dim: int
    row_bytes: int
    stride: int
    layout: str
    nbytes: int
    encoding: str = ""  # "": the encoding of ``dtype`` (version 1, which named none)
    quantizer: str | None = None
    scale: FileEntry | None = None
    zero: FileEntry | None = None

    def __post_init__(self) -> None:
        if not self.encoding:
            object.__setattr__(self, "encoding", next(e for e, d in FEATURE_ENCODINGS.items() if d == self.dtype))

    @property
    def param_files(self) -> list[FileEntry]:
        """The files beside the matrix that decoding needs (an int8 entry's scale and zero)."""
        return [e for e in (self.scale, self.zero) if e is not None]


def _int(value: Any, key: str, path: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ManifestError(f"{path}: {key} must be a non-negative integer, got {value!r}")
    return value


def _dict(value: Any, key: str, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{path}: {key} must be an object, got {type(value).__name__}")
    return dict(value)


def _str(value: Any, key: str, path: Path) -> str:
    if not isinstance(value, str):
        raise ManifestError(f"{path}: {key} must be a string, got {value!r}")
    return value



def _dtype(value: Any, kind: str, path: Path) -> str:
    if value not in ALLOWED_DTYPES[kind]:
        raise ManifestError(f"{path}: {kind} dtype must be one of {ALLOWED_DTYPES[kind]}, got {value!r}")
    np.dtype(value)
    return str(value)


def _file_entry(doc: Any, kind: str, path: Path, *, dims: int = 1) -> FileEntry:
    """One array file's entry; ``dims=2``: an edge split, whose shape is ``[2, E]``."""
    doc = _dict(doc, kind, path)
    crc = doc.get("crc32")
    shape = doc["shape"]
    if not isinstance(shape, list) or len(shape) != dims or (dims == 2 and shape[0] != 2):
        want = "a list of one length" if dims == 1 else "[2, number of pairs]"
        raise ManifestError(f"{path}: {kind}.shape must be {want}, got {shape!r}")
    entry = FileEntry(
        file=_str(doc["file"], f"{kind}.file", path),
        dtype=_dtype(doc["dtype"], kind, path),
        shape=tuple(_int(s, f"{kind}.shape", path) for s in shape),
        nbytes=_int(doc["nbytes"], f"{kind}.nbytes", path),
        crc32=None if crc is None else _int(crc, f"{kind}.crc32", path),
    )
    want = int(np.prod(entry.shape)) * np.dtype(entry.dtype).itemsize
    if entry.nbytes != want:
        raise ManifestError(f"{path}: {kind} has nbytes={entry.nbytes}, but shape {list(entry.shape)} of "
                            f"{entry.dtype} is {want} bytes; re-create the dataset")
    return entry


def _feature_entry(doc: Any, path: Path, version: int) -> FeatureEntry:
    doc = _dict(doc, "features", path)
    dtype = _dtype(doc["dtype"], "features", path)
    encoding = _encoding(doc, dtype, path, version)
    entry = FeatureEntry(
        file=_str(doc["file"], "features.file", path),
        dtype=dtype,
        dim=_int(doc["dim"], "features.dim", path),
        row_bytes=_int(doc["row_bytes"], "features.row_bytes", path),
        stride=_int(doc["stride"], "features.stride", path),
        layout=_str(doc["layout"], "features.layout", path),
        nbytes=_int(doc["nbytes"], "features.nbytes", path),
        encoding=encoding,
        **_quantization(doc, encoding, path),
    )
    itemsize = np.dtype(entry.dtype).itemsize
    if (entry.dim == 0 or entry.row_bytes != entry.dim * itemsize or entry.stride < entry.row_bytes
            or entry.stride % itemsize or entry.layout not in ("packed", "padded")):
        raise ManifestError(f"{path}: the feature layout is inconsistent (dim={entry.dim}, dtype={entry.dtype}, "
                            f"row_bytes={entry.row_bytes}, stride={entry.stride}, layout={entry.layout!r}); "
                            "re-create the dataset")
    for name, param in (("scale", entry.scale), ("zero", entry.zero)):
        if param is not None and param.shape != (entry.dim,):
            raise ManifestError(f"{path}: features.{name} must hold one value per column, shape [{entry.dim}], "
                                f"got {list(param.shape)}; re-create the dataset")
    return entry


def _encoding(doc: dict[str, Any], dtype: str, path: Path, version: int) -> str:
    """The entry's logical dtype: named by a version-2 entry (and agreeing with its stored dtype),
    implied by the stored dtype in version 1 (float32 or float16 only)."""
    if version == 1:
        if dtype not in ("float32", "float16"):
            raise ManifestError(f"{path}: a format_version 1 feature entry stores float32 or float16, got {dtype!r}; "
                                "re-create the dataset")
        return dtype
    encoding = doc.get("encoding")
    if encoding not in FEATURE_ENCODINGS:
        raise ManifestError(f"{path}: features.encoding must be one of {sorted(FEATURE_ENCODINGS)}, got {encoding!r}; "
                            "re-create the dataset")
    if FEATURE_ENCODINGS[encoding] != dtype:
        raise ManifestError(f"{path}: {encoding} features are stored as {FEATURE_ENCODINGS[encoding]}, the entry says "
                            f"dtype {dtype!r}; re-create the dataset")
    return str(encoding)


def _quantization(doc: dict[str, Any], encoding: str, path: Path) -> dict[str, Any]:
    """An int8 entry's ``quantizer``, ``scale`` and ``zero`` (all three required); none for the others."""
    keys = ("quantizer", "scale", "zero")
    if encoding != "int8":
        extra = [k for k in keys if doc.get(k) is not None]
        if extra:
            raise ManifestError(f"{path}: features.{extra[0]} belongs to int8 features, the entry is {encoding}; "
                                "re-create the dataset")
        return {}
    missing = [k for k in keys if doc.get(k) is None]
    if missing:
        raise ManifestError(f"{path}: int8 features need features.{missing[0]} (quantized rows decode as "
                            "scale * (q - zero)); re-create the dataset")
    if doc["quantizer"] not in QUANTIZERS:
        raise ManifestError(f"{path}: features.quantizer must be one of {list(QUANTIZERS)}, got {doc['quantizer']!r}")
    return {"quantizer": doc["quantizer"],
            "scale": _file_entry(doc["scale"], "feature_params", path),
            "zero": _file_entry(doc["zero"], "feature_params", path)}
