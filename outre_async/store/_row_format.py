"""How a feature row is stored on disk, held in the loader's memory and delivered in a batch.

:class:`RowFormat` is built once from the manifest's feature entry (:meth:`RowFormat.of_entry`), and
every part that sizes or allocates feature rows reads its byte counts from it instead of assuming
four bytes a value: the feature buffer's slots, the static cache, the GPU tier, the batch matrices, the
memory plan (``loader._budget``), the profile's knapsack (``plan._budget_plan``).

Three dtypes, because they differ as soon as rows are stored narrower than they are trained on:

* ``stored``: the file's dtype (``float32`` or ``float16`` today), what a disk read moves;
* ``held``: what the buffer, the static cache and the GPU tier hold (``float32`` today);
* ``delivered``: the dtype of a batch's ``x`` (``float32`` today).

Decoding, stored to held, happens where rows leave the staging arena (or the in-memory matrix) for
a slot or a batch row: :func:`outre_async.features._staging.gather_blocks` (``float16`` rows are
widened by numpy there; ``float32`` rows are a bit copy by ``_staging_kernels.scatter_rows``), and
in :class:`~outre_async.features.MemorySource` and ``loader._sync_loader.gather_features`` for the readers
that have no staging.  Held and delivered are the same dtype today, so nothing decodes after that.
io_uring reads rows straight into slots only when stored and held agree (``loader._setup``).

Only these formats are wired end to end; any other is refused here with a named error rather than
planned with sizes no reader honours.  ``scale`` is the per-column scale of quantized rows, which
nothing stores yet.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._manifest import FeatureEntry

FLOAT32 = np.dtype(np.float32)
STORED_DTYPES = (FLOAT32, np.dtype(np.float16))  # what the manifest may name (``_manifest.ALLOWED_DTYPES``)
HELD_DTYPES = (FLOAT32,)                         # what every cache and batch matrix is wired for


@dataclass(frozen=True, kw_only=True, slots=True)
class RowFormat:
    """One feature row: ``dim`` values stored as ``stored``, held as ``held``, delivered as ``delivered``."""

    dim: int
    stored: np.dtype
    held: np.dtype = FLOAT32
    delivered: np.dtype = FLOAT32
    scale: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("stored", "held", "delivered"):
            object.__setattr__(self, name, np.dtype(getattr(self, name)))
        try:
            dim = operator.index(self.dim) if not isinstance(self.dim, bool) else None
        except TypeError:
            dim = None
        if dim is None or dim <= 0:
            raise ConfigError(f"a feature row needs an integer dim >= 1, got {self.dim=}")
        object.__setattr__(self, "dim", dim)
        if self.stored not in STORED_DTYPES:
            raise ConfigError(f"feature rows stored as {self.stored} are not supported; store float32 or float16 rows")
        if self.held not in HELD_DTYPES or self.delivered not in HELD_DTYPES:
            raise ConfigError(f"feature rows held as {self.held} and delivered as {self.delivered} are not supported; "
                              "this version holds and delivers float32 rows")
        if self.scale is not None:
            raise ConfigError("scaled (quantized) feature rows are not supported by this version; store float32 or "
                              "float16 rows")

    @classmethod
    def of_entry(cls, entry: FeatureEntry) -> RowFormat:
        """The format of the manifest's feature entry: its dtype stored, float32 held and delivered."""
        return cls(dim=entry.dim, stored=np.dtype(entry.dtype))

    @classmethod
    def float32(cls, dim: int) -> RowFormat:
        """Rows of ``dim`` float32 values stored, held and delivered (spill files, history rows, tests)."""
        return cls(dim=dim, stored=FLOAT32)

    @property
    def stored_row_bytes(self) -> int:
        """Bytes of one row on disk, without the layout's padding (the stride is the layout's)."""
        return self.dim * self.stored.itemsize

    @property
    def held_row_bytes(self) -> int:
        """Bytes of one row in the buffer's slots, the static cache and the GPU tier."""
        return self.dim * self.held.itemsize

    @property
    def delivered_row_bytes(self) -> int:
        """Bytes of one row of a batch's ``x``."""
        return self.dim * self.delivered.itemsize


def held_dtype(dtype: DTypeLike) -> np.dtype:
    """``dtype`` as the dtype a cache holds rows in (a :class:`ConfigError` for one no cache is wired for):
    what the buffer, the static cache and the GPU tier take from ``RowFormat.held``."""
    held = np.dtype(dtype)
    if held not in HELD_DTYPES:
        raise ConfigError(f"feature rows held as {held} are not supported; this version holds float32 rows")
    return held
