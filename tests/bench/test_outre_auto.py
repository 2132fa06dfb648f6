"""``outre-auto`` under a memory cap (root with a memory cgroup only): the tiny preset's run profiles in
``prepare``, loads the plan in the capped child and finishes there, with every part the loader holds
inside its ``memory_budget``.  No timing is asserted."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from outre_async._units import parse_bytes
from outre_async.bench._cgroup import _own_memory_cgroup
from outre_async.bench._presets import get_preset
from outre_async.cli import main

CAP = 768 << 20  # torch + numba + the model take ~0.45 GiB of RSS here; the loader's budget is 16 MiB


@pytest.mark.slow  # a bench child with profiling, ~30 s
def test_outre_auto_holds_its_budget_under_the_cap(tmp_path: Path) -> None:
    if os.geteuid() != 0 or _own_memory_cgroup(Path("/sys/fs/cgroup"))[0] is None:
        pytest.skip("needs root and a memory cgroup to cap the child")
    argv = ["bench", "--preset", "tiny", "--systems", "outre-auto", "--repeats", "1", "--max-batches", "2",
            "--cap", str(CAP), "--no-compute-only", "--out", str(tmp_path / "results"), "--data-dir",
            str(tmp_path / "data"), "--probe-seconds", "0.5", "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    (run,) = json.loads(out.getvalue())["runs"]
    assert run["outcome"] == "ok", run
    assert run["cap"].startswith("cgroup v") and run["cap_bytes"] == CAP
    assert run["cgroup_peak_bytes"] <= CAP
    budget = parse_bytes(get_preset("tiny").system_options["outre-auto"]["memory_budget"])
    profile = run["metrics"]["extra"]["profile"]
    assert profile["name"] == "bench-auto-auto"
    assert 0 < sum(profile["realised_split"].values()) <= budget
    assert profile["static_cache"]["hits"] > 0
    tiers = run["metrics"]["extra"]["tiers"]  # rows from cache: every tier's hits but the source's, static included
    assert list(tiers) == ["static", "buffer", "source"]
    assert run["metrics"]["rows_from_cache"] == tiers["static"]["hits"] + tiers["buffer"]["hits"] > 0
