"""What many test modules share: the async runner and the small datasets they build in tmp folders.

pytest's default ``prepend`` import mode puts this folder on ``sys.path`` (there is no
``tests/__init__.py``), so test modules import these helpers with ``from conftest import ...`` and the
reference implementations with ``from reference_sampler import ...``.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import outre_async as oa

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    uvloop = None

# Hermetic: the suite, and every child process it starts, sees a home and a cache folder of its own, so
# no test reads or writes the user's real caches.  A test once raced real `outre profile` writers, which
# probed a 2.5 MB test file under load and cached that grid in ~/.cache/outre/probe/, and `outre bench`
# later took it for the disk's limit.  Set at import, before any test runs; removed when the run ends.
REAL_HOME = os.path.expanduser("~")
TEST_HOME = tempfile.mkdtemp(prefix="outre-tests-home-")
os.environ["HOME"] = TEST_HOME
os.environ["XDG_CACHE_HOME"] = os.path.join(TEST_HOME, ".cache")
atexit.register(shutil.rmtree, TEST_HOME, ignore_errors=True)

# Parametrise a test over both event loops the product supports: ``@pytest.mark.parametrize("loop", LOOPS)``.
LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(uvloop is None, reason="no uvloop"))]


def run(coro: Coroutine[Any, Any, Any], loop: str = "asyncio", timeout: float = 60.0) -> Any:
    """Run ``coro`` on a fresh loop of the given kind; a hang fails after ``timeout`` s instead of at
    the suite's 300 s, with the coroutine's own traceback."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = (
        uvloop.new_event_loop if loop == "uvloop" and uvloop is not None else None)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(asyncio.wait_for(coro, timeout))


def random_graph(rng: np.random.Generator, num_nodes: int, degree_below: int) -> tuple[np.ndarray, np.ndarray]:
    """A CSC ``(indptr, indices)`` with in-degrees uniform in ``[0, degree_below)`` and uniform random
    neighbours (repeats and self loops allowed); draws from ``rng`` so callers continue its stream."""
    deg = rng.integers(0, degree_below, size=num_nodes)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, num_nodes, size=int(indptr[-1]))
    return indptr, indices


def write_store(path: Path, indptr: np.ndarray, indices: np.ndarray, *, features: np.ndarray | None = None,
                labels: np.ndarray | None = None, num_classes: int | None = None,
                splits: Mapping[str, np.ndarray] | None = None, feature_dtype: str = "float32") -> oa.Dataset:
    """Write a dataset from in-memory arrays with the public writer and open it."""
    dim = 0 if features is None else features.shape[1]
    with oa.DatasetWriter(path, num_nodes=len(indptr) - 1, feature_dim=dim, feature_dtype=feature_dtype,
                          num_classes=num_classes) as w:
        w.write_csc(indptr, indices)
        if features is not None:
            w.append_features(features)
        if labels is not None:
            w.write_labels(labels)
        for name, ids in (splits or {}).items():
            w.write_split(name, ids)
    return oa.open_dataset(path)


def labelled_store(path: Path, *, num_nodes: int = 600, dim: int = 20, val: bool = False) -> oa.Dataset:
    """The loader tests' graph (seed 0): in-degree below 12, ``dim`` float32 features, 5 classes,
    train = the first 500 nodes (val = the rest with ``val``)."""
    rng = np.random.default_rng(0)
    indptr, indices = random_graph(rng, num_nodes, 12)
    features = rng.standard_normal((num_nodes, dim)).astype(np.float32)
    labels = rng.integers(0, 5, size=num_nodes)
    splits = {"train": np.arange(0, 500)} | ({"val": np.arange(500, num_nodes)} if val else {})
    return write_store(path, indptr, indices, features=features, labels=labels, num_classes=5, splits=splits)


def reference_rows(ds: oa.Dataset) -> torch.Tensor:
    """The dataset's whole feature matrix as a CPU tensor of its own (a copy): ``torch.from_numpy``
    of the read-only memmap would warn (PyTorch cannot protect it from writes), and the suite turns
    warnings into errors."""
    return torch.from_numpy(np.array(ds.features[:]))


def generated(path: Path, preset: str = "tiny", **options: Any) -> oa.Dataset:
    """A graph from the synthetic generator (``seed``, size overrides as keywords), opened."""
    return oa.open_dataset(oa.generate(path, preset, **options))


# numba compiles once per session, before the first test: ``@njit(cache=True)`` kernels compile on their
# first call where numba's disk cache (beside the package, or ``NUMBA_CACHE_DIR``) lacks them, and on a
# fresh checkout that compile would land inside whichever test calls them first: its ``--durations``
# figure, its 300 s timeout.  Seconds the session's warm-up took, None where nothing needed compiling.
WARM_UP: dict[str, float | None] = {"seconds": None}
WARM_BACKENDS = ("auto", "pread", "memory")  # the loader's paths most tests take (io_uring where it works)


def warm_kernels() -> float | None:
    """Generate a tiny graph and run one epoch of a loader per backend on it, in a temp folder inside the
    suite's home, when numba has not compiled the sampler's and the feature buffer's kernels yet
    (``machine._numba_cache``, the check ``outre train`` makes); the generator's, the readers' and the
    staging kernels compile on the way.  The compiled code lands in numba's disk cache, so the test
    processes' children load it too.  Returns the seconds it took, or None (nothing to compile:
    cached already, or ``NUMBA_DISABLE_JIT=1``)."""
    from outre_async.features._buffer_kernels import acquire
    from outre_async.machine._numba_cache import kernels_to_compile
    from outre_async.sampling._sampler_kernels import sample_multihop

    if not kernels_to_compile([sample_multihop, acquire]):
        return None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="warm-kernels-", dir=TEST_HOME) as folder:
        ds = generated(Path(folder) / "tiny", "tiny", num_nodes=600)
        for backend in WARM_BACKENDS:
            with oa.OutreLoader(ds, split="train", fanouts=[4, 4], batch_size=128, shuffle=True,
                                io=oa.IOOptions(backend=backend)) as loader:
                for _ in loader:
                    pass
    return time.perf_counter() - start


def pytest_sessionstart(session: pytest.Session) -> None:
    WARM_UP["seconds"] = warm_kernels()


def pytest_report_header(config: pytest.Config) -> str:
    seconds = WARM_UP["seconds"]
    return ("numba kernels: nothing to compile before the first test (cached, or jit disabled)" if seconds is None
            else f"numba kernels: compiled before the first test in {seconds:.1f} s")
