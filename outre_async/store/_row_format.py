"""How a feature row is stored on disk, held in the loader's memory and delivered in a batch.

:class:`RowFormat` is built once from the manifest's feature entry (:meth:`RowFormat.of_entry`), and
every part that sizes or allocates feature rows reads its byte counts from it instead of assuming
four bytes a value: the feature buffer's slots, the static cache, the GPU tier, the batch matrices, the
memory plan (``loader._budget``), the profile's knapsack (``plan._budget_plan``).

Three dtypes, because they differ as soon as rows are stored narrower than they are trained on:

* ``stored``: the numpy dtype of the file's words, what a disk read moves: ``float32``, ``float16``,
  ``uint16`` (``bfloat16``: numpy has none, so the upper halves of float32 values are stored as words)
  or ``int8`` (quantized per column); ``encoding`` is the logical dtype the manifest names;
* ``held``: what the buffer, the static cache and the GPU tier hold (``float32`` by default);
* ``delivered``: the dtype of a batch's ``x`` (``float32`` by default).

Decoding, stored to held, is :func:`._row_codec.decode_rows` (the reference every faster path is
tested against), called where rows leave the staging arena (or the in-memory matrix) for a slot or a
batch row: :func:`outre_async.features._staging.gather_blocks` (``float32`` rows are a bit copy by
``_staging_kernels.scatter_rows``), :class:`~outre_async.features.MemorySource` and
``loader._sync_loader.gather_features`` for the readers that have no staging.
io_uring reads rows straight into slots only when stored and held agree (``loader._setup``).

``scale`` and ``zero`` (float32, one per column) belong to ``int8`` rows only: ``x = scale * (q - zero)``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._manifest import FeatureEntry

FLOAT32 = np.dtype(np.float32)
# the logical dtype the manifest names (``encoding``) -> the numpy dtype of its stored words
ENCODINGS = {
    "float32": FLOAT32,
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),  # the upper half of a float32, rounded to nearest even
    "int8": np.dtype(np.int8),        # x = scale[c] * (q - zero[c])
}
STORED_DTYPES = tuple(ENCODINGS.values())  # what a feature file may hold (``_manifest.ALLOWED_DTYPES``)
HELD_DTYPES = (FLOAT32,)                   # what every cache and batch matrix is wired for today
LOSSY_ENCODINGS = ("float16", "bfloat16", "int8")


def storage_dtype(encoding: str) -> np.dtype:
    """The numpy dtype the rows of ``encoding`` are stored as (a :class:`ConfigError` for an unknown one)."""
    if encoding not in ENCODINGS:
        raise ConfigError(f"feature dtype must be one of {sorted(ENCODINGS)}, got {encoding!r}")
    return ENCODINGS[encoding]


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class RowFormat:
    """One feature row: ``dim`` values of ``encoding`` stored as ``stored`` words, held as ``held``,
    delivered as ``delivered``; ``scale`` and ``zero`` (float32, ``dim`` each) for ``int8`` only."""

    dim: int
    stored: np.dtype
    held: np.dtype = FLOAT32
    delivered: np.dtype = FLOAT32
    scale: np.ndarray | None = None
    encoding: str = ""  # "": the encoding whose storage dtype is ``stored``
    zero: np.ndarray | None = None

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
            raise ConfigError(f"feature rows stored as {self.stored} are not supported; store one of {sorted(ENCODINGS)}")
        encoding = self.encoding or next(e for e, d in ENCODINGS.items() if d == self.stored)
        if storage_dtype(encoding) != self.stored:
            raise ConfigError(f"{encoding} rows are stored as {ENCODINGS[encoding]}, got {self.stored=}")
        object.__setattr__(self, "encoding", encoding)
        for name in ("held", "delivered"):
            dtype = getattr(self, name)
            if dtype not in HELD_DTYPES and dtype != self.stored:
                raise ConfigError(f"feature rows {name} as {dtype} are not supported; {name} float32 or the stored "
                                  f"{self.stored}")
        self._check_params()

    def __eq__(self, other: object) -> bool:
        """Equal formats decode alike: the same dtypes and dim, and equal int8 scales and zeros
        (compared by value: the generated ``__eq__`` would ask an array for one truth value)."""
        if not isinstance(other, RowFormat):
            return NotImplemented
        same = ((self.dim, self.stored, self.held, self.delivered, self.encoding)
                == (other.dim, other.stored, other.held, other.delivered, other.encoding))
        return same and all(_same_array(getattr(self, n), getattr(other, n)) for n in ("scale", "zero"))

    def __hash__(self) -> int:
        return hash((self.dim, self.stored, self.held, self.delivered, self.encoding))

    def _check_params(self) -> None:
        """``scale`` and ``zero``: both for int8 (float32, ``dim`` each, finite, scale > 0), neither otherwise."""
        if self.encoding != "int8":
            if self.scale is not None or self.zero is not None:
                raise ConfigError(f"scale and zero belong to int8 rows, not {self.encoding} rows; pass neither")
            return
        for name in ("scale", "zero"):
            value = getattr(self, name)
            if value is None:
                raise ConfigError(f"int8 rows need per-column {name} (float32, {self.dim} values), got None")
            arr = np.asarray(value)
            if arr.shape != (self.dim,) or arr.dtype != FLOAT32 or not np.isfinite(arr).all():
                raise ConfigError(f"int8 rows need a finite float32 {name} of shape ({self.dim},), "
                                  f"got {arr.dtype} {arr.shape}")
            object.__setattr__(self, name, arr)
        positive = np.asarray(self.scale) > 0
        if not positive.all():
            col = int(np.argmin(positive))
            raise ConfigError(f"int8 scales must be > 0, column {col} has {float(np.asarray(self.scale)[col])}; "
                              "re-quantize the features")

    @classmethod
    def of_entry(cls, entry: FeatureEntry, root: Path | None = None) -> RowFormat:
        """The format of the manifest's feature entry: its encoding stored (an int8 entry's scale and
        zero read from their files in ``root``, checksummed), float32 held and delivered."""
        scale = zero = None
        if entry.scale is not None and entry.zero is not None:
            if root is None:
                raise ConfigError("an int8 feature entry's scale and zero are files: pass the dataset folder")
            from ._file_reads import load_small  # the reader of the dataset's own files
            scale, zero = load_small(root, entry.scale), load_small(root, entry.zero)
        return cls(dim=entry.dim, stored=np.dtype(entry.dtype), encoding=entry.encoding, scale=scale, zero=zero)

    @classmethod
    def of_encoding(cls, encoding: str, dim: int, *, scale: np.ndarray | None = None,
                    zero: np.ndarray | None = None) -> RowFormat:
        """Rows of ``dim`` values of the logical dtype ``encoding`` (float32 held and delivered)."""
        return cls(dim=dim, stored=storage_dtype(encoding), encoding=encoding, scale=scale, zero=zero)

    @classmethod
    def float32(cls, dim: int) -> RowFormat:
        """Rows of ``dim`` float32 values stored, held and delivered (spill files, history rows, tests)."""
        return cls(dim=dim, stored=FLOAT32)

    @property
    def lossy(self) -> bool:
        """True when storing a float32 row in this encoding may change it."""
        return self.encoding in LOSSY_ENCODINGS

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


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is b or (a is not None and b is not None and np.array_equal(a, b))


def held_dtype(dtype: DTypeLike) -> np.dtype:
    """``dtype`` as the dtype a cache holds rows in (a :class:`ConfigError` for one no cache is wired for):
    what the buffer, the static cache and the GPU tier take from ``RowFormat.held``."""
    held = np.dtype(dtype)
    if held not in HELD_DTYPES:
        raise ConfigError(f"feature rows held as {held} are not supported; this version holds float32 rows")
    return held
