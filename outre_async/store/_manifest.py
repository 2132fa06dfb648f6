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
from typing import Any

from ..errors import DatasetNotFoundError, FormatVersionError, ManifestError
# the entries and their parsers live in ``_manifest_entries`` (shared with ``_type_manifest``); their
# names stay importable from here, where every reader and writer has always found them
from ._manifest_entries import (
    ALLOWED_DTYPES,
    FEATURE_ENCODINGS,
    QUANTIZERS,
    FeatureEntry,
    FileEntry,
    _dict,
    _feature_entry,
    _file_entry,
    _int,
)
from ._safe_read import read_json
from ._type_manifest import TypesEntry, parse_types

__all__ = [  # the names other modules import from here, re-exports included
    "ALLOWED_DTYPES", "EDGE_SPLIT_NAMES", "FEATURE_ENCODINGS", "FORMAT_NAME", "FORMAT_VERSION", "MANIFEST_MAX_BYTES",
    "MANIFEST_NAME", "MAX_CLASSES", "QUANTIZERS", "READABLE_VERSIONS", "SPLIT_NAMES", "FeatureEntry", "FileEntry",
    "Manifest", "check_classes", "class_bound", "read_manifest",
]

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


def _split_name(name: Any, path: Path) -> str:
    if name not in SPLIT_NAMES:
        raise ManifestError(f"{path}: split names must be among {SPLIT_NAMES}, got {name!r}")
    return str(name)


def _edge_split_name(name: Any, path: Path) -> str:
    if name not in EDGE_SPLIT_NAMES:
        raise ManifestError(f"{path}: edge split names must be among {EDGE_SPLIT_NAMES}, got {name!r}")
    return str(name)
