"""Explicit-state random numbers for numba kernels (splitmix64).

Kernels take their RNG state as a 1-element ``uint64`` array and advance it in place, so a result
depends only on ``(seed, stream)`` and never on which thread ran it or in which order: batch ``i`` of
an epoch gets ``stream_state(seed, i)`` whether it is sampled first or last.  splitmix64 is tiny,
passes BigCrush, and is easy to reproduce in plain Python for reference tests
(:func:`py_next_u64`).

This is the project's one splitmix64.  Kernels whose state lives in a local ``uint64`` rather than a
one-element array (the generator: numba reference-counts arrays handed to helpers, and on a branch
those atomic counts cost more than the draw) step it with :func:`next_word`; hashing uses its
output function :func:`mix64` (the partitioner's Bloom filters, the generator's node seeds).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: splitmix64's increment, also a Fibonacci-hash factor
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK = (1 << 64) - 1


def check_seed(seed: object, name: str = "seed") -> int:
    """The one rule for a seed handed in by a user: a non-negative int (numpy ints too; not a bool,
    a float or a string), so that numpy and the kernels never see a value they would reject later."""
    import numbers

    from .errors import ConfigError

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


@njit(cache=True, nogil=True, inline="always")
def mix64(z: np.uint64) -> np.uint64:
    """splitmix64's output function: a bijective scramble of one 64-bit word."""
    z = (z ^ (z >> uint64(30))) * uint64(_MIX1)
    z = (z ^ (z >> uint64(27))) * uint64(_MIX2)
    return z ^ (z >> uint64(31))


@njit(cache=True, nogil=True, inline="always")
def next_word(s: np.uint64) -> tuple[np.uint64, np.uint64]:
    """``(new_state, output)``: one step with the state in a register; the same sequence as
    :func:`next_u64` on ``[s]``."""
    s = s + uint64(GOLDEN)
    return s, mix64(s)


@njit(cache=True, nogil=True, inline="always")
def next_u64(state: np.ndarray) -> np.uint64:
    """Advance ``state[0]`` and return the next 64-bit output."""
    z = state[0] + uint64(GOLDEN)
    state[0] = z
    return mix64(z)


@njit(cache=True, nogil=True, inline="always")
def bounded(state: np.ndarray, n: np.int64) -> np.int64:
    """Uniform integer in ``[0, n)`` for ``0 < n < 2**32`` (multiply-shift; bias < 2**-32)."""
    hi = next_u64(state) >> uint64(32)
    return np.int64((hi * uint64(n)) >> uint64(32))


@njit(cache=True, nogil=True, inline="always")
def uniform01(state: np.ndarray) -> np.float64:
    """Uniform float in ``[0, 1)`` with 53 random bits."""
    return np.float64(next_u64(state) >> uint64(11)) * (1.0 / 9007199254740992.0)


def stream_state(seed: int, stream: int) -> np.ndarray:
    """Independent RNG state for ``(seed, stream)``, e.g. (epoch seed, batch index)."""
    x = (int(seed) * GOLDEN + int(stream) * _MIX2 + 0x632BE59BD9B4E019) & _MASK
    value, _ = py_next_u64(x)
    return np.array([value], dtype=np.uint64)


def py_next_u64(state: int) -> tuple[int, int]:
    """Plain-Python splitmix64: ``(output, new_state)``; the reference for :func:`next_u64`."""
    state = (state + GOLDEN) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK
    return z ^ (z >> 31), state


def py_bounded(state: int, n: int) -> tuple[int, int]:
    """Plain-Python :func:`bounded`: ``(value, new_state)``."""
    z, state = py_next_u64(state)
    return ((z >> 32) * n) >> 32, state
