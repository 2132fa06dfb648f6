"""``outre bench`` on the tiny preset: every system runs (or is recorded as skipped with its reason),
the JSON has the documented shape, a failing plug-in and an OOM kill are recorded outcomes, and no
cgroup or temporary file is left behind.  No timing is asserted."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from outre_async.bench import SchemaError, validate_result
from outre_async.bench._cgroup import MemoryCap, _own_memory_cgroup, open_cap
from outre_async.bench._presets import get_preset
from outre_async.bench._run_in_child import run_in_child
from outre_async.bench._runner import ensure_dataset
from outre_async.bench._systems import RunSpec
from outre_async.cli import main

TESTS = Path(__file__).resolve().parents[1]  # holds fakes.py, whose RaisingSystem the child imports
SYSTEMS = "pyg-mmap,sync,outre,outre-part,outre-hist,fakes:RaisingSystem"


def _cgroup_children() -> set[str]:
    parent, _ = _own_memory_cgroup(Path("/sys/fs/cgroup"))
    if parent is None or not parent.is_dir():
        return set()
    return {p.name for p in parent.iterdir() if p.name.startswith("outre-bench-")}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("bench")
    before = _cgroup_children()
    with pytest.MonkeyPatch.context() as mp:
        # no empty entry: it would stand for the working directory, whose outre_async/ shadows an install
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p))
        argv = ["bench", "--preset", "tiny", "--systems", SYSTEMS, "--repeats", "1", "--max-batches", "2",
                "--out", str(root / "results"), "--data-dir", str(root / "data"), "--probe-seconds", "0.5", "--json",
                "--probe-beside", "0.2",
                "--set", "outre-hist.admission=grad", "--set", "outre-hist.staleness=7"]
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(argv)
    assert code == 0
    yield {"result": json.loads(out.getvalue()), "root": root, "cgroups_before": before}


def _runs(result: dict[str, Any], system: str) -> list[dict[str, Any]]:
    return [r for r in result["runs"] if r["system"] == system]


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_our_systems_run_and_consume_the_same_batches(suite: dict[str, Any]) -> None:
    result = suite["result"]
    metrics = {}
    for name in ("sync", "outre", "compute-only"):
        (run,) = _runs(result, name)
        assert run["outcome"] == "ok", run
        m = run["metrics"]
        assert m["batches"] == 2 and m["planned_batches"] == 2
        assert m["rows_unique"] <= m["rows_requested"] and m["redundancy"] >= 1.0
        assert 0.0 <= m["val_accuracy"] <= 1.0 and m["loss"] > 0
        metrics[name] = m
    # same plan and sampler streams: the same rows reach the model whatever the loader
    assert metrics["sync"]["rows_requested"] == metrics["outre"]["rows_requested"] == metrics["compute-only"]["rows_requested"]
    assert metrics["outre"]["rows_from_disk"] >= 1  # the buffer started empty
    assert metrics["outre"]["user_cpu_seconds"] > 0 and metrics["outre"]["sys_cpu_seconds"] >= 0
    stage_cpu = metrics["outre"]["extra"]["cpu_seconds"]
    assert stage_cpu["sample"] > 0 and stage_cpu["extract"] > 0  # the loader's own CPU, per stage
    assert result["summary"]["limit"]["limit_seconds"] > 0


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_each_outre_run_is_probed_beside_its_epoch_at_its_read_size_and_depth(suite: dict[str, Any]) -> None:
    from outre_async.bench._beside_probe import run_reads

    probed = [r for r in suite["result"]["runs"] if r["outcome"] == "ok" and run_reads(r) is not None]
    assert {r["system"] for r in probed} >= {"outre", "outre-part", "outre-hist"}
    for run in probed:
        ios, nbytes, depth = run_reads(run)
        beside = run["metrics"]["extra"]["disk_probe_beside"]
        assert [(c["depth"], c["size"]) for c in beside["cells"]] == [(depth, -(-(nbytes // ios) // 4096) * 4096)]
        assert beside["seconds_per_cell"] == 0.2 and beside["untrusted"]  # the tiny preset's file judges nothing
    assert "--probe-beside 0.2" in suite["result"]["command"]


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_pyg_mmap_runs_or_says_how_to_install_it(suite: dict[str, Any]) -> None:
    (run,) = _runs(suite["result"], "pyg-mmap")
    if importlib.util.find_spec("torch_sparse") is None:
        assert run["outcome"] == "skipped"
        assert "pip install" in run["message"] and "wheels/torch_sparse" in run["message"]
        assert "pip install --no-build-isolation torch-scatter torch-sparse" in run["message"]  # works from a clone
    else:
        assert run["outcome"] == "ok", run
        assert run["metrics"]["batches"] == 2


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_outre_part_runs_partition_based_batches(suite: dict[str, Any]) -> None:
    """Partitions are part of every build: a skipped or failed ``outre-part`` is a failure here, not a
    recorded outcome that passes unnoticed."""
    (run,) = _runs(suite["result"], "outre-part")
    assert run["outcome"] == "ok", run
    m = run["metrics"]
    assert m["batches"] == 2 and m["planned_batches"] >= 2
    assert m["rows_unique"] <= m["rows_requested"] and m["loss"] > 0
    assert suite["result"]["summary"]["systems"]["outre-part"]["ok_runs"] == 1


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_compute_only_part_trains_outre_parts_batches(suite: dict[str, Any]) -> None:
    """Beside the partition systems the suite runs compute-only on outre-part's own batches (uncapped),
    and reports outre-part's training step against it; outre-hist prunes its sampling (fewer rows)."""
    result = suite["result"]
    (part,), (same,) = _runs(result, "outre-part"), _runs(result, "compute-only-part")
    assert same["outcome"] == "ok", same
    assert same["cap"].startswith("uncapped") and same["metrics"]["extra"]["partitions"] == "bench-fennel-16"
    a, b = part["metrics"], same["metrics"]
    assert (a["batches"], a["seeds"], a["rows_requested"], a["rows_unique"]) == (
        b["batches"], b["seeds"], b["rows_requested"], b["rows_unique"])
    ratio = result["summary"]["same_batches"]["outre-part"]
    assert ratio["same_batches"] is True
    assert ratio["train_vs_compute_only"] == pytest.approx(a["train_seconds"] / b["train_seconds"])
    assert set(result["summary"]["same_batches"]) == {"outre-part", "outre-hist"}
    assert "| outre-part | " in Path(result["files"]["md"]).read_text().split("same batches")[-1]


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_outre_part_ordered_trains_on_the_same_batches_renumbered(suite: dict[str, Any]) -> None:
    """The partition-ordered copy gives ``outre-part``'s batches renumbered: the same rows, the same
    loss (same initial weights, same sub-graphs, same features).  Run here, beside the suite (its own
    child, its own timeout), on the suite's dataset and partitions."""
    from outre_async.bench._systems import resolve_system

    (plain,) = _runs(suite["result"], "outre-part")
    path = Path(suite["result"]["dataset"]["path"])
    preset = get_preset("tiny")
    spec = RunSpec(dataset=str(path), fanouts=preset.fanouts, batch_size=preset.batch_size, hidden=preset.hidden,
                   lr=preset.lr, seed=0, max_batches=2, options=preset.system_options["outre-part-ordered"])
    prepared = resolve_system("outre-part-ordered").prepare(str(path), spec)
    assert prepared["ordered_reused"] is False and Path(prepared["ordered"]).name.endswith("-ordered-bench-fennel-16")
    ordered = run_in_child("outre-part-ordered", spec, cap_bytes=None, timeout_s=240, dataset_dir=path)
    assert ordered["outcome"] == "ok", ordered
    a, b = plain["metrics"], ordered["metrics"]
    assert (a["rows_requested"], a["rows_unique"], a["seeds"]) == (b["rows_requested"], b["rows_unique"], b["seeds"])
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    assert resolve_system("outre-part-ordered").prepare(str(path), spec)["ordered_reused"] is True


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_outre_hist_runs_with_the_history_cache(suite: dict[str, Any]) -> None:
    (run,) = _runs(suite["result"], "outre-hist")
    assert run["outcome"] == "ok", run
    assert run["metrics"]["batches"] == 2 and run["metrics"]["loss"] > 0
    history = run["metrics"]["extra"]["history"]  # the suite's --set options reached the run
    assert (history["admission"], history["staleness"]) == ("grad", 7)
    assert suite["result"]["preset"]["set_options"] == {"outre-hist": {"admission": "grad", "staleness": 7}}
    assert "--set outre-hist.admission=grad --set outre-hist.staleness=7" in suite["result"]["command"]


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_a_failing_plugin_is_recorded_not_fatal(suite: dict[str, Any]) -> None:
    (run,) = _runs(suite["result"], "fakes:RaisingSystem")
    assert run["outcome"] == "error"
    assert "RuntimeError: plug-in failure on purpose" in run["message"]
    assert "plug-in failure" in run["stderr_tail"]
    assert suite["result"]["summary"]["systems"]["fakes:RaisingSystem"]["ok_runs"] == 0


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_written_json_matches_the_schema_and_nothing_is_left_behind(suite: dict[str, Any]) -> None:
    result, root = suite["result"], suite["root"]
    written = json.loads(Path(result["files"]["json"]).read_text())
    validate_result(written)
    assert written["suite"] == "tiny" and written["mode"] == "max-batches 2"
    assert Path(result["files"]["md"]).read_text().count("| sync | ok |") == 1
    png = result["files"]["png"]
    assert Path(png["path"]).stat().st_size > 0 if "path" in png else "pip install" in png["skipped"]
    leftovers = [p for p in (root / "results").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert _cgroup_children() == suite["cgroups_before"]
    if os.geteuid() == 0 and _own_memory_cgroup(Path("/sys/fs/cgroup"))[0] is not None:
        assert written["cap"]["applied"].startswith("cgroup v")
    else:
        assert written["cap"]["applied"].startswith("uncapped")


@pytest.mark.slow  # the `suite` fixture: outre bench children, ~4 min on a loaded 2-core box
def test_schema_names_what_is_wrong(suite: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(suite["result"]))
    del broken["runs"][0]["outcome"]
    broken["disk_probe"]["iops"] = "fast"
    with pytest.raises(SchemaError, match=r"runs\[0\]\.outcome is missing.*disk_probe\.iops has type str|"
                                          r"disk_probe\.iops has type str.*runs\[0\]\.outcome is missing"):
        validate_result(broken)


def test_oom_under_a_tiny_cap_is_a_recorded_outcome(tmp_path: Path) -> None:
    probe = open_cap(64 << 20)
    if not isinstance(probe, MemoryCap):
        pytest.skip(f"no memory cgroup here: {probe.reason}")
    probe.remove()
    before = _cgroup_children()
    preset = get_preset("tiny")
    path = ensure_dataset(preset, tmp_path, 0, lambda _: None)
    spec = RunSpec(dataset=str(path), fanouts=preset.fanouts, batch_size=preset.batch_size, hidden=8, lr=0.01,
                   seed=0, max_batches=1)
    record = run_in_child("sync", spec, cap_bytes=48 << 20, timeout_s=120, dataset_dir=path)
    assert record["outcome"] == "oom", record
    assert record["message"].startswith("OOM at 48.0 MiB")
    assert _cgroup_children() == before


def test_max_batches_loads_exactly_the_plans_first_batches(tmp_path: Path) -> None:
    """``--max-batches N`` hands every loader the seeds of the plan's first N batches, unshuffled: the
    async loader's whole epoch is then those N batches (in any completion order), the same as the
    synchronous loader's first N, not whichever N completed first."""
    import outre_async as oa
    from outre_async.bench._systems import run_seeds

    ds = oa.open_dataset(oa.generate(tmp_path / "g", "tiny"))
    spec = RunSpec(dataset=str(ds.path), fanouts=(5, 5), batch_size=64, hidden=8, lr=0.01, seed=3, max_batches=3)
    seeds, shuffle = run_seeds(ds, spec)
    assert not shuffle and len(seeds) == 3 * 64
    sync = [b.n_id.tolist() for b in itertools.islice(oa.SyncLoader(ds, fanouts=[5, 5], batch_size=64, seed=3), 3)]
    with oa.OutreLoader(ds, split=seeds, shuffle=shuffle, fanouts=[5, 5], batch_size=64, seed=3,
                        io=oa.IOOptions(backend="pread")) as loader:
        outre = [b.n_id.tolist() for b in loader]
    assert sorted(outre) == sorted(sync)


def test_planned_batches_is_the_loaders_own_plan() -> None:
    """Partition batches are not ceil(seeds / batch_size) (on the H200, igb-like reported 196 planned
    for the 223 that ran): the loader's ``len`` is the plan, ``max_batches`` its cap."""
    from types import SimpleNamespace

    from outre_async.bench.child import _planned

    ds = SimpleNamespace(split=lambda name: range(1000))
    spec = SimpleNamespace(batch_size=100, max_batches=0)
    assert _planned(ds, spec, None) == 10
    assert _planned(ds, spec, range(13)) == 13
    assert _planned(ds, SimpleNamespace(batch_size=100, max_batches=4), range(13)) == 4
