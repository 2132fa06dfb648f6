"""``manifest.json``: the versioned description of an on-disk dataset, and its strict parser.

The manifest is written last by the writer (so a directory without one is never a dataset) and read
first by the reader.  Parsing checks types and required keys and raises :class:`ManifestError`
with the offending key, and checks each entry against itself (``nbytes == prod(shape) * itemsize``,
1-D arrays, ``[2, E]`` edge splits, a feature stride of whole items), so that no later size computed from it can disagree;
checking the files (names confined to the folder, sizes) and the counts is the reader's job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DatasetNotFoundError, FormatVersionError, ManifestError
from ._safe_read import read_json

if TYPE_CHECKING:
    from ._type_manifest import TypesEntry

FORMAT_NAME = "outre-async-dataset"
FORMAT_VERSION = 2
# version 1 stored float32 or float16 features and named no encoding; it reads as the same encodings
READABLE_VERSIONS = (1, 2)
MANIFEST_NAME = "manifest.json"
SPLIT_NAMES = ("train", "val", "test")
# link prediction's supervision pairs (``oa.split_edges``): [2, E] int64 each, source row first;
# ``val_neg``/``test_neg`` are the fixed evaluation negatives
EDGE_SPLIT_NAMES = ("train", "val", "test", "val_neg", "test_neg")
MANIFEST_MAX_BYTES = 16 << 20  # a manifest is a few KiB: a larger one is refused before it is read
# the model's output layer is num_classes wide: a stray label of 10**12 must not become a 32 TB weight;
# 2**20 is above every node-classification label set we know (extreme classification: ~670K)
MAX_CLASSES = 1 << 20
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
    # a relabelled dataset (``outre reorder``): node i here is node original_ids[i] of the original,
    # original node v is node new_ids[v] here; both present or both absent
    original_ids: FileEntry | None = None
    new_ids: FileEntry | None = None
    # link prediction's supervision pairs by name (EDGE_SPLIT_NAMES), each FileEntry of shape [2, E]
    edge_splits: dict[str, FileEntry] = field(default_factory=dict)
    # a heterogeneous dataset's node and edge types (``_type_manifest``); None: homogeneous.  Optional,
    # so manifests without it (every homogeneous dataset) read as before
    types: TypesEntry | None = None

    def to_json(self) -> str:
        doc = {"format": FORMAT_NAME, **asdict(self)}
        if self.types is None:
            del doc["types"]  # a homogeneous manifest is written exactly as before the section existed
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    def write(self, directory: Path) -> None:
        (directory / MANIFEST_NAME).write_text(self.to_json())


def read_manifest(directory: Path) -> Manifest:
    """Parse ``directory/manifest.json``; raise :class:`ManifestError` on anything malformed (read
    through ``_safe_read``: a regular file of at most ``MANIFEST_MAX_BYTES``, bounded JSON)."""
    path = directory / MANIFEST_NAME
    try:
        doc = read_json(path, error=ManifestError, fix="re-create the dataset", max_bytes=MANIFEST_MAX_BYTES)
    except FileNotFoundError as exc:
        raise DatasetNotFoundError(f"no dataset at {directory}: no {MANIFEST_NAME} (incomplete write?); "
                                   "re-create it") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ManifestError(f"{path} is not an outre-async manifest (format != {FORMAT_NAME!r})")
    version = doc.get("format_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise FormatVersionError(
            f"{path} has format_version {version!r}, this outre-async reads {list(READABLE_VERSIONS)}; "
            "re-convert the dataset with this version"
        )
    return _parse(doc, path, version)


def _parse(doc: dict[str, Any], path: Path, version: int = FORMAT_VERSION) -> Manifest:
    try:
        features = doc.get("features")
        labels = doc.get("labels")
        original_ids, new_ids = doc.get("original_ids"), doc.get("new_ids")
        if (original_ids is None) != (new_ids is None):
            raise ManifestError(f"{path}: original_ids and new_ids come together (a reordered dataset's permutation "
                                "and its inverse), one is missing; re-create the dataset")
        num_nodes, num_edges = _int(doc["num_nodes"], "num_nodes", path), _int(doc["num_edges"], "num_edges", path)
        manifest = Manifest(
            num_nodes=num_nodes,
            num_edges=num_edges,
            num_classes=_int(doc["num_classes"], "num_classes", path),
            indptr=_file_entry(doc["indptr"], "indptr", path),
            indices=_file_entry(doc["indices"], "indices", path),
            features=None if features is None else _feature_entry(features, path, version),
            labels=None if labels is None else _file_entry(labels, "labels", path),
            splits={
                _split_name(name, path): _file_entry(entry, "split", path)
                for name, entry in _dict(doc.get("splits", {}), "splits", path).items()
            },
            meta=_dict(doc.get("meta", {}), "meta", path),
            original_ids=None if original_ids is None else _file_entry(original_ids, "node_ids", path),
            new_ids=None if new_ids is None else _file_entry(new_ids, "node_ids", path),
            edge_splits={
                _edge_split_name(name, path): _file_entry(entry, "edge_split", path, dims=2)
                for name, entry in _dict(doc.get("edge_splits", {}), "edge_splits", path).items()
            },
            format_version=version,
            types=_types(doc.get("types"), path, num_nodes, num_edges, version),
        )
    except KeyError as exc:
        raise ManifestError(f"{path} lacks required key {exc}; re-create the dataset") from exc
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{path} has a malformed entry ({exc}); re-create the dataset") from exc
    if manifest.types is not None and manifest.types.target_types and manifest.labels is None:
        raise ManifestError(f"{path}: the types section names target types {list(manifest.types.target_types)} but "
                            "the manifest has no labels; re-create the dataset")
    if manifest.types is not None and manifest.features is not None:
        raise ManifestError(f"{path}: a typed dataset keeps its features per node type, yet the manifest also names "
                            "one feature file for all nodes; re-create the dataset")
    problem = check_classes(manifest.num_classes, manifest.num_nodes)
    if problem is not None:  # the trainer would allocate a num_classes-wide output layer from it
        raise ManifestError(f"{path}: {problem}; the manifest is damaged or hand-edited: re-create the dataset")
    return manifest


def _types(doc: Any, path: Path, num_nodes: int, num_edges: int, version: int) -> TypesEntry | None:
    if doc is None:
        return None
    from ._type_manifest import parse_types  # it builds on this module's entry parsers

    return parse_types(doc, path, num_nodes=num_nodes, num_edges=num_edges, version=version)


def class_bound(num_nodes: int) -> int:
    """The most classes a dataset of ``num_nodes`` nodes may have: class ids are dense (0..C-1), so a
    class no node could carry is a stray label; never more than ``MAX_CLASSES``, always 2 allowed."""
    return min(max(num_nodes, 2), MAX_CLASSES)


def check_classes(num_classes: int, num_nodes: int) -> str | None:
    """Why ``num_classes`` is out of bounds for ``num_nodes`` nodes (a message part), or None."""
    bound = class_bound(num_nodes)
    if num_classes <= bound:
        return None
    which = f"the cap of {MAX_CLASSES:,}" if bound == MAX_CLASSES else f"the node count ({num_nodes:,})"
    return f"num_classes={num_classes:,}, more than {which}"


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


def _split_name(name: Any, path: Path) -> str:
    if name not in SPLIT_NAMES:
        raise ManifestError(f"{path}: split names must be among {SPLIT_NAMES}, got {name!r}")
    return str(name)


def _edge_split_name(name: Any, path: Path) -> str:
    if name not in EDGE_SPLIT_NAMES:
        raise ManifestError(f"{path}: edge split names must be among {EDGE_SPLIT_NAMES}, got {name!r}")
    return str(name)


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
