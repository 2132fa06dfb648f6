"""The one write path every importer shares: options, the lazy :class:`Source`, the atomic write.

Every importer describes its input as a :class:`Source` whose parts are produced lazily, and
:func:`write_source` streams it into one atomic :class:`DatasetWriter`: edges through the external
sort of ``_csc_builder`` (memory bounded by ``memory_budget`` plus O(N), whatever E is), then
features in row blocks, labels and splits.

Edge direction: a pair ``(src, dst)`` (a column of ``edge_index``: row 0 source, row 1 target, as in
PyG; a line ``src dst`` of an edge list) is a message ``src → dst``; the store keeps it as ``src``
in the in-neighbour list of ``dst``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetExistsError, InputFormatError, InvalidGraphError
from .._units import parse_bytes
from ..store._layout import RowLayoutName
from ..store._manifest import FEATURE_ENCODINGS
from ..store._overwrite import check_overwrite, dataset_names
from ..store._writer import DatasetWriter
from ._csc_builder import DEFAULT_MEMORY_BUDGET, MIN_MEMORY_BUDGET, CSCBuilder

EDGE_BLOCK = 1 << 22  # pairs per block for in-memory and binary edges
PathLike = str | os.PathLike[str]
EdgeChunks = Iterator[tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvertOptions:
    """The ``**opts`` every importer takes; validated here so a typo fails before any work."""

    undirected: bool = False  # add the reverse of every edge (self loops are not doubled)
    drop_self_loops: bool = False
    dedupe: bool = False  # keep one copy of repeated (src, dst) pairs
    overwrite: bool = False
    progress: bool = False  # tqdm bars on stderr
    memory_budget: int | str = DEFAULT_MEMORY_BUDGET  # bytes for the edge sort ("512MiB" accepted)
    feature_dtype: str | None = None  # None: a float16 (bfloat16) input stays so, anything else is stored float32
    drop_edge_features: bool = False  # else edge_attr / edge_weight / link targets are a NotSupportedError
    row_layout: RowLayoutName = "auto"
    name: str | None = None  # recorded in the manifest meta (default: the output directory name)
    meta: dict[str, Any] | None = None  # extra JSON-serialisable manifest meta
    tmp_dir: PathLike | None = None  # where sort spill files go (default: beside the output)

    def __post_init__(self) -> None:
        object.__setattr__(self, "memory_budget", parse_bytes(self.memory_budget))
        if int(self.memory_budget) < MIN_MEMORY_BUDGET:
            raise ConfigError(
                f"memory_budget must be >= {MIN_MEMORY_BUDGET} bytes, got {self.memory_budget}"
            )
        if self.feature_dtype is not None and self.feature_dtype not in FEATURE_ENCODINGS:
            raise ConfigError(
                f"feature_dtype must be one of {sorted(FEATURE_ENCODINGS)}, got {self.feature_dtype=}"
            )
        if self.row_layout not in ("auto", "padded", "packed"):
            raise ConfigError(
                f"row_layout must be 'auto', 'padded' or 'packed', got {self.row_layout=}"
            )
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"meta must be JSON-serialisable: {exc}") from exc


def parse_options(opts: dict[str, Any]) -> ConvertOptions:
    known = sorted(f.name for f in fields(ConvertOptions))
    unknown = sorted(set(opts) - set(known))
    if unknown:
        raise ConfigError(f"option(s) {unknown} do not apply here; the options are {known}")
    return ConvertOptions(**opts)


@dataclass(kw_only=True)
class Source:
    """An importer's input, produced lazily so that large inputs stream.

    ``features``, ``labels`` and ``splits`` are called with the final node count (which is only
    known after the edges when it comes from the largest id)."""

    description: str
    format: str
    edges: Callable[[], EdgeChunks]
    num_nodes: int | None = None  # None: max edge id + 1
    feature_dim: int = 0
    features: Callable[[int], Iterator[np.ndarray]] | None = None
    labels: Callable[[int], np.ndarray] | None = None
    splits: Callable[[int], dict[str, np.ndarray]] = field(default=lambda n: {})
    num_classes: int | None = None
    feature_dtype: str | None = None  # the input's own dtype of the features, where it has one


def stored_feature_dtype(src: Source, o: ConvertOptions) -> str:
    """What the features are stored as: the option when given, else float16 (bfloat16) for a float16
    (bfloat16) input (not widened: twice the bytes on disk and in every cache for no precision), else
    float32."""
    if o.feature_dtype is not None:
        return o.feature_dtype
    return src.feature_dtype if src.feature_dtype in ("float16", "bfloat16") else "float32"


def write_source(out: PathLike, src: Source, o: ConvertOptions) -> Path:
    """Sort the edges, then write topology, features, labels and splits into one atomic dataset."""
    out = Path(out)
    if os.path.lexists(out) and not o.overwrite:
        raise DatasetExistsError(f"{out} already exists; choose another path or pass overwrite")
    if o.overwrite:  # fail before the sort, not after it (the writer checks again)
        check_overwrite(out, owned=dataset_names, what="dataset")
    out.parent.mkdir(parents=True, exist_ok=True)
    with CSCBuilder(
        num_nodes=src.num_nodes,
        undirected=o.undirected,
        drop_self_loops=o.drop_self_loops,
        dedupe=o.dedupe,
        memory_budget=int(o.memory_budget),
        progress=o.progress,
        tmp_dir=Path(o.tmp_dir) if o.tmp_dir is not None else out.parent,
        tmp_stem=out.name,
    ) as builder:
        for s, d in src.edges():
            builder.add(s, d)
        if builder.num_edges == 0:
            left = " left after dropping self loops" if o.drop_self_loops else ""
            raise InvalidGraphError(f"empty graph: {src.description} has no edges{left}")
        with DatasetWriter(
            out,
            num_nodes=builder.num_nodes,
            feature_dim=src.feature_dim,
            feature_dtype=stored_feature_dtype(src, o),
            num_classes=src.num_classes,
            row_layout=o.row_layout,
            overwrite=o.overwrite,
            meta=_meta(src, o, out),
        ) as writer:
            builder.write_to(writer)
            _write_nodes(writer, src, o)
    return out


def _write_nodes(writer: DatasetWriter, src: Source, o: ConvertOptions) -> None:
    n = writer.num_nodes
    if src.features is not None:
        rows = 0
        for block in src.features(n):
            if rows + len(block) > n:
                raise InvalidGraphError(f"{src.description}: more feature rows than the {n} nodes")
            writer.append_features(np.asarray(block))  # encoded (and checked) by the writer
            rows += len(block)
        if rows != n:
            raise InvalidGraphError(f"{src.description}: {rows} feature rows but {n} nodes")
    if src.labels is not None:
        writer.write_labels(src.labels(n))
    for name, ids in src.splits(n).items():
        writer.write_split(name, ids)


def _meta(src: Source, o: ConvertOptions, out: Path) -> dict[str, Any]:
    meta = {
        "name": o.name or out.name,
        "source": src.description,
        "format": src.format,
        "undirected": o.undirected,
        "drop_self_loops": o.drop_self_loops,
        "dedupe": o.dedupe,
    }
    return {**meta, **(o.meta or {})}


def existing_path(path: PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputFormatError("no such file or directory", path=path)
    return path
