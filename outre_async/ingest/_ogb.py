"""OGB node-property folders (``raw/*.csv[.gz]``, ``split/<scheme>/``) → a dataset, no ``ogb``.

Without the ``ogb`` package we do not read ``master.csv``, so for datasets that OGB makes
undirected on load (``add_inverse_edge``: ogbn-products, ogbn-proteins) pass ``undirected=True``.
OGB's ``valid`` split is our ``val``; NaN (or empty) labels become ``-1`` (unlabelled).  Only
single-graph, single-task (``ogbn-*``) CSV folders are supported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFormatError, InvalidGraphError
from ._edge_features import check_edge_features
from ._source import PathLike, Source, existing_path, parse_options, write_source
from ._text_parsing import csv_width, float_rows, line_blocks, read_ids, read_labels, text_edges


def from_ogb(
    path: PathLike,
    out: PathLike,
    *,
    split_scheme: str | None = None,
    num_nodes: int | None = None,
    num_classes: int | None = None,
    **opts: Any,
) -> Path:
    """Write an OGB node-property folder (``raw/*.csv[.gz]``, ``split/<scheme>/``) without ``ogb``.

    ``split_scheme`` picks ``split/<scheme>`` (default: the only one present).  ``num_nodes`` comes
    from ``num-node-list``, else the label or feature rows, else max edge id + 1."""
    o = parse_options(opts)
    root = existing_path(path)
    raw = root / "raw"
    if not raw.is_dir():
        raise InputFormatError("is not an OGB dataset folder: raw/ is missing", path=root)
    edge = _ogb_file(raw, "edge")
    if edge is None:
        raise InputFormatError("raw/edge.csv(.gz) is missing; an OGB folder needs it", path=root)
    if _ogb_file(raw, "edge-feat") is not None:  # ogbn-proteins: 8 features per edge
        check_edge_features(["edge_attr"], f"{root} (raw/edge-feat)", drop=o.drop_edge_features)
    feat, label = _ogb_file(raw, "node-feat"), _ogb_file(raw, "node-label")
    split_files = _ogb_split_files(root, split_scheme)
    labels = None if label is None else read_labels(label, o.progress)
    n = _ogb_num_nodes(num_nodes, _ogb_file(raw, "num-node-list"), labels, feat, o.progress)
    dim = 0 if feat is None else csv_width(feat)
    src = Source(
        description=str(root),
        format="ogb",
        num_nodes=n,
        num_classes=num_classes,
        edges=lambda: text_edges(edge, o.progress),
        feature_dim=dim,
        features=None if feat is None else lambda n: float_rows(feat, dim, o.progress),
        labels=None if labels is None else lambda n: _sized(labels, n, label),
        splits=lambda n: {name: read_ids(p) for name, p in split_files.items()},
    )
    return write_source(out, src, o)


def _ogb_file(directory: Path, stem: str) -> Path | None:
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (directory / name).is_file():
            return directory / name
    return None


def _ogb_num_nodes(
    given: int | None,
    node_list: Path | None,
    labels: np.ndarray | None,
    feat: Path | None,
    progress: bool,
) -> int | None:
    if given is not None:
        return given
    if node_list is not None:
        counts = read_ids(node_list)
        if len(counts) != 1:
            raise InputFormatError(
                f"lists {len(counts)} graphs; only single-graph (ogbn) folders are supported",
                path=node_list,
            )
        return int(counts[0])
    if labels is not None:
        return len(labels)
    if feat is not None:
        return sum(block.count(b"\n") for block in line_blocks(feat, progress))
    return None


def _sized(labels: np.ndarray, n: int, path: Path | None) -> np.ndarray:
    if len(labels) != n:
        raise InvalidGraphError(f"{path}: {len(labels)} labels but {n} nodes")
    return labels


def _ogb_split_files(root: Path, scheme: str | None) -> dict[str, Path]:
    """``{'train': .., 'val': .., 'test': ..}`` files in ``split/<scheme>``; OGB 'valid' = 'val'."""
    split_dir = root / "split"
    schemes = (
        sorted(p.name for p in split_dir.iterdir() if p.is_dir()) if split_dir.is_dir() else []
    )
    if scheme is None:
        if len(schemes) > 1:
            raise ConfigError(
                f"{split_dir} holds several split schemes {schemes}; pick one: split_scheme="
                f"{schemes[0]!r} (outre convert --split-scheme {schemes[0]})"
            )
        if not schemes:
            return {}
        scheme = schemes[0]
    if scheme not in schemes:
        raise ConfigError(f"split scheme {scheme!r} not found under {split_dir}; found {schemes} (split_scheme=, "
                          "--split-scheme)")
    files = {
        ours: _ogb_file(split_dir / scheme, theirs)
        for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test"))
    }
    found = {k: v for k, v in files.items() if v is not None}
    if not found:
        raise InputFormatError("holds no train/valid/test.csv(.gz)", path=split_dir / scheme)
    return found
