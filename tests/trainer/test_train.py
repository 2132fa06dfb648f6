"""`outre train` on a generated tiny dataset: one epoch, files written, resume continues exactly."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.cli import main
from outre_async.machine._allocator import glibc_allocator
from outre_async.trainer import TrainConfig
from outre_async.trainer._files import awrite_atomic, load_checkpoint
from outre_async.loader._options import group_knobs

ARGS = ["--fanouts", "4,4", "--hidden", "16", "--batch-size", "256", "--deterministic", "--backend", "pread"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("train") / "tiny", "tiny", num_nodes=600).path


def test_one_epoch_writes_checkpoint_and_metrics(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), "--json", *ARGS]) == 0
    result = json.loads(capsys.readouterr().out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["epochs"]) == 1 and metrics["epochs"][0]["batches"] == 2  # 300 train nodes / 256
    assert 0.0 <= result["test_accuracy"] <= 1.0 and result["best"]["epoch"] == 1
    state = load_checkpoint(out / "last.pt")  # weights_only=True
    assert state["epoch"] == 1 and set(state["model"]) == set(oa.GraphSAGE(32, 16, 2, 8).state_dict())
    plot = ["time_to_accuracy.png"] if importlib.util.find_spec("matplotlib") is not None else []
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "last.pt", "metrics.json", *plot]
    # the same --out again without --resume is refused, nothing changed
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), *ARGS]) == 2
    assert "--resume" in capsys.readouterr().err


def test_header_and_epoch_lines_say_what_is_on(tiny: Path, tmp_path: Path, capsys) -> None:
    """A plain run says partitions, history and profile are off; with --partitions, --staleness and
    --profile auto the header names each with what it runs with, and every epoch prints the history's
    pulled/pushed rows and the profile's hit rates, the same figures metrics.json keeps."""
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(tmp_path / "plain"), *ARGS]) == 0
    plain = capsys.readouterr().out
    for line in ("partitions   off", "history      off", "profile      off", "memory       budget auto ("):
        assert line in plain, (line, plain)
    assert "history:" not in plain and "profile:" not in plain and "allocator" not in plain  # no budget: untouched
    assert main(["partition", str(tiny), "--parts", "4", "--name", "p4", "--no-progress"]) == 0
    capsys.readouterr()
    out = tmp_path / "on"
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(out), "--partitions", "p4", "--staleness", "3",
                 "--profile", "auto", "--memory-budget", "32MiB", *ARGS]) == 0
    text = capsys.readouterr().out
    assert "partitions   on: p4 (4 parts" in text and "memory       budget 32.0 MiB" in text
    assert "history      on: h^(L-1) rows up to 3 steps old" in text
    assert "profile      on: auto-" in text and "splits the budget: " in text
    if glibc_allocator() and "MALLOC_MMAP_THRESHOLD_" not in os.environ:  # a budget: the heap is held to it
        assert "allocator    glibc's mmap threshold held at 128 KiB" in text
    epochs = json.loads((out / "metrics.json").read_text())["epochs"]
    assert len(epochs) == 2 and sum(e["history"]["pushed"] for e in epochs) > 0
    for e in epochs:
        h, p = e["history"], e["profile"]
        assert (f"history: pulled {h['pulled']:,} rows of h^(L-1) in {h['batches']:,} batches (oldest {h['max_age']} "
                f"steps), pushed {h['pushed']:,} of {h['offered']:,} offered") in text
        assert h["max_age"] <= 3 and h["pushed"] <= h["offered"]
        assert f"profile: static feature cache hit rate {p['static_hit_rate']:.1%}" in text


def test_resume_continues_the_uninterrupted_run(tiny: Path, tmp_path: Path) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(straight), *ARGS]) == 0
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(split), *ARGS]) == 0
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(split), "--resume", *ARGS]) == 0
    a, b = load_checkpoint(straight / "last.pt"), load_checkpoint(split / "last.pt")
    assert b["epoch"] == 2 and len(b["metrics"]) == 2
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=0, msg=name)
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(split), "--resume", *ARGS]) == 2  # done already
    wrong = [*ARGS[:2], "--hidden", "8", *ARGS[4:]]
    assert main(["train", str(tiny), "--epochs", "3", "--out", str(split), "--resume", *wrong]) == 2


