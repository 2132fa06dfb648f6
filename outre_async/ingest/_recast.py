"""``oa.recast`` / ``outre recast``: a copy of a dataset with its features stored in another dtype.

The features stream from the source chunk by chunk (read in blocks, not through a map: a file
truncated meanwhile is a named error, not a SIGBUS), are decoded to float32 and handed to a
:class:`~outre_async.store.DatasetWriter` of the new encoding, which checks, encodes and writes them
and measures the reconstruction error against the source's decoded values; topology, labels,
splits, edge splits and a reordered dataset's ids are copied through the same writer (checked like
any import).  The copy is atomic like every writer's: nothing is at ``out`` until it is whole.
Partitions and profiles are not copied: a profile prices rows of the old size, and both name the
dataset they were made for; partition the copy again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ConfigError
from ..store._dataset import Dataset, open_dataset
from ..store._file_reads import blocks
from ..store._manifest import FileEntry
from ..store._row_codec import decode_rows
from ..store._row_format import storage_dtype
from ..store._writer import DatasetWriter
from ._source import PathLike

CHUNK_BYTES = 32 << 20  # stored bytes read per chunk


def recast(dataset: PathLike | Dataset, out: PathLike, *, feature_dtype: str, overwrite: bool = False,
           progress: bool = False, chunk_bytes: int = CHUNK_BYTES) -> Path:
    """Write a copy of ``dataset`` at ``out`` whose features are stored as ``feature_dtype``
    (``float32``, ``float16``, ``bfloat16`` or ``int8``); returns ``out``.  A lossy cast records
    ``meta["feature_cast"]`` (``max_abs_error``, ``relative_rms`` against the source's values)."""
    ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
    storage_dtype(feature_dtype)  # a ConfigError naming the four before anything is written
    if not ds.feature_dim:
        raise ConfigError(f"dataset {ds.path} has no features to recast; it is topology-only")
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ConfigError(f"chunk_bytes={chunk_bytes!r} must be a positive integer")
    src = ds.row_format
    meta = {k: v for k, v in ds.manifest.meta.items() if k != "feature_cast"}
    meta["recast"] = {"source": str(ds.path), "from": src.encoding, "to": feature_dtype}
    same = feature_dtype == src.encoding  # rows copied as stored (int8: with their scales)
    with DatasetWriter(out, num_nodes=ds.num_nodes, feature_dim=ds.feature_dim, feature_dtype=feature_dtype,
                       num_classes=ds.num_classes if ds.labels is not None else None, overwrite=overwrite, meta=meta,
                       feature_scale=src.scale if same else None, feature_zero=src.zero if same else None) as w:
        w.write_csc(ds.indptr, ds.indices)
        for rows in _stored_rows(ds, chunk_bytes, progress):
            if same:
                w.append_stored_features(rows)
            else:
                w.append_features(decode_rows(rows, src))
        _copy_nodes_and_edges(w, ds)
    return Path(out)


def _stored_rows(ds: Dataset, chunk_bytes: int, progress: bool) -> Any:
    """The source's stored rows (padding dropped) in chunks of about ``chunk_bytes``, with a bar."""
    f = ds.manifest.features
    assert f is not None  # the caller checks
    width = f.stride // np.dtype(f.dtype).itemsize
    flat = FileEntry(file=f.file, dtype=f.dtype, shape=(ds.num_nodes * width,), nbytes=f.nbytes)
    rows_per_chunk = max(1, chunk_bytes // f.stride)
    with tqdm(total=ds.num_nodes, unit="row", unit_scale=True, desc=f"recast {f.encoding}", disable=not progress) as bar:
        for block in blocks(ds.path, flat, items=rows_per_chunk * width):
            rows = block.reshape(-1, width)[:, : f.dim]
            yield rows
            bar.update(len(rows))


def _copy_nodes_and_edges(w: DatasetWriter, ds: Dataset) -> None:
    if ds.labels is not None:
        w.write_labels(ds.labels)
    for name in ds.split_names:
        w.write_split(name, ds.split(name))
    for name in ds.edge_split_names:
        w.write_edge_split(name, ds.edge_split(name))
    if ds.reordered:
        w.write_node_ids(ds.original_ids(np.arange(ds.num_nodes)))


def recast_summary(path: PathLike) -> dict[str, Any]:
    """What ``outre recast`` reports: the copy's encoding, bytes a row and the cast's error."""
    ds = open_dataset(path)
    f = ds.manifest.features
    assert f is not None  # recast writes features
    return {"path": str(ds.path), "feature_dtype": f.encoding, "row_bytes": f.row_bytes, "stride": f.stride,
            "features_bytes": f.nbytes, "recast": ds.manifest.meta.get("recast"),
            "feature_cast": ds.manifest.meta.get("feature_cast")}
