"""The row codec, the NumPy reference every decode is tested against: bfloat16 equal to torch's own
cast, float16 to numpy's, int8 within half a quantization step (constant and adversarial columns
included), and values no encoding can hold refused with the row named."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from outre_async.errors import ConfigError, InvalidGraphError, NonFiniteFeatureError
from outre_async.store import RowFormat
from outre_async.store._row_codec import CastError, ColumnRange, decode_rows, encode_rows

F32_EPS = float(np.finfo(np.float32).eps)


def _int8(x: np.ndarray, chunks: int = 3) -> RowFormat:
    """The int8 format whose scales a streaming pass over ``x`` (in ``chunks`` pieces) finds."""
    rng = ColumnRange(dim=x.shape[1])
    for i, part in enumerate(np.array_split(x, chunks)):
        rng.update(part, first_row=i)
    scale, zero = rng.params()
    return RowFormat.of_encoding("int8", x.shape[1], scale=scale, zero=zero)


def _wide_rows(seed: int = 0, n: int = 500, dim: int = 37) -> np.ndarray:
    """Values spread over many binades (1e-30 .. 1e30 by column), both signs, exact ties included."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, dim)) * 10.0 ** rng.uniform(-30, 30, dim)).astype(np.float32)
    x[0, :4] = [1.00390625, 1.01171875, -1.00390625, 3.3895314e38]  # ties to even; rounds up to bf16's max
    return x


