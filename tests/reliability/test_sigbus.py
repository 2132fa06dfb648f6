"""A file truncated under a running reader ends in a named error (or a finished epoch), never a SIGBUS.

Each case truncates one file to 0 bytes after the first batch, in a child process (``sigbus_child.py``)
so that a bus error is a failed test and not a dead test run.  ``indices`` in RAM (``auto`` on a small
graph) cannot be taken away, so the epoch finishes; memory-mapped (``map``) it is a
:class:`DatasetCorruptError` from ``check_mapped`` before the next batch.  ``SyncLoader``'s feature map
is checked the same way; the OutreLoader reads features with pread, so a short read is an
:class:`ExtractorError`.  ``Dataset.verify`` reads blocks, so truncation is a short read.  Before this
change 5 of these 6 readers died of SIGBUS.  A crash fails the case it hit and those after it in
the same child.  (OutreLoader over a *mapped* ``indices`` is left out:
its samplers run ahead in threads, so whether a truncation lands between two batches or inside one
kernel is a race; that is why ``indices`` goes to RAM whenever it fits.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import generated
from outre_async.partition import partition

HERE = Path(__file__).resolve().parent

CASES: dict[tuple[str, str], str | tuple[str, ...]] = {  # (case, indices mode): what must happen
    ("sync-indices", "auto"): "completed",
    ("outre-indices", "auto"): "completed",
    ("part-indices", "auto"): "completed",
    ("sync-features", "auto"): "named DatasetCorruptError",
    # the loader's file watch (issue 34) or a read that comes back short: whichever sees it first
    ("outre-features", "auto"): ("named DatasetChangedError", "named ExtractorError"),
    ("sync-indices", "map"): "named DatasetCorruptError",
    ("sync-features", "map"): "named DatasetCorruptError",
    ("verify-indices", "map"): "named DatasetCorruptError",
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[int, str]]:
    root = tmp_path_factory.mktemp("sigbus")
    base = generated(root / "base", "tiny")
    partition(base, 4, name="p4")

    for case, mode in CASES:
        shutil.copytree(base.path, root / f"{case}-{mode}")

    def group(keys: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, str]]:
        proc = subprocess.run([sys.executable, str(HERE / "sigbus_child.py"), str(root),
                               *(f"{c}:{m}" for c, m in keys)], capture_output=True, text=True, timeout=180)
        said = dict(ln.removeprefix("OUTCOME ").split(" ", 1) for ln in proc.stdout.splitlines()
                    if ln.startswith("OUTCOME "))
        return {(c, m): (0, said[f"{c}:{m}"]) if f"{c}:{m}" in said else (proc.returncode, proc.stderr[-1500:])
                for c, m in keys}

    keys = list(CASES)
    with ThreadPoolExecutor(2) as pool:  # two children, half of the cases each
        halves = pool.map(group, [keys[0::2], keys[1::2]])
    return {k: v for half in halves for k, v in half.items()}


@pytest.mark.parametrize("key", list(CASES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_truncation_mid_epoch_is_not_a_crash(outcomes: dict[tuple[str, str], tuple[int, str]],
                                             key: tuple[str, str]) -> None:
    code, outcome = outcomes[key]
    assert code == 0, f"child died with {code} (-7 / 135 is SIGBUS): {outcome}"
    expected = CASES[key]
    assert outcome in (expected if isinstance(expected, tuple) else (expected,))


def test_indices_in_ram_and_mapped_hold_the_same_ids(tmp_path: Path) -> None:
    import numpy as np

    import outre_async as oa

    path = generated(tmp_path / "g", "tiny").path
    in_ram, mapped = oa.open_dataset(path, indices_in_ram=True), oa.open_dataset(path, indices_in_ram=False)
    assert not mapped.indices.flags.owndata  # a view of the map
    assert in_ram.indices.flags.owndata and np.array_equal(in_ram.indices, mapped.indices)
    mapped.check_mapped()  # untouched: no error


def test_available_memory_counts_the_cgroup_cap() -> None:
    """The RAM-or-map choice of ``indices`` must see a child's memory cap, not the host's memory."""
    from outre_async.bench._cgroup import MemoryCap, open_cap

    cap = open_cap(300 << 20)
    if not isinstance(cap, MemoryCap):
        pytest.skip(f"no memory cgroup here: {cap.reason}")
    try:
        proc = subprocess.run([sys.executable, "-c", "from outre_async._units import available_memory as a; print(a())"],
                              preexec_fn=cap.attach, capture_output=True, text=True, timeout=60)
    finally:
        cap.remove()
    assert 0 < int(proc.stdout) <= 300 << 20, proc.stderr
