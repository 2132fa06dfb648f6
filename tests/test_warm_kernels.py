"""numba compiles once per session, before the first test (``conftest.warm_kernels``), not inside it."""

from __future__ import annotations

from pathlib import Path

from conftest import TEST_HOME

from outre_async.features._buffer_kernels import acquire
from outre_async.machine._numba_cache import kernels_to_compile
from outre_async.sampling._sampler_kernels import sample_multihop


def test_the_kernels_are_compiled_before_any_test_runs_and_the_warm_up_leaves_nothing() -> None:
    """Run alone on a fresh checkout (an empty numba cache, as in CI) this test calls no kernel itself,
    so only the session's warm-up can have compiled them by now; its temp folder is gone again."""
    assert not kernels_to_compile([sample_multihop, acquire])
    assert not list(Path(TEST_HOME).glob("warm-kernels-*"))
