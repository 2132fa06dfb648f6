"""Writers racing and writers killed (issue 27, item 5): real ``outre`` processes.

Two ``outre partition`` / ``outre reorder`` / ``outre profile`` on one dataset at once, with different
options so that a mix of the two would show (another part count, another partition set, another batch
size): partitions and reorder install with ``renameat2(NOREPLACE)``, so one wins and the other ends
in a one-line named error (exit 2); a profile replaces a profile of its name by design (exchange),
so both finish and the one installed last is whole.  Either way the output opens and passes its
checksums, and nothing is left beside it.  Then ``kill -9`` of a reorder and a profile writer at
seeded random moments: the output is absent or valid (never partial) and ``outre clean`` leaves no
litter.  ``benchmarks/bench_crash_litter.py --verb reorder|profile`` runs more moments.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from outre_async.partition import open_partitions, partition

import outre_async as oa
from outre_async.plan._files import read_profile


def outre(*argv: str) -> list[str]:
    return [sys.executable, "-m", "outre_async.cli", *argv]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = oa.generate(tmp_path_factory.mktemp("writers") / "ds", "tiny", num_nodes=20_000, feature_dim=32, seed=5)
    ds = oa.open_dataset(path)
    partition(ds, 4, name="p4")
    partition(ds, 6, name="p6")
    return Path(path)


def _commands(verb: str, ds: Path, out: Path) -> list[list[str]]:
    profile = ["profile", str(ds), "--fanouts", "4,4", "--memory-budget", "8MiB", "--backend", "pread", "--name", "race"]
    return {"partition": [outre("partition", str(ds), "--parts", str(k), "--name", "race") for k in (3, 5)],
            "reorder": [outre("reorder", str(ds), str(out), "--partitions", p) for p in ("p4", "p6")],
            "profile": [outre(*profile, "--batch-size", str(b)) for b in (64, 128)]}[verb]


def _output_ok(verb: str, ds: Path, out: Path) -> None:
    """The installed output opens and passes its checks (sizes, checksums: a mix of two writers fails them)."""
    if verb == "partition":
        open_partitions(oa.open_dataset(ds), "race").close()
    elif verb == "reorder":
        oa.open_dataset(out).verify()
    else:
        read_profile(oa.open_dataset(ds), "race")


def _litter(*folders: Path) -> list[str]:
    return sorted(str(p) for f in folders if f.is_dir() for p in f.iterdir() if p.name.startswith("."))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("verb", ["partition", "reorder", "profile"])
def test_two_writers_at_once_one_wins_nothing_mixed(dataset: Path, tmp_path: Path, verb: str) -> None:
    out = tmp_path / "reordered"
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for cmd in _commands(verb, dataset, out)]
    results = [(p.wait(timeout=240), p.stderr.read()) for p in procs if p.stderr is not None]
    for p in procs:
        if p.stderr is not None:
            p.stderr.close()
    codes = sorted(rc for rc, _ in results)
    assert all("Traceback" not in err for _, err in results), results
    if verb == "profile":
        assert codes == [0, 0], results  # replaced whole: the last install wins
    else:
        assert codes == [0, 2], results
        loser = next(err for rc, err in results if rc == 2).strip().splitlines()
        # refused up front ("exists"), or at the swap when the other installed while this one wrote
        assert len(loser) == 1 and ("exist" in loser[0] or "appeared while writing" in loser[0]), loser
    _output_ok(verb, dataset, out)
    assert _litter(dataset, dataset / "partitions", dataset / "profile", tmp_path) == []
    if verb == "partition":
        (dataset / "partitions" / "race").rename(tmp_path / "gone")
    elif verb == "profile":
        (dataset / "profile" / "race").rename(tmp_path / "gone")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("verb", ["reorder", "profile"])
def test_kill_9_of_a_writer_at_random_moments_leaves_nothing_corrupt(dataset: Path, tmp_path: Path, verb: str) -> None:
    rng = random.Random(27)
    start = time.perf_counter()
    subprocess.run(_commands(verb, dataset, tmp_path / "full")[0], check=True, capture_output=True, timeout=240)
    span = time.perf_counter() - start
    _cleanup(verb, dataset, tmp_path / "full")
    outcomes = []
    for i in range(4):
        out = tmp_path / f"out{i}"
        child = subprocess.Popen(_commands(verb, dataset, out)[0], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * span)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        present = out.exists() if verb == "reorder" else (dataset / "profile" / "race").exists()
        if present:
            _output_ok(verb, dataset, out)  # a whole output, never a partial one
        outcomes.append("valid" if present else "absent")
        clean = subprocess.run(outre("clean", str(dataset if verb == "profile" else tmp_path)), capture_output=True,
                               text=True, timeout=120)
        assert clean.returncode == 0, clean.stderr
        assert _litter(dataset, dataset / "partitions", dataset / "profile", tmp_path) == []
        _cleanup(verb, dataset, out)
    assert len(outcomes) == 4


def _cleanup(verb: str, ds: Path, out: Path) -> None:
    import shutil

    if verb == "profile":
        shutil.rmtree(ds / "profile" / "race", ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
