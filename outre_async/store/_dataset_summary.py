"""What ``Dataset.summary`` reports (and ``outre info`` prints): counts, degree statistics, the
feature encoding, file sizes, split sizes and, for a typed dataset, its types.

Apart from ``_dataset`` because it only describes: it reads the manifest and what the reader already
holds (the in-degrees, the splits, the row format) and the folder's file sizes, and checks nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._manifest import EDGE_SPLIT_NAMES, Manifest
from ._row_format import RowFormat


def summarize(path: Path, manifest: Manifest, deg: np.ndarray, splits: dict[str, np.ndarray],
              fmt: RowFormat | None) -> dict[str, Any]:
    """The summary of the dataset at ``path``; ``fmt``: its row format (None without features)."""
    sizes = {p.name: p.stat().st_size for p in sorted(path.iterdir()) if p.is_file()}
    return {
        "path": str(path),
        "num_nodes": manifest.num_nodes,
        "num_edges": manifest.num_edges,
        "num_classes": manifest.num_classes,
        "feature_dim": 0 if manifest.features is None else manifest.features.dim,
        "feature_dtype": None if manifest.features is None else manifest.features.encoding,
        "feature_encoding": None if manifest.features is None or fmt is None else _encoding_summary(manifest, fmt),
        "row_layout": None if manifest.features is None else {
            "row_bytes": manifest.features.row_bytes,
            "stride": manifest.features.stride,
            "layout": manifest.features.layout,
        },
        "in_degree": {
            "mean": float(deg.mean()), "median": float(np.median(deg)),
            "max": int(deg.max()), "p99": float(np.percentile(deg, 99)),
            "isolated": int((deg == 0).sum()),
        },
        "splits": {name: int(len(ids)) for name, ids in splits.items()},
        "edge_splits": {name: int(manifest.edge_splits[name].shape[1])
                        for name in EDGE_SPLIT_NAMES if name in manifest.edge_splits},
        "types": None if manifest.types is None else _type_summary(manifest),
        "bytes": sizes,
        "total_bytes": int(sum(sizes.values())),
        "meta": manifest.meta,
    }


def _encoding_summary(manifest: Manifest, fmt: RowFormat) -> dict[str, Any]:
    """The stored encoding of the features: its words, bytes a row, and an int8 entry's scales."""
    f = manifest.features
    assert f is not None  # callers check
    out: dict[str, Any] = {"encoding": f.encoding, "stored_as": f.dtype, "row_bytes": f.row_bytes,
                           "format_version": manifest.format_version}
    if fmt.scale is not None and fmt.zero is not None:
        lo, hi = fmt.scale * (-128 - fmt.zero), fmt.scale * (127 - fmt.zero)
        out.update(quantizer=f.quantizer, scale_min=float(fmt.scale.min()), scale_max=float(fmt.scale.max()),
                   range_min=float(lo.min()), range_max=float(hi.max()))
    return out


def _type_summary(manifest: Manifest) -> dict[str, Any]:
    """Per node type: count and features (dim, dtype); per edge type: edge count; the target types."""
    assert manifest.types is not None  # the caller checks
    return {
        "node_types": {t.name: {"count": t.count, "feature_dim": 0 if t.features is None else t.features.dim,
                                "feature_dtype": None if t.features is None else t.features.dtype}
                       for t in manifest.types.node_types},
        "edge_types": {"__".join(e.key): e.num_edges for e in manifest.types.edge_types},
        "target_types": list(manifest.types.target_types),
    }
