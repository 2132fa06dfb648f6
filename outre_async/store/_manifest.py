"""``manifest.json``: the versioned description of an on-disk dataset, and its strict parser.

The manifest is written last by the writer (so a directory without one is never a dataset) and read
first by the reader.  Parsing checks types and required keys and raises :class:`ManifestError`
with the offending key; checking the files themselves against it is the reader's job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import FormatVersionError, ManifestError

FORMAT_NAME = "outre-async-dataset"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
SPLIT_NAMES = ("train", "val", "test")
ALLOWED_DTYPES = {
    "indptr": ("int64",),
    "indices": ("int32", "int64"),
    "features": ("float32", "float16"),
    "labels": ("int64",),
    "split": ("int64",),
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
    """The feature matrix: ``num_nodes`` rows of ``dim`` values, row ``v`` at byte ``v * stride``."""

    file: str
    dtype: str
    dim: int
    row_bytes: int
    stride: int
    layout: str
    nbytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    num_nodes: int
    num_edges: int
    num_classes: int
    indptr: FileEntry
    indices: FileEntry
    features: FeatureEntry | None
    labels: FileEntry | None
    splits: dict[str, FileEntry] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        doc = {"format": FORMAT_NAME, **asdict(self)}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    def write(self, directory: Path) -> None:
        (directory / MANIFEST_NAME).write_text(self.to_json())


def read_manifest(directory: Path) -> Manifest:
    """Parse ``directory/manifest.json``; raise :class:`ManifestError` on anything malformed."""
    path = directory / MANIFEST_NAME
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON ({exc}); re-create the dataset") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ManifestError(f"{path} is not an outre-async manifest (format != {FORMAT_NAME!r})")
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        raise FormatVersionError(
            f"{path} has format_version {version!r}, this outre-async reads {FORMAT_VERSION}; "
            "re-convert the dataset with this version"
        )
    return _parse(doc, path)


def _parse(doc: dict[str, Any], path: Path) -> Manifest:
    try:
        features = doc.get("features")
        labels = doc.get("labels")
        return Manifest(
            num_nodes=_int(doc["num_nodes"], "num_nodes", path),
            num_edges=_int(doc["num_edges"], "num_edges", path),
            num_classes=_int(doc["num_classes"], "num_classes", path),
            indptr=_file_entry(doc["indptr"], "indptr", path),
            indices=_file_entry(doc["indices"], "indices", path),
            features=None if features is None else _feature_entry(features, path),
            labels=None if labels is None else _file_entry(labels, "labels", path),
            splits={
                name: _file_entry(entry, "split", path)
                for name, entry in dict(doc.get("splits", {})).items()
            },
            meta=dict(doc.get("meta", {})),
        )
    except KeyError as exc:
        raise ManifestError(f"{path} lacks required key {exc}; re-create the dataset") from exc
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{path} has a malformed entry ({exc}); re-create the dataset") from exc


def _int(value: Any, key: str, path: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ManifestError(f"{path}: {key} must be a non-negative integer, got {value!r}")
    return value


def _dtype(value: Any, kind: str, path: Path) -> str:
    if value not in ALLOWED_DTYPES[kind]:
        raise ManifestError(f"{path}: {kind} dtype must be one of {ALLOWED_DTYPES[kind]}, got {value!r}")
    np.dtype(value)
    return str(value)


def _file_entry(doc: dict[str, Any], kind: str, path: Path) -> FileEntry:
    crc = doc.get("crc32")
    return FileEntry(
        file=str(doc["file"]),
        dtype=_dtype(doc["dtype"], kind, path),
        shape=tuple(_int(s, f"{kind}.shape", path) for s in doc["shape"]),
        nbytes=_int(doc["nbytes"], f"{kind}.nbytes", path),
        crc32=None if crc is None else _int(crc, f"{kind}.crc32", path),
    )


def _feature_entry(doc: dict[str, Any], path: Path) -> FeatureEntry:
    return FeatureEntry(
        file=str(doc["file"]),
        dtype=_dtype(doc["dtype"], "features", path),
        dim=_int(doc["dim"], "features.dim", path),
        row_bytes=_int(doc["row_bytes"], "features.row_bytes", path),
        stride=_int(doc["stride"], "features.stride", path),
        layout=str(doc["layout"]),
        nbytes=_int(doc["nbytes"], "features.nbytes", path),
    )
