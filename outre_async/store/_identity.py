"""What ties a derived folder (``partitions/<name>/``, ``profile/<name>/``, a reordered copy) to one
version of one dataset, and the check that refuses one computed for another.

A derived folder's meta records :func:`dataset_identity` when it is written; reading it back compares
that record with the dataset's identity now, key by key, so a dataset converted again (or another
dataset under the same path) is a named mismatch error instead of silently wrong partitions or plans.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path
from typing import Any

from ..errors import ManifestError, OutreError
from ._dataset import Dataset
from ._file_reads import open_data_file
from ._manifest import MANIFEST_MAX_BYTES, MANIFEST_NAME
from ._safe_read import read_capped


def dataset_identity(ds: Dataset) -> dict[str, Any]:
    """What ties partitions to one version of one dataset: counts, the manifest's hash (it holds the
    checksums of indptr, labels and splits) and a checksum of the first and last MiB of ``indices``."""
    manifest = read_capped(ds.path / MANIFEST_NAME, error=ManifestError, fix="re-create the dataset",
                           max_bytes=MANIFEST_MAX_BYTES)
    return {"num_nodes": ds.num_nodes, "num_edges": ds.num_edges,
            "manifest_sha256": hashlib.sha256(manifest).hexdigest(), "indices_probe_crc32": _probe(ds)}


def check_identity(ds: Dataset, path: Path, have: dict[str, Any], *, error: type[OutreError], made: str,
                   redo: str) -> None:
    """Refuse the derived folder ``path``, whose meta recorded the identity ``have``, unless ``ds`` still
    has it: ``error`` says where it differs (``made``: "computed for", ...) and what to do (``redo``)."""
    want = dataset_identity(ds)
    diff = [key for key in want if have.get(key) != want[key]]
    if diff:
        raise error(f"{path} was {made} another dataset or another version of {ds.path} "
                    f"(differs in {', '.join(diff)}); {redo}")


def _probe(ds: Dataset) -> int:
    path, size = ds.path / ds.manifest.indices.file, ds.manifest.indices.nbytes
    fd = open_data_file(path, size)  # a regular file of the manifest's size (_safe_read)
    try:
        head = os.pread(fd, 1 << 20, 0)
        tail = os.pread(fd, 1 << 20, max(0, size - (1 << 20)))
    finally:
        os.close(fd)
    return zlib.crc32(tail, zlib.crc32(head))
