"""Short-lived loaders in a row never hang (issue 34): each takes a few batches of an epoch, breaks, and
is closed while its extractors copy batches large enough for the copy thread.  Before the fix a
cancellation that arrived as a copy finished was swallowed, so an extractor went on waiting for room
in the ready channel after its consumer had left: two runs in two deadlocked here.

The loop runs in a child process so that a hang is a failed test with the child's stacks
(faulthandler), not a suite stuck at its global timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import faulthandler, gc, sys
faulthandler.dump_traceback_later(float(sys.argv[3]), exit=True)
import outre_async as oa
ds = oa.open_dataset(sys.argv[1])
for i in range(int(sys.argv[2])):
    loader = oa.OutreLoader(ds, fanouts=[10, 10], batch_size=1024, io=oa.IOOptions(backend=sys.argv[4]))
    for k, batch in enumerate(loader):
        assert batch.x.shape[0] == batch.n_id.shape[0]
        if k == 4:
            break
    loader.close()
    gc.collect()
print("loaders", i + 1)
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import outre_async as oa

    # batches of ~8k rows x 64 float32 (2 MiB): every gather goes through the buffer's copy thread
    return Path(oa.generate(tmp_path_factory.mktemp("short") / "ds", "quickstart", num_nodes=100_000))


def _loop_of_loaders(graph: Path, loaders: int, backend: str, limit_s: float) -> None:
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(graph), str(loaders), str(limit_s), backend],
                          capture_output=True, text=True, timeout=limit_s + 60, env=env)
    assert proc.returncode == 0 and f"loaders {loaders}" in proc.stdout, proc.stderr[-4000:]


@pytest.mark.parametrize("backend", ["io_uring", "pread"])
def test_twelve_short_lived_loaders_in_a_row(graph: Path, backend: str) -> None:
    _loop_of_loaders(graph, 12, backend, limit_s=120)


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(5))
def test_many_runs_of_short_lived_loaders(graph: Path, attempt: int) -> None:
    _loop_of_loaders(graph, 24, "io_uring", limit_s=240)
