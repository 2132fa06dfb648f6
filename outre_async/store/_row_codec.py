"""Feature rows between float32 and their stored encoding: the NumPy reference of every decode.

:func:`encode_rows` turns float32 rows into the stored words of a :class:`RowFormat`,
:func:`decode_rows` turns stored words back into float32; every faster path (a numba kernel, a
decode on the device) is tested for equality against :func:`decode_rows`.

* ``float16``: numpy's cast (round to nearest even); a value beyond float16's range would become
  inf, so :func:`encode_rows` refuses it (:class:`NonFiniteFeatureError` naming the row).
* ``bfloat16``: the upper 16 bits of the float32, rounded to nearest even, the way torch casts
  (``x.to(torch.bfloat16)``); decoded by shifting the word back up (exact).
* ``int8``: ``q = clip(rint(x / scale + zero), -128, 127)``, decoded as ``scale * (q - zero)`` in
  float32.  :class:`ColumnRange` is the streaming pass that finds each column's min and max and
  :meth:`ColumnRange.params` the scale and zero that map ``[min, max]`` onto ``[-128, 127]``
  (``QUANTIZER = "minmax"``, what the manifest records): no value is clipped, and each is off by at
  most ``scale / 2`` (plus float32 rounding of the decode).  A constant column gets a scale of
  ``|value| / 128`` (1 for zeros), which decodes it exactly and divides by nothing.

:class:`CastError` accumulates the reconstruction error of a lossy cast chunk by chunk (max
absolute error, relative RMS), which the writers record in the manifest's ``meta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, NonFiniteFeatureError
from ._row_format import FLOAT32, RowFormat

QUANTIZER = "minmax"  # how int8 scales are chosen: each column's [min, max] onto [-128, 127]
_Q_LO, _Q_HI = -128, 127


def encode_rows(x: np.ndarray, fmt: RowFormat, *, first_row: int = 0) -> np.ndarray:
    """``x`` (``[k, dim]``, finite floats) as a fresh ``[k, dim]`` array of ``fmt.stored`` words.

    Raises :class:`NonFiniteFeatureError` naming the row (``first_row`` + its index) of a NaN or inf,
    or of a value the encoding cannot hold (beyond float16's or bfloat16's range)."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != fmt.dim:
        raise ConfigError(f"rows to encode must have shape [k, {fmt.dim}], got {x.shape}")
    x = as_float32(x, first_row)
    if fmt.encoding == "float32":
        return x
    if fmt.encoding == "float16":
        with np.errstate(over="ignore"):
            out = x.astype(np.float16)
        check_finite(out, first_row, why=f"beyond float16's range (±{float(np.finfo(np.float16).max):g})", given=x)
        return out
    if fmt.encoding == "bfloat16":
        return _encode_bf16(x, first_row)
    return _encode_int8(x, fmt)


def decode_rows(stored: np.ndarray, fmt: RowFormat, out: np.ndarray | None = None) -> np.ndarray:
    """``stored`` (``[k, dim]`` words of ``fmt.stored``, any strides) as float32 values, written into
    ``out`` (``[k, dim]`` float32, any strides) when given, else into a fresh array; returns it."""
    stored = np.asarray(stored)
    if stored.dtype != fmt.stored or stored.ndim != 2 or stored.shape[1] != fmt.dim:
        raise ConfigError(f"stored rows must be [k, {fmt.dim}] {fmt.stored}, got {stored.dtype} {stored.shape}")
    if out is None:
        out = np.empty(stored.shape, dtype=FLOAT32)
    elif out.dtype != FLOAT32 or out.shape != stored.shape:
        raise ConfigError(f"decoded rows go to a float32 array of shape {stored.shape}, got {out.dtype} {out.shape}")
    if fmt.encoding == "bfloat16":
        np.left_shift(stored, np.uint32(16), out=out.view(np.uint32), dtype=np.uint32)
    elif fmt.encoding == "int8":
        assert fmt.scale is not None and fmt.zero is not None  # RowFormat requires both for int8
        np.subtract(stored, fmt.zero, out=out, dtype=FLOAT32)
        np.multiply(out, fmt.scale, out=out)
    else:
        np.copyto(out, stored)
    return out


def as_float32(x: np.ndarray, first_row: int = 0) -> np.ndarray:
    """``x`` as float32 (a copy), after checking that every value is finite and within float32's range
    (:class:`NonFiniteFeatureError` naming the row otherwise)."""
    check_finite(x, first_row)
    with np.errstate(over="ignore"):
        out = np.array(x, dtype=FLOAT32)
    if x.dtype != FLOAT32:
        check_finite(out, first_row, why=f"beyond float32's range (±{float(np.finfo(np.float32).max):g})", given=x)
    return out


