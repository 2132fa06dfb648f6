"""`outre train` refuses a missing ``--partitions`` and a budget below the loader's floor before its slow
set-up (issue 40 item 3: they were found after 20-40 s of profiling): the model, the output folder and
the profile are never reached (they are replaced by functions that fail the test if called)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import generated

import outre_async as oa
from outre_async.cli import main

ARGS = ["--fanouts", "4,4", "--hidden", "16", "--batch-size", "256", "--backend", "pread", "--epochs", "1"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("early") / "tiny", "tiny", num_nodes=600).path


def _never(what: str):
    def called(*args: object, **kwargs: object) -> None:
        pytest.fail(f"{what} ran before the cheap checks refused the run")
    return called


@pytest.fixture
def no_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("outre_async.loader._loader.load_plan", _never("the profile"))
    monkeypatch.setattr("outre_async.trainer._run.build_model", _never("the model"))


def test_a_missing_partitions_name_fails_before_any_set_up(tiny: Path, tmp_path: Path, capsys, no_setup) -> None:
    out = tmp_path / "run"
    assert main(["train", str(tiny), "--out", str(out), "--partitions", "nope", "--profile", "auto",
                 "--memory-budget", "32MiB", *ARGS]) == 2
    err = capsys.readouterr().err
    assert "no partitions 'nope' under" in err and "outre partition" in err, err
    assert not out.exists()  # nor was the output folder made


def test_a_budget_below_the_floor_fails_before_profiling(tiny: Path, no_setup) -> None:
    with pytest.raises(oa.ConfigError, match=r"^memory_budget=10000 \(9\.8 KiB\) is below the \d+ bytes"):
        oa.OutreLoader(tiny, fanouts=[4, 4], batch_size=256, memory_budget=10_000, io=oa.IOOptions(backend="pread"), cache=oa.CacheOptions(profile="auto"))


def test_memory_budget_help_says_it_covers_the_loader_only(capsys) -> None:
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "RAM for the loader only" in text and "not the model, the optimizer or PyTorch's own memory" in text
    assert "default: auto" in text
