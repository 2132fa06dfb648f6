"""``_cache_hints.prefetch``: a hint only.  Results with and without it are equal at every index,
including the first and last valid ones and indices the clipping must catch; the hint is really
emitted; and a ``cache=True`` kernel using it is cached and loaded back in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import config, njit

from outre_async._cache_hints import prefetch, prefetch_row

jit_only = pytest.mark.skipif(config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT: no code is generated")


@njit(cache=True, nogil=True)
def _gather_plain(data, slots, out):
    for i in range(len(slots)):
        for j in range(data.shape[1]):
            out[i, j] = data[slots[i], j]


@njit(cache=True, nogil=True)
def _gather_prefetched(data, slots, out, ahead, extra):
    """The same gather, prefetching ``ahead`` rows ahead without clipping the index itself (the hint
    must clip), plus ``extra``: indices tried on every row (negative, past the end)."""
    for i in range(len(slots)):
        prefetch_row(data, slots[i + ahead] if i + ahead < len(slots) else i + ahead)
        prefetch(slots, i + ahead)
        for k in range(len(extra)):
            prefetch(data, extra[k])
            prefetch(slots, extra[k])
        for j in range(data.shape[1]):
            out[i, j] = data[slots[i], j]


@njit(cache=True, nogil=True)
def _touch(array, index):
    prefetch(array, index)
    return len(array)


def _cases(rows: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rows)
    data = rng.standard_normal((rows, dim)).astype(np.float32)
    slots = rng.integers(0, rows, size=3 * rows + 1)
    slots[0], slots[-1] = 0, rows - 1  # the first and the last valid row
    return data, slots


@pytest.mark.parametrize("ahead", [0, 1, 8, 10_000])
@pytest.mark.parametrize(("rows", "dim"), [(1, 1), (7, 3), (300, 256), (50, 17)])
def test_a_gather_with_prefetch_equals_the_gather_without(rows: int, dim: int, ahead: int) -> None:
    data, slots = _cases(rows, dim)
    extra = np.array([0, rows - 1, -1, -(2**62), rows, 2**62], dtype=np.int64)
    want = np.empty((len(slots), dim), np.float32)
    got = np.full_like(want, np.nan)
    _gather_plain(data, slots, want)
    _gather_prefetched(data, slots, got, ahead, extra)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, data[slots])


def test_prefetch_of_empty_strided_and_int32_indexed_arrays_is_harmless() -> None:
    for array in (np.empty(0, np.int64), np.empty((0, 4), np.float32), np.empty((3, 0), np.float32)):
        for index in (0, -1, 1, 2**40):
            assert _touch(array, index) == len(array)
    strided = np.arange(40, dtype=np.int64).reshape(10, 4)[::3, 1:]  # a non-contiguous view
    for index in (np.int32(0), np.int32(3), np.int32(-5), np.int32(99)):
        assert _touch(strided, index) == 4
        assert _touch(strided[:, 0], index) == 4


@jit_only
def test_the_hint_is_emitted() -> None:
    data, slots = _cases(7, 3)
    # a fresh, uncached compile: numba cannot inspect a kernel loaded from its disk cache, which is
    # what _gather_prefetched is on every run after the first
    fresh = njit(cache=False, nogil=True)(_gather_prefetched.py_func)
    fresh(data, slots, np.empty((len(slots), 3), np.float32), 1, np.zeros(1, np.int64))
    assert "llvm.prefetch" in fresh.inspect_llvm(fresh.signatures[0])


_KERNEL = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from outre_async._cache_hints import prefetch, prefetch_row

    @njit(cache=True, nogil=True)
    def gather(data, slots, out):
        n = len(slots)
        for i in range(n):
            prefetch_row(data, slots[min(i + 8, n - 1)])
            prefetch(slots, i + 16)
            for j in range(data.shape[1]):
                out[i, j] = data[slots[i], j]
""")

_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from hinted import gather
    data = np.arange(60, dtype=np.float32).reshape(20, 3)
    slots = np.array([19, 0, 5, 5, 19])
    sums = []
    for _ in range(2):  # callable twice in one process
        out = np.empty((len(slots), 3), np.float32)
        gather(data, slots, out)
        assert (out == data[slots]).all()
        sums.append(float(out.sum()))
    print(json.dumps({"hits": sum(gather.stats.cache_hits.values()),
                      "misses": sum(gather.stats.cache_misses.values()), "sums": sums}))
""")


@jit_only
def test_a_cached_kernel_using_the_hint_is_cached_and_loaded_back(tmp_path: Path) -> None:
    import json

    (tmp_path / "hinted.py").write_text(_KERNEL)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba_cache")}
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-P", "-c", _RUN, str(tmp_path)], env=env, capture_output=True,
                              text=True, timeout=300, check=True)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["misses"] >= 1 and first["hits"] == 0  # compiled, then saved
    assert second["hits"] >= 1 and second["misses"] == 0  # loaded from the cache, not recompiled
    assert first["sums"] == second["sums"] and first["sums"][0] == first["sums"][1]