def check_finite(x: np.ndarray, first_row: int = 0, *, why: str = "NaN or inf",
                 given: np.ndarray | None = None) -> None:
    """Raise :class:`NonFiniteFeatureError` naming the first row of ``x`` (numbered from
    ``first_row``) that holds a value that is not finite (``given``: the values shown, ``x`` if None)."""
    bad = ~np.isfinite(x)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        row = first_row + r
        shown = float((x if given is None else given)[r, c])
        more = int(bad.sum()) - 1
        also = f", and {more} more in rows {row}..{first_row + len(x) - 1}" if more else ""
        raise NonFiniteFeatureError(f"feature row {row} holds {shown:g} at column {c} ({why}){also}; clean the "
                                    "features (np.nan_to_num, or drop the node) and re-import", row=row)


def _encode_bf16(x: np.ndarray, first_row: int) -> np.ndarray:
    """Round-to-nearest-even on the dropped 16 bits (torch's float32 -> bfloat16 cast), finite ``x``."""
    bits = np.ascontiguousarray(x).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    words = (rounded >> np.uint32(16)).astype(np.uint16)
    overflow = (words & np.uint16(0x7F80)) == np.uint16(0x7F80)
    if overflow.any():
        check_finite(np.where(overflow, np.inf, 0.0), first_row, why="beyond bfloat16's range", given=x)
    return words


def _encode_int8(x: np.ndarray, fmt: RowFormat) -> np.ndarray:
    assert fmt.scale is not None and fmt.zero is not None  # RowFormat requires both for int8
    q = np.rint(x / fmt.scale.astype(np.float64) + fmt.zero.astype(np.float64))
    return np.clip(q, _Q_LO, _Q_HI).astype(np.int8)


@dataclass(kw_only=True, slots=True)
class ColumnRange:
    """Per-column min and max over the rows seen so far (the quantizer's streaming pass)."""

    dim: int
    lo: np.ndarray = field(init=False)
    hi: np.ndarray = field(init=False)
    rows: int = 0

    def __post_init__(self) -> None:
        self.lo = np.full(self.dim, np.inf)
        self.hi = np.full(self.dim, -np.inf)

    def update(self, x: np.ndarray, first_row: int = 0) -> None:
        """Take ``[k, dim]`` finite rows into account (NaN or inf: :class:`NonFiniteFeatureError`)."""
        x = as_float32(x, first_row)
        if len(x):
            np.minimum(self.lo, x.min(axis=0), out=self.lo)
            np.maximum(self.hi, x.max(axis=0), out=self.hi)
        self.rows += len(x)

    def params(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scale, zero)``, float32: ``[min, max]`` of each column onto ``[-128, 127]`` (see the module)."""
        lo = np.where(self.rows > 0, self.lo, 0.0)
        hi = np.where(self.rows > 0, self.hi, 0.0)
        span = hi - lo
        # a constant column: |value| / 128 maps it to q = -128 exactly (zero -256 above 0, 0 below); a
        # value too small for that scale to be a normal float32 gets scale 1 and decodes to 0 (error < 1/2)
        exact = np.abs(lo) / -_Q_LO >= np.finfo(FLOAT32).tiny
        flat = hi <= lo
        lo = np.where(flat & ~exact, 0.0, lo)
        scale = np.where(flat, np.where(lo == 0, 1.0, np.abs(lo) / -_Q_LO), span / (_Q_HI - _Q_LO))
        scale32 = scale.astype(FLOAT32)
        # a scale rounded down to float32 would clip the column's max: take the next float32 up
        short = scale32.astype(np.float64) < scale
        scale32[short] = np.nextafter(scale32[short], np.float32(np.inf))
        zero = np.where(flat, np.where(lo > 0, 2 * _Q_LO, np.where(lo < 0, 0.0, _Q_LO)),
                        _Q_LO - lo / scale32.astype(np.float64))
        return scale32, zero.astype(FLOAT32)


@dataclass(slots=True)
class CastError:
    """The reconstruction error of a cast, accumulated chunk by chunk: ``max_abs_error`` and
    ``relative_rms`` (the RMS of the error over the RMS of the values, 0 for all-zero values)."""

    max_abs: float = 0.0
    err_sq: float = 0.0
    val_sq: float = 0.0
    values: int = 0

    def update(self, x: np.ndarray, decoded: np.ndarray) -> None:
        diff = decoded.astype(np.float64) - x
        if diff.size:
            self.max_abs = max(self.max_abs, float(np.abs(diff).max()))
        self.err_sq += float(np.square(diff).sum())
        self.val_sq += float(np.square(x, dtype=np.float64).sum())
        self.values += int(x.size)

    def report(self) -> dict[str, float]:
        rel = float(np.sqrt(self.err_sq / self.val_sq)) if self.val_sq > 0 else 0.0
        return {"max_abs_error": self.max_abs, "relative_rms": rel}