def test_bad_options_and_damaged_checkpoints_are_named_errors(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(oa.ConfigError, match="one fanout per layer"):
        TrainConfig(layers=3, fanouts=(5, 5))
    with pytest.raises(oa.ConfigError, match="divisible"):
        TrainConfig(model="gat", hidden=10, heads=4)
    (tmp_path / "last.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(oa.errors.CheckpointError, match="not a readable outre checkpoint"):
        load_checkpoint(tmp_path / "last.pt")
    with pytest.raises(oa.errors.CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


@pytest.mark.timeout(120)
def test_resume_on_another_dataset_or_options_is_refused_unless_forced(tiny: Path, tmp_path: Path, capsys) -> None:
    """Another dataset of the very same shape (other edges): the identity differs, --resume is a one-line
    error naming --force; --resume --force continues; changed options are refused the same way."""
    other = generated(tmp_path / "other", "tiny", num_nodes=600, seed=99).path
    out = tmp_path / "run"
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), *ARGS]) == 0
    capsys.readouterr()
    assert main(["train", str(other), "--epochs", "2", "--out", str(out), "--resume", *ARGS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another dataset" in err[0] and "--resume --force" in err[0], err
    changed = [*ARGS[:4], "--batch-size", "128", *ARGS[6:]]
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(out), "--resume", *changed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batch_size 256 -> 128" in err[0] and "--resume --force" in err[0], err
    assert main(["train", str(other), "--epochs", "2", "--out", str(out), "--resume", "--force", *ARGS]) == 0
    assert load_checkpoint(out / "last.pt")["epoch"] == 2
    assert main(["train", str(tiny), "--epochs", "3", "--out", str(tmp_path / "new"), "--force", *ARGS]) == 2


@pytest.mark.parametrize(("key", "value", "match"), [
    ("metrics", {"a": 1}, "metrics has type dict"),
    ("metrics", [{"epoch": 1}], "elapsed_seconds"),
    ("torch_rng", [1, 2, 3], "torch_rng has type list"),
    ("torch_rng", torch.zeros(4, dtype=torch.float32), "torch_rng is a torch.float32"),
    ("epoch", "1", "epoch has type str"),
    ("epoch", True, "epoch has type bool"),
    ("best", [], "best has type list"),
])
def test_a_checkpoint_with_wrongly_typed_entries_is_a_named_error(tiny: Path, tmp_path: Path, key, value,
                                                                   match) -> None:
    out = tmp_path / "run"
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), *ARGS]) == 0
    state = load_checkpoint(out / "last.pt")
    state[key] = value
    torch.save(state, out / "last.pt")
    with pytest.raises(oa.errors.CheckpointError, match=match):
        load_checkpoint(out / "last.pt")
    with pytest.raises(oa.errors.CheckpointError, match=match):  # the run refuses it before touching the model
        oa_train(tiny, out)


def oa_train(dataset: Path, out: Path) -> None:
    from outre_async.trainer._run import run_train

    config = TrainConfig(fanouts=(4, 4), hidden=16, batch_size=256, deterministic=True, backend="pread", epochs=2)
    run_train(dataset, config, out, resume=True)


def test_out_inside_a_dataset_is_refused(tiny: Path, tmp_path: Path, capsys) -> None:
    """`outre train DS --out DS` used to write last.pt/best.pt/metrics.json among the dataset's files."""
    before = sorted(p.name for p in tiny.iterdir())
    link = tmp_path / "link"
    link.symlink_to(tiny)
    for out, where in ((tiny, "is the dataset"), (tiny / "runs" / "a", "is inside the dataset"),
                       (link / "run", "is inside the dataset")):
        assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), *ARGS]) == 2
        err = capsys.readouterr().err
        assert f"--out {out} {where} {tiny.resolve()}" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tiny.iterdir()) == before
    other = tmp_path / "web"  # another project's manifest.json is not a dataset
    other.mkdir()
    (other / "manifest.json").write_text('{"name": "a web app"}')
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(other / "run"), *ARGS]) == 0


