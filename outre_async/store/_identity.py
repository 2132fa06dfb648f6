"""What ties a derived folder (``partitions/<name>/``, ``profile/<name>/``, a reordered copy) to one
version of one dataset, and the check that refuses one computed for another.

A derived folder's meta records :func:`dataset_identity` when it is written; reading it back compares
that record with the dataset's identity now, key by key, so a dataset converted again (or another
dataset under the same path) is a named mismatch error instead of silently wrong partitions or plans.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from typing import Any

from .._errors import OutreError
from ._dataset import Dataset


def dataset_identity(ds: Dataset) -> dict[str, Any]:
    """What ties partitions to one version of one dataset: counts, the manifest's hash (it holds the
    checksums of indptr, labels and splits) and a checksum of the first and last MiB of ``indices``."""
    manifest = (ds.path / "manifest.json").read_bytes()
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
    path = ds.path / ds.manifest.indices.file
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(1 << 20)
        f.seek(max(0, size - (1 << 20)))
        tail = f.read(1 << 20)
    return zlib.crc32(tail, zlib.crc32(head))
