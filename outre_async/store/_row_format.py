"""How a feature row is stored on disk, held in the loader's memory and delivered in a batch.

:class:`RowFormat` is built once from the manifest's feature entry (:meth:`RowFormat.of_entry`), and
every part that sizes or allocates feature rows reads its byte counts from it instead of assuming
four bytes a value: the feature buffer's slots, the static cache, the GPU tier, the batch matrices, the
memory plan (``loader._budget``), the profile's knapsack (``plan._budget_plan``).

Three dtypes, because they differ as soon as rows are stored narrower than they are trained on:

* ``stored``: the file's words (``float32``, ``float16``, ``uint16`` for ``bfloat16``, ``int8``),
  what a disk read moves; ``encoding`` names what the words mean (``float32``, ``float16``,
  ``bfloat16``, ``int8``: ``x = scale[c] * (q - zero[c])`` with per-column ``scale`` and ``zero``);
* ``held``: what the buffer, the static cache, the GPU tier, staging, the batch matrices and the
  host-to-device copy hold and move: the stored words, so a row costs its disk bytes everywhere and
  io_uring reads rows straight into slots whatever the dtype (``loader._setup``);
* ``delivered``: the words of a batch's ``x`` (``LoaderConfig.x_dtype``: ``float32``, ``float16``, or
  ``bfloat16`` as ``uint16`` words, numpy having no bfloat16).

Decoding, held to delivered, happens in one place, :mod:`outre_async.features._decode`, where a batch
is handed over (on the training device after its copy when that is a GPU, on the host otherwise).

:func:`._row_codec.decode_rows` is the NumPy reference every decode is tested against; ``scale`` and
``zero`` (float32, one per column) belong to ``int8`` rows only.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._manifest import FeatureEntry

FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)
BF16_WORDS = np.dtype(np.uint16)  # numpy has no bfloat16: its words are stored, held and delivered as uint16
INT8 = np.dtype(np.int8)
# the logical dtype the manifest names (``encoding``) -> the numpy dtype of its stored (and held) words
ENCODINGS = {"float32": FLOAT32, "float16": FLOAT16, "bfloat16": BF16_WORDS, "int8": INT8}
STORED_DTYPES = tuple(ENCODINGS.values())  # what a feature file may hold (``_manifest.ALLOWED_DTYPES``)
HELD_DTYPES = STORED_DTYPES                # rows are held as they are stored
LOSSY_ENCODINGS = ("float16", "bfloat16", "int8")
# what a batch's x may be (``x_dtype``): name -> its words
DELIVERED = {"float32": FLOAT32, "float16": FLOAT16, "bfloat16": BF16_WORDS}
_ENCODING_OF = {d: name for name, d in ENCODINGS.items()}


def storage_dtype(encoding: str) -> np.dtype:
    """The numpy dtype the rows of ``encoding`` are stored as (a :class:`ConfigError` for an unknown one)."""
    if encoding not in ENCODINGS:
        raise ConfigError(f"feature dtype must be one of {sorted(ENCODINGS)}, got {encoding!r}")
    return ENCODINGS[encoding]


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class RowFormat:
    """One feature row: ``dim`` values stored as ``stored`` words meaning ``encoding``, held as
    ``held`` (the stored words), delivered as ``delivered`` words (see the module)."""

    dim: int
    stored: np.dtype
    held: np.dtype | None = None          # None: the stored words
    delivered: np.dtype = FLOAT32
    scale: np.ndarray | None = None       # int8: float32 [dim], x = scale * (q - zero)
    encoding: str | None = None           # None: what ``stored`` means alone (uint16: bfloat16)
    zero: np.ndarray | None = None        # int8: float32 [dim]

    def __post_init__(self) -> None:
        object.__setattr__(self, "stored", np.dtype(self.stored))
        for name in ("held", "delivered"):
            value = getattr(self, name)
            object.__setattr__(self, name, self.stored if value is None else np.dtype(value))
        try:
            dim = operator.index(self.dim) if not isinstance(self.dim, bool) else None
        except TypeError:
            dim = None
        if dim is None or dim <= 0:
            raise ConfigError(f"a feature row needs an integer dim >= 1, got {self.dim=}")
        object.__setattr__(self, "dim", dim)
        if self.stored not in STORED_DTYPES:
            raise ConfigError(f"feature rows stored as {self.stored} are not supported; store float32, float16, "
                              "bfloat16 (uint16 words) or int8 rows")
        encoding = _ENCODING_OF[self.stored] if not self.encoding else self.encoding
        if ENCODINGS.get(encoding) != self.stored:
            raise ConfigError(f"feature rows encoded as {encoding!r} cannot be stored as {self.stored} words; "
                              f"pass one of {sorted(ENCODINGS)} with its words ({', '.join(map(str, STORED_DTYPES))})")
        object.__setattr__(self, "encoding", encoding)
        if self.held != self.stored:
            raise ConfigError(f"feature rows stored as {self.stored} cannot be held as {self.held}; rows are held as "
                              "they are stored (leave held out)")
        if self.delivered not in DELIVERED.values():
            raise ConfigError(f"feature rows delivered as {self.delivered} are not supported; deliver float32, "
                              "float16 or bfloat16 (uint16 words)")
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
                raise ConfigError(f"{self.encoding} feature rows take no scale or zero; only int8 rows are scaled")
            return
        for name in ("scale", "zero"):
            value = getattr(self, name)
            arr = None if value is None else np.asarray(value)
            if arr is None or arr.shape != (self.dim,) or arr.dtype != FLOAT32 or not np.isfinite(arr).all():
                raise ConfigError(f"int8 feature rows need a finite float32 {name} of shape ({self.dim},), got "
                                  f"{None if arr is None else f'{arr.dtype} {arr.shape}'}; pass the manifest's "
                                  f"per-column {name}")
            object.__setattr__(self, name, np.ascontiguousarray(arr))
        positive = np.asarray(self.scale) > 0
        if not positive.all():
            col = int(np.argmin(positive))
            raise ConfigError(f"int8 scales must be > 0, column {col} has {float(np.asarray(self.scale)[col])}; "
                              "re-quantize the features")

    @classmethod
    def of_entry(cls, entry: FeatureEntry, root: Path | None = None) -> RowFormat:
        """The format of the manifest's feature entry: its encoding stored and held (an int8 entry's
        scale and zero read from their files in ``root``, checksummed), float32 delivered."""
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
        """Rows of ``dim`` values of the logical dtype ``encoding`` (held as stored, float32 delivered)."""
        return cls(dim=dim, stored=storage_dtype(encoding), encoding=encoding, scale=scale, zero=zero)

    @classmethod
    def float32(cls, dim: int) -> RowFormat:
        """Rows of ``dim`` float32 values stored, held and delivered (spill files, history rows, tests)."""
        return cls(dim=dim, stored=FLOAT32)

    def delivering(self, x_dtype: str) -> RowFormat:
        """This format delivering ``x_dtype`` (a name of :data:`DELIVERED`, ``LoaderConfig.x_dtype``)."""
        if x_dtype not in DELIVERED:
            raise ConfigError(f"x_dtype={x_dtype!r} is not one a batch delivers; pass one of {sorted(DELIVERED)}")
        return replace(self, delivered=DELIVERED[x_dtype])

    @property
    def delivered_name(self) -> str:
        """The delivered dtype's name (``float32``, ``float16``, ``bfloat16``)."""
        return next(name for name, d in DELIVERED.items() if d == self.delivered)

    @property
    def decodes(self) -> bool:
        """Whether a batch's held rows must be decoded to be delivered (held words are not ``x``'s)."""
        return self.encoding != self.delivered_name

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
        """Bytes of one row in the buffer's slots, the static cache, the GPU tier and a batch matrix."""
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
        raise ConfigError(f"feature rows held as {held} are not supported; hold float32, float16, uint16 (bfloat16 "
                          "words) or int8 rows")
    return held