def _try_lock(folder: Path) -> bool:
    """Whether this process could take the folder's lock now (taken and dropped at once)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_second_run_into_one_out_is_refused_while_the_first_holds_it(tiny: Path, tmp_path: Path, capsys) -> None:
    """Two `outre train` into one --out used to both exit 0 with their files mixed: the run holds a flock on
    the folder for its whole length (checked from inside it), and a second run meets it at once."""
    out = tmp_path / "run"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)  # another run's lock (flock: per open file, so in-process too)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert main(["train", str(tiny), "--epochs", "1", "--out", str(out), *ARGS]) == 2
        err = capsys.readouterr().err
        assert f"another run holds {out}" in err and err.count("\n") == 1, err
        assert list(out.iterdir()) == []
    finally:
        os.close(fd)
    from outre_async.trainer._run import run_train

    seen: list[bool] = []
    config = TrainConfig(fanouts=(4, 4), hidden=16, batch_size=256, deterministic=True, backend="pread", epochs=2)
    run_train(tiny, config, out, say=lambda line: seen.append(_try_lock(out)))
    assert len(seen) > 4 and not any(seen)  # held at every line the run said, from the first to the last
    assert _try_lock(out) and sorted(p.name for p in out.iterdir())[:3] == ["best.pt", "last.pt", "metrics.json"]


def _nan_rows(dataset: Path, rows: np.ndarray) -> None:
    """Write NaN over the given feature rows, as a damaged or hand-edited features.bin would hold."""
    f = oa.open_dataset(dataset).manifest.features
    assert f is not None
    x = np.memmap(dataset / f.file, dtype=f.dtype, mode="r+").reshape(-1, f.stride // np.dtype(f.dtype).itemsize)
    x[rows, : f.dim] = np.nan
    x.flush()
    del x


def test_a_non_finite_loss_stops_training_before_the_step(tmp_path: Path) -> None:
    """NaN features used to train to `loss = nan` silently; the first such loss now raises a named error
    naming the epoch, the step and the batch's first seeds, and the step is not taken (weights unchanged)."""
    from outre_async._train import train_epoch

    ds_path = generated(tmp_path / "ds", "tiny", num_nodes=600).path
    ds = oa.open_dataset(ds_path)
    with oa.OutreLoader(ds, split="train", fanouts=[4, 4], batch_size=64, shuffle=True, seed=0, ordered=True,
                        io=oa.IOOptions(backend="pread")) as loader:
        batches = list(loader)
    third = batches[2].n_id[: batches[2].batch_size].numpy()
    earlier = np.concatenate([b.n_id.numpy() for b in batches[:2]])
    bad = np.setdiff1d(third, earlier)  # seeds of step 3 that steps 1 and 2 never read
    assert len(bad) > 0
    _nan_rows(ds_path, bad)
    ds = oa.open_dataset(ds_path)  # opened again: a dataset whose files changed is refused (DatasetChangedError)
    with oa.OutreLoader(ds, split="train", fanouts=[4, 4], batch_size=64, shuffle=True, seed=0, ordered=True,
                        io=oa.IOOptions(backend="pread")) as loader:
        nan_batches = list(loader)
    torch.manual_seed(0)
    model = oa.GraphSAGE(ds.feature_dim, 16, 2, ds.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train_epoch(model, nan_batches[:1], optimizer, epoch=7)  # finite: a step is taken
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(oa.errors.NonFiniteLossError) as info:
        train_epoch(model, nan_batches, optimizer, epoch=7)
    err = info.value
    assert (err.epoch, err.step, err.seeds) == (7, 3, [int(v) for v in third[:5]])
    assert str(err).startswith(f"training loss is nan at epoch 7, step 3 (batch seeds {err.seeds} and "
                               f"{len(third) - 5} more); stopped before that step changed the weights")
    # steps 1 and 2 were taken, step 3 was not: the weights are those after step 2, all finite
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_outre_train_on_nan_features_is_a_one_line_error(tiny: Path, tmp_path: Path, capsys) -> None:
    import shutil

    copy = tmp_path / "nan"
    shutil.copytree(tiny, copy)
    _nan_rows(copy, np.arange(oa.open_dataset(copy).num_nodes))
    out = tmp_path / "run"
    assert main(["train", str(copy), "--epochs", "2", "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.startswith("outre train: error: training loss is nan at epoch 1, step 1 (batch seeds [") and \
        err.count("\n") == 1, err
    assert not (out / "last.pt").exists() and not (out / "metrics.json").exists()


def test_gcn_and_gat_train_too(tiny: Path, tmp_path: Path) -> None:
    for model in ("gcn", "gat"):
        assert main(["train", str(tiny), "--model", model, "--epochs", "1", "--out", str(tmp_path / model), *ARGS]) == 0


def test_async_atomic_write_replaces_whole(tmp_path: Path) -> None:
    import asyncio

    target = tmp_path / "m.json"
    target.write_text("old")
    asyncio.run(awrite_atomic(target, b"new"))
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["m.json"]


@pytest.mark.slow  # torchrun ranks
@pytest.mark.timeout(295)
def test_nproc_trains_data_parallel_through_torchrun(tiny: Path, tmp_path: Path, capsys) -> None:
    """`outre train --nproc 2`: torchrun starts two ranks (gloo), each trains its share of every epoch
    inside DDP, rank 0 alone evaluates and writes the files; both epochs take the same steps."""
    out = tmp_path / "ddp"
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(out), "--nproc", "2", *ARGS]) == 0
    assert "starting 2 data-parallel ranks through torchrun (rank 0 reports); --batch-size 256 is per rank: 512 seeds per step" \
        in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    # 300 training nodes, global batches of 2 x 256: one full step of two batches, so one batch per rank
    assert [e["batches"] for e in metrics["epochs"]] == [1, 1]
    assert metrics["best"]["epoch"] in (1, 2) and 0.0 <= metrics["test_accuracy"] <= 1.0
    state = load_checkpoint(out / "last.pt")
    assert state["epoch"] == 2 and not any(k.startswith("module.") for k in state["model"])  # plain weights
    plot = ["time_to_accuracy.png"] if importlib.util.find_spec("matplotlib") is not None else []
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "last.pt", "metrics.json", *plot]


def test_nproc_is_taken_out_of_the_relaunched_command() -> None:
    from outre_async.trainer._cli import _without_nproc

    assert _without_nproc(["train", "d", "--nproc", "2", "--epochs", "1", "--nproc=3"]) == ["train", "d", "--epochs", "1"]


@pytest.mark.slow  # three training runs, ~20 s on two loaded cores
def test_checkpoint_every_resumes_mid_epoch_to_the_uninterrupted_weights(tiny: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``--checkpoint-every 3``: a run stopped after step 3 of epoch 2 (its last.pt then, kept aside while
    the run goes on) and resumed from it ends with the uninterrupted run's weights and epoch rows."""
    from outre_async.trainer import _run

    args = [*ARGS[:4], "--batch-size", "32", *ARGS[6:], "--eval-every", "2"]  # 10 batches an epoch, one evaluation
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(straight), *args]) == 0
    kept: list[bytes] = []
    real = _run.save_checkpoint

    def keep(path: Path, state: dict) -> None:
        real(path, state)
        if path.name == "last.pt" and "loader" in state and state["epoch"] == 1 and not kept:
            kept.append(path.read_bytes())

    monkeypatch.setattr(_run, "save_checkpoint", keep)
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(split), "--checkpoint-every", "3", *args]) == 0
    monkeypatch.undo()
    (split / "last.pt").write_bytes(kept[0])  # as if the run had been killed after epoch 2's step 3
    mid = load_checkpoint(split / "last.pt")
    assert mid["loader"]["epoch"] == 1 and mid["loader"]["delivered"] == {"prefix": 3, "extra": []}
    assert mid["partial"]["count"] == 3 and len(mid["metrics"]) == 1
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(split), "--resume", *args]) == 0
    a, b = load_checkpoint(straight / "last.pt"), load_checkpoint(split / "last.pt")
    assert b["epoch"] == 2 and "loader" not in b  # the epoch's end replaced the mid-epoch checkpoint
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=0, msg=name)
    for key in ("batches", "loss", "train_accuracy", "val_accuracy"):
        assert b["metrics"][1][key] == a["metrics"][1][key], key


