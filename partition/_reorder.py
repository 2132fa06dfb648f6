"""``reorder()``: a relabelled copy of a dataset in which every partition's nodes are contiguous.

Why: a macro batch (OUTRE §4.2) reads the feature rows of a few partitions' nodes and their
neighbours, most of them inside those partitions.  In storage order those rows are scattered over
the whole file, one short read each; numbered partition by partition they sit in a few long runs,
which the disk sources already coalesce into reads of up to ``max_read_bytes`` (``features._staging``).

Numbering: partition 0's nodes first, then partition 1's, ...; inside a partition, storage order
(the order ``part_nodes`` lists them, checked here).  New node ``i`` is original node
``part_nodes[i]``; partition ``p`` is the id range ``part_ptr[p]..part_ptr[p+1]``.  The new dataset
keeps the permutation (``original_ids`` and its inverse ``new_ids``, see ``store._manifest``;
:meth:`Dataset.original_ids` maps a batch's ``n_id`` back) and the same partitions, renumbered, under
the same name in its own ``partitions/``.

Every per-node array of the store is renumbered: ``features`` (rows moved), ``indptr``/``indices``
(node ``i``'s list is its original's, ids renumbered and *in the original order*: the sampler draws
list positions, so the same seeds, renumbered, give the original's sample renumbered, bit for bit),
``labels`` (moved), the splits (ids renumbered, order kept, so seed plans match too).

Passes, each sequential and bounded (``memory_bytes`` of buffers in all; besides them O(N) id
arrays, like the partitioner: the permutation both ways, the assignment, labels, ``indptr``):

1. topology: the partition folder's ``adj_indices`` already is the CSC in the new order with
   original ids; it is read in chunks of slots (range-checked), renumbered and appended.
2. features: the original ``features.bin`` is read in chunks of rows and each row's bytes are
   regrouped by partition on disk (:class:`~._buckets.Buckets`: one row of bytes per partition, K
   interleaved sequential write streams; an :class:`~._outfile.OutFile` bounds the dirty page cache),
   so features larger than RAM reorder in one pass.
3. labels, splits, the permutation (O(N)).
4. once the temporary folder is a complete dataset, ``partitions/<name>/`` is written into it by the
   partition writer (the same assignment, now contiguous); then the folder is installed.

Atomic like every writer: everything goes into the :class:`DatasetWriter`'s temporary folder, renamed
into place last; an error or a signal removes it (``--overwrite`` replaces only an outre dataset).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from outre_async.errors import ConfigError, NotSupportedError, PartitionCorruptError
from outre_async._units import format_bytes
from outre_async.store._dataset import Dataset, open_dataset
from outre_async.store._file_reads import open_data_file
from outre_async.store._overwrite import check_overwrite, dataset_names
from outre_async.store._writer import DatasetWriter

from ._buckets import MIN_ROW_BYTES, Buckets, row_items
from ._fennel import Assignment
from ._outfile import OutFile
from ._output import PartitionWriter, peak_rss_bytes
from ._output_kernels import group_by_part
from ._reader import PartitionSet, open_partitions
from ._stream import CscStream, pread_exact

MEMORY_BYTES = 64 << 20
_META_KEPT_OUT = {"format", "format_version", "name", "dataset", "num_parts", "quality", "peak_rss_bytes",
                  "files", "seconds"}  # what the partition writer sets itself


def memory_floor(num_parts: int, stride: int) -> int:
    """The least ``memory_bytes``: the partition writer's share (three quarters) must hold one 4 KiB
    row per partition in each of its three regrouped files, and a quarter a feature row."""
    return max(4 * MIN_ROW_BYTES * num_parts, 4 * max(stride, MIN_ROW_BYTES))


def reorder(dataset: Dataset | str | os.PathLike[str], partitions: str, out: str | os.PathLike[str], *,
            overwrite: bool = False, memory_bytes: int = MEMORY_BYTES) -> Dataset:
    """Write ``out``, ``dataset`` renumbered so that each of the partitions ``partitions``' nodes are
    contiguous (module docstring), and return it opened.  ``memory_bytes``: the buffers' bytes (the
    feature regrouping half, the read chunks a quarter each); below :func:`memory_floor` it is a
    :class:`ConfigError`."""
    ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
    if ds.is_hetero:  # a partition order interleaves the types; the typed layout needs each type's ids contiguous
        raise NotSupportedError(f"{ds.path} is heterogeneous: reordering a typed dataset is not supported yet (its "
                                "node types must stay contiguous id ranges); train on it without reordering")
    out = Path(out)
    parts = open_partitions(ds, partitions)
    try:
        floor = memory_floor(parts.num_parts, ds.row_layout.stride if ds.feature_dim else 0)
        if memory_bytes < floor:
            raise ConfigError(f"memory {format_bytes(memory_bytes)} is below the floor of {format_bytes(floor)} for "
                              f"{parts.num_parts} parts (16 KiB per part, 4 feature rows); give at least that")
        _check_output(ds, out, overwrite)
        new_to_old = _numbering(parts)
        started = time.perf_counter()
        with DatasetWriter(out, num_nodes=ds.num_nodes, num_classes=ds.num_classes, overwrite=overwrite,
                           meta=_dataset_meta(ds, parts)) as writer:
            old_to_new = np.empty_like(new_to_old)
            old_to_new[new_to_old] = np.arange(ds.num_nodes, dtype=np.int64)
            _write_topology(parts, old_to_new, writer, memory_bytes // 4)
            if ds.feature_dim:
                _write_features(ds, parts, writer, memory_bytes)
            if ds.labels is not None:
                writer.write_labels(ds.labels[new_to_old])
            for name in ds.split_names:
                writer.write_split(name, old_to_new[ds.split(name)])
            writer.write_node_ids(new_to_old)
            del old_to_new
            writer.commit(before_install=lambda tmp: _write_partitions(tmp, parts, new_to_old, memory_bytes,
                                                                       started))
    finally:
        parts.close()
    return open_dataset(out)


def _check_output(ds: Dataset, out: Path, overwrite: bool) -> None:
    """The output is never the input, nor inside it, nor around it (``--overwrite`` included)."""
    src, dst = os.path.realpath(ds.path), os.path.realpath(out)
    if os.path.commonpath([src, dst]) in (src, dst):
        raise ConfigError(f"the reordered dataset {out} must lie outside the input {ds.path} and not contain it; "
                          "choose another output folder")
    if overwrite:
        check_overwrite(out, owned=dataset_names, what="dataset", inputs=(ds.path,))


def _numbering(parts: PartitionSet) -> np.ndarray:
    """``new_to_old``: ``part_nodes``, which must list each partition's nodes in storage order (the
    feature pass places rows in that order; a folder that says otherwise is refused)."""
    k = parts.num_parts
    ptr, stable = group_by_part(parts.assignment, np.arange(len(parts.assignment), dtype=np.int64), k)
    wrong = stable != parts.part_nodes
    if wrong.any() or not np.array_equal(ptr, parts.part_ptr):
        i = int(np.argmax(wrong))
        raise PartitionCorruptError(f"{parts.path}: part_nodes item {i} = {int(parts.part_nodes[i])} breaks the "
                                    "storage order within its partition that the writer produces; re-partition")
    return stable


def _dataset_meta(ds: Dataset, parts: PartitionSet) -> dict[str, Any]:
    from outre_async.store._identity import dataset_identity

    return {**ds.manifest.meta, "reordered": {
        "from": str(ds.path), "partitions": parts.name, "num_parts": parts.num_parts,
        "source": dataset_identity(ds),
        "numbering": "partition by partition, storage order inside each; lists keep the original order"}}


def _write_topology(parts: PartitionSet, old_to_new: np.ndarray, writer: DatasetWriter, chunk_bytes: int) -> None:
    """Append the renumbered lists, node ``i`` = slot ``i`` of the partition order, in chunks of edges."""
    ds = parts.dataset
    adj_ptr = parts.adj_ptr
    chunk = max(chunk_bytes // 16, 1)  # per edge: the read id, its int64 renumbering, the narrowed copy written
    deg_max = int(np.diff(adj_ptr).max()) if ds.num_nodes else 0
    buf = np.empty(max(chunk, deg_max, 1), dtype=ds.manifest.indices.dtype)
    lo, n = 0, ds.num_nodes
    while lo < n:
        hi = int(np.searchsorted(adj_ptr, int(adj_ptr[lo]) + len(buf), side="right")) - 1  # int32 in RAM
        hi = min(max(hi, lo + 1), n)
        ptr, ids = parts.read_slots(lo, hi, buf)
        writer.append_neighbors(np.diff(ptr), old_to_new[ids])
        lo = hi


def _write_features(ds: Dataset, parts: PartitionSet, writer: DatasetWriter, memory_bytes: int) -> None:
    """Original rows in storage order, regrouped by partition into the new ``features.bin``."""
    stride, n, k = ds.row_layout.stride, ds.num_nodes, parts.num_parts
    rows_per_chunk = max(memory_bytes // 4 // stride, 1)
    chunk = np.empty(rows_per_chunk * stride, np.uint8)
    unit = np.arange(rows_per_chunk + 1, dtype=np.int64) * stride
    src = ds.features_path
    fd = open_data_file(src, n * stride)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        with OutFile(writer.tmp / "features.bin", np.uint8) as f_out:
            buckets = Buckets(f_out, parts.part_ptr[:-1] * stride, row_items(memory_bytes // 2, k, 1))
            for a in range(0, n, rows_per_chunk):
                b = min(a + rows_per_chunk, n)
                view = chunk[: (b - a) * stride]
                pread_exact(fd, view, a * stride, src)
                if hasattr(os, "posix_fadvise"):  # read once: keep the page cache (and a cgroup) clear
                    os.posix_fadvise(fd, a * stride, (b - a) * stride, os.POSIX_FADV_DONTNEED)
                buckets.add(parts.assignment[a:b], unit[: b - a + 1], view)
            buckets.flush()
            f_out.close(checksum=False)
    finally:
        os.close(fd)
    writer.adopt_features("features.bin", format=ds.row_format, layout=ds.row_layout)  # encoding and scales kept


def _write_partitions(tmp: Path, parts: PartitionSet, new_to_old: np.ndarray, memory_bytes: int,
                      started: float) -> None:
    """``tmp/partitions/<name>/``: the same partitions over the renumbered nodes (now id ranges)."""
    new_ds = open_dataset(tmp)
    assign = parts.assignment[new_to_old]
    meta = {key: value for key, value in parts.meta.items() if key not in _META_KEPT_OUT}
    meta["reordered_from"] = {"dataset": str(parts.dataset.path), "partitions": parts.name}
    meta["reorder_peak_rss_bytes"] = peak_rss_bytes()
    with PartitionWriter(new_ds, parts.name, buffer_bytes=memory_bytes // 4 * 3) as writer:
        stream = CscStream(new_ds, chunk_edges=max(memory_bytes // 4 // np.dtype(new_ds.manifest.indices.dtype).itemsize, 1))
        writer.write(Assignment(assign=assign, parts=parts.num_parts), stream, meta, started=started)
