"""The partition folder's format: its name and version, where it lives, and the rule for its name
(what ties it to a dataset is ``outre_async.store._identity``).

Apart from the writer (``_output``, which needs the numba kernels) so that reading a folder's
``meta.json`` (``list_partitions``, hence ``outre info``) imports no numba.
"""

from __future__ import annotations

from outre_async.errors import ConfigError

FORMAT_NAME = "outre-async-partitions"
FORMAT_VERSION = 1
META_NAME = "meta.json"
PARTITIONS_DIR = "partitions"
MODES = ("exact", "bloom")  # FENNEL with exact neighbour counts, or a Bloom filter per partition (memory-bounded)
OBJECTIVES = ("fennel", "ldg")


def check_name(name: str) -> str:
    """The rule of a partition name, the profile name's (``plan._files.check_profile_name``): a plain
    folder name under ``partitions/``, also checked where a loader is configured (``partitions=``)."""
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip() or "\x00" in name:
        raise ConfigError(f"partition name {name!r} must be a plain folder name (no '/', not starting with '.')")
    return name