def test_checkpoint_every_is_refused_for_data_parallel_runs(tiny: Path, tmp_path: Path, capsys) -> None:
    assert main(["train", str(tiny), "--out", str(tmp_path / "r"), "--nproc", "2", "--checkpoint-every", "5", *ARGS]) == 2
    assert "--checkpoint-every is for one process" in capsys.readouterr().err


def test_a_history_the_profile_drops_is_said_with_its_reason(tiny: Path, tmp_path: Path, capsys,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`--staleness 3 --profile auto` where the plan gives the history no slot: the header says history
    is off, that --staleness asked for it, and why (the plan's split), not "--staleness 1"; the loader's
    stats()["profile"]["dropped"] names it.  The auto profile is written first with fixed costs (the one
    `--profile auto` then finds), so the knapsack's choice does not hang on measured timings: at 6440 KiB
    the caches get ~38 KiB, and static feature rows save more per byte than history slots of 256 floats."""
    from outre_async._units import format_bytes
    from outre_async.cache._history_config import history_for
    from outre_async.loader import _config
    from outre_async.loader._profiling import auto_name
    from outre_async.machine._cores import sized_from_cores
    from outre_async.plan import MissCosts

    monkeypatch.setattr(_config, "sized_from_cores", lambda: sized_from_cores(2))  # the budget is for 2 cores' defaults
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed")
    opts = {"fanouts": [4, 4], "batch_size": 256, "memory_budget": "6440KiB", "seed": 0, "shuffle": True,
            "ordered": True, "backend": "pread", "device": "cpu", "max_batches": 64}
    meta = oa.profile(tiny, name="fixed-costs", history=history_for(3, 256), costs=costs, **group_knobs(opts))
    name = auto_name(meta["setup"], "auto")
    oa.profile(tiny, name=name, history=history_for(3, 256), costs=costs, **group_knobs(opts))
    assert meta["memory"]["split"]["history"] == 0 < meta["memory"]["split"]["features"]
    args = ["--fanouts", "4,4", "--hidden", "256", "--batch-size", "256", "--deterministic", "--backend", "pread",
            "--device", "cpu"]
    assert main(["train", str(tiny), "--epochs", "1", "--out", str(tmp_path / "run"), "--staleness", "3",
                 "--profile", "auto", "--memory-budget", "6440KiB", *args]) == 0
    text = capsys.readouterr().out
    left = format_bytes(meta["memory"]["cache_budget"])
    assert (f"history      off: --staleness 3 asked for it, but the profile {name} gave it no room in 6.3 MiB (its plan: "
            f"features {format_bytes(meta['memory']['split']['features'])} of the {left} left for caches saves more "
            "per byte); raise --memory-budget, or pass --staleness 1 to silence this") in text, text
    assert "--staleness 1;" not in text
    with oa.OutreLoader(tiny, **group_knobs(dict(split="train", history=history_for(3, 256), profile="auto",
                        **{k: v for k, v in opts.items() if k != "max_batches"}))) as loader:
        assert loader.stats()["profile"]["dropped"] == ["history"] and "history" not in loader.stats()


@pytest.mark.parametrize(("left", "split", "why"), [
    (0, {"features": 0, "history": 0}, "the loader's fixed parts took all of it, none was left for caches"),
    (512, {"features": 384, "history": 0}, "a slot needs 1.0 KiB, 512 B was left for caches"),
    (4096, {"features": 0, "history": 0}, "no slot saved time in the 4.0 KiB left for caches"),
])
def test_the_dropped_history_line_names_each_reason(left: int, split: dict, why: str) -> None:
    from outre_async.trainer._report import dropped_history_line

    profile = {"name": "auto-x", "cache_budget": left, "history_slot_bytes": 1024, "planned_split": split,
               "cache_split": "auto", "dropped": ["history"]}
    line = dropped_history_line(TrainConfig(staleness=4), profile, "6.0 MiB")
    assert line == (f"history      off: --staleness 4 asked for it, but the profile auto-x gave it no room in 6.0 MiB "
                    f"({why}); raise --memory-budget, or pass --staleness 1 to silence this")


def _digits(value: float) -> int:
    """Decimals ``value`` is printed with by ``json.dumps`` (repr)."""
    text = repr(value)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 99


def test_final_metrics_are_rounded_in_json_and_printed_lines(tiny: Path, tmp_path: Path, capsys) -> None:
    """`outre train --json` and the final printed line give accuracies to 4 decimals and seconds to 2;
    metrics.json keeps the full figures (the rounded ones are those rounded)."""
    out = tmp_path / "run"
    assert main(["train", str(tiny), "--epochs", "2", "--out", str(out), "--json", *ARGS]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    full = json.loads((out / "metrics.json").read_text())
    assert result["test_accuracy"] == round(full["test_accuracy"], 4)
    assert result["time_to_best_seconds"] == round(full["time_to_best_seconds"], 2)
    assert _digits(result["time_to_best_seconds"]) <= 2 and _digits(result["best"]["val_accuracy"]) <= 4
    for row, raw in zip(result["epochs"], full["epochs"], strict=True):
        for key in ("train_accuracy", "val_accuracy", "test_accuracy"):
            assert row[key] == round(raw[key], 4) and _digits(row[key]) <= 4
        for key in ("train_seconds", "stall_seconds", "eval_seconds", "elapsed_seconds"):
            assert row[key] == round(raw[key], 2) and _digits(row[key]) <= 2
    assert any(_digits(row["elapsed_seconds"]) > 2 for row in full["epochs"])  # the file keeps every digit
    line = next(x for x in captured.err.splitlines() if x.startswith("best validation accuracy"))
    best = result["best"]
    assert line.startswith(f"best validation accuracy {best['val_accuracy']:.4f} at epoch {best['epoch']}: "
                           f"test accuracy {best['test_accuracy']:.4f}")