def test_bfloat16_equals_torchs_cast_and_decodes_by_a_shift() -> None:
    x = _wide_rows()
    fmt = RowFormat.of_encoding("bfloat16", x.shape[1])
    words = encode_rows(x, fmt)
    assert words.dtype == np.uint16 and words.shape == x.shape
    want = torch.tensor(x).to(torch.bfloat16)
    assert np.array_equal(words, want.view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(decode_rows(words, fmt), want.to(torch.float32).numpy())


def test_float16_is_numpys_cast_and_float32_is_exact() -> None:
    x = np.random.default_rng(1).standard_normal((50, 9)).astype(np.float32) * 100
    f16, f32 = RowFormat.of_encoding("float16", 9), RowFormat.of_encoding("float32", 9)
    assert np.array_equal(decode_rows(encode_rows(x, f16), f16), x.astype(np.float16).astype(np.float32))
    assert np.array_equal(decode_rows(encode_rows(x, f32), f32), x)


def test_int8_error_is_at_most_half_a_step_over_many_binades() -> None:
    x = _wide_rows(seed=2)
    fmt = _int8(x)
    assert fmt.scale is not None and fmt.zero is not None
    q = encode_rows(x, fmt)
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127  # the range is used end to end
    err = np.abs(decode_rows(q, fmt).astype(np.float64) - x)
    bound = fmt.scale / 2 + 4 * F32_EPS * np.abs(x).max(axis=0)  # half a step, plus float32 decode rounding
    assert (err <= bound).all()
    assert np.array_equal(decode_rows(q, fmt), (q.astype(np.float32) - fmt.zero) * fmt.scale)  # the formula


@pytest.mark.parametrize("value", [0.0, 5.0, -3.0, 1e-35, -2.5e38, 3.4e38])
def test_a_constant_column_decodes_exactly_without_dividing_by_zero(value: float) -> None:
    x = np.full((20, 3), np.float32(value))
    x[:, 1] = np.linspace(-1, 1, 20)  # a column with a range beside it
    with np.errstate(divide="raise", over="raise", invalid="raise"):  # a division by zero or an overflow raises
        fmt = _int8(x)
        got = decode_rows(encode_rows(x, fmt), fmt)
    assert fmt.scale is not None and (fmt.scale > 0).all() and np.isfinite(fmt.zero).all()
    np.testing.assert_allclose(got[:, 0], x[:, 0], rtol=2 * F32_EPS, atol=0)
    assert np.isfinite(got).all()


def test_a_constant_column_too_small_for_a_normal_scale_decodes_within_half_a_step() -> None:
    x = np.full((4, 2), np.float32(1e-40))
    fmt = _int8(x, chunks=2)
    assert fmt.scale is not None and (fmt.scale == 1).all()
    assert (np.abs(decode_rows(encode_rows(x, fmt), fmt) - x) <= 0.5).all()


def test_adversarial_columns_stay_finite_and_within_half_a_step() -> None:
    x = np.array([[3.4e38, -3.4e38, 7.0, 1e-38, 0.0],
                  [-3.4e38, 3.4e38, np.nextafter(np.float32(7), np.float32(8)), -1e-38, 1e-45]], np.float32)
    fmt = _int8(x, chunks=2)
    assert fmt.scale is not None
    got = decode_rows(encode_rows(x, fmt), fmt)
    assert np.isfinite(got).all()
    assert (np.abs(got.astype(np.float64) - x) <= fmt.scale / 2 + 4 * F32_EPS * np.abs(x).max(axis=0)).all()


@pytest.mark.parametrize("encoding", ["float32", "float16", "bfloat16", "int8"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_are_refused_naming_the_row(encoding: str, bad: float) -> None:
    x = np.ones((10, 4), np.float32)
    x[7, 2] = bad
    fmt = _int8(np.ones((2, 4), np.float32)) if encoding == "int8" else RowFormat.of_encoding(encoding, 4)
    with pytest.raises(NonFiniteFeatureError, match=r"feature row 107 holds .* at column 2 \(NaN or inf\)") as info:
        encode_rows(x, fmt, first_row=100)
    assert info.value.row == 107 and isinstance(info.value, InvalidGraphError)
    with pytest.raises(NonFiniteFeatureError, match="feature row 7 "):
        ColumnRange(dim=4).update(x)


@pytest.mark.parametrize(("encoding", "value", "why"), [
    ("float16", 7e4, "beyond float16's range"), ("bfloat16", 3.4e38, "beyond bfloat16's range"),
    ("float32", 1e39, "beyond float32's range")])
def test_a_value_the_encoding_cannot_hold_is_refused_not_made_inf(encoding: str, value: float, why: str) -> None:
    x = np.zeros((5, 3), np.float64)
    x[3, 1] = value
    with pytest.raises(NonFiniteFeatureError, match=re.escape(f"feature row 3 holds {value:g} at column 1 ({why}")):
        encode_rows(x, RowFormat.of_encoding(encoding, 3))


def test_decode_writes_into_strided_outputs_and_checks_shapes() -> None:
    x = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)
    for fmt in (RowFormat.of_encoding("bfloat16", 6), _int8(x), RowFormat.of_encoding("float16", 6)):
        words = encode_rows(x, fmt)
        wide = np.full((8, 10), np.nan, np.float32)
        out = decode_rows(words[:, :], fmt, out=wide[:, 2:8])
        assert np.array_equal(out, decode_rows(words, fmt)) and np.isnan(wide[:, :2]).all()
        with pytest.raises(ConfigError, match="decoded rows go to a float32 array"):
            decode_rows(words, fmt, out=np.empty((8, 6), np.float64))
    with pytest.raises(ConfigError, match=r"stored rows must be \[k, 6\] uint16"):
        decode_rows(x, RowFormat.of_encoding("bfloat16", 6))


def test_cast_error_reports_max_abs_and_relative_rms() -> None:
    err = CastError()
    err.update(np.array([[3.0, 4.0]]), np.array([[3.0, 4.5]], np.float32))
    err.update(np.zeros((1, 2)), np.zeros((1, 2), np.float32))
    assert err.report() == {"max_abs_error": 0.5, "relative_rms": pytest.approx(0.5 / 5.0)}
    assert CastError().report() == {"max_abs_error": 0.0, "relative_rms": 0.0}
