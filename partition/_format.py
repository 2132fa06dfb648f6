"""The partition folder's format: its name and version, where it lives, and what ties it to a dataset.

Apart from the writer (``_output``, which needs the numba kernels) so that reading a folder's
``meta.json`` (``list_partitions``, hence ``outre info``) imports no numba.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from outre_async._errors import ConfigError
from outre_async.store._dataset import Dataset

FORMAT_NAME = "outre-async-partitions"
FORMAT_VERSION = 1
META_NAME = "meta.json"
PARTITIONS_DIR = "partitions"


def dataset_identity(ds: Dataset) -> dict[str, Any]:
    """What ties partitions to one version of one dataset: counts, the manifest's hash (it holds the
    checksums of indptr, labels and splits) and a checksum of the first and last MiB of ``indices``."""
    manifest = (ds.path / "manifest.json").read_bytes()
    return {"num_nodes": ds.num_nodes, "num_edges": ds.num_edges,
            "manifest_sha256": hashlib.sha256(manifest).hexdigest(), "indices_probe_crc32": _probe(ds)}


def _probe(ds: Dataset) -> int:
    path = ds.path / ds.manifest.indices.file
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(1 << 20)
        f.seek(max(0, size - (1 << 20)))
        tail = f.read(1 << 20)
    return zlib.crc32(tail, zlib.crc32(head))


def check_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip():
        raise ConfigError(f"partition name {name!r} must be a plain folder name (no '/', not starting with '.')")
    return name
