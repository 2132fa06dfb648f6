"""``--device`` / ``device=`` everywhere: ``auto`` resolves to CUDA when present, a device that is not
on this machine is one line naming the ones that are (every verb, exit code 2, before any work), and
a run on the resolved device trains there (CUDA: skipped without a GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.cli import main
from outre_async.machine._device import available_devices
from outre_async.loader import LoaderConfig

MISSING = f"cuda:{torch.cuda.device_count() + 7}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("dev") / "tiny", "tiny", num_nodes=600).path


def _verbs(tiny: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "train": ["train", str(tiny), "--epochs", "1", "--fanouts", "3,3", "--out", str(tmp / "t")],
        "quickstart": ["quickstart", "--epochs", "1", "--dir", str(tmp / "q")],
        "profile": ["profile", str(tiny), "--fanouts", "3,3", "--batch-size", "64", "--memory-budget", "8MiB"],
        "bench": ["bench", "--preset", "tiny", "--systems", "sync", "--out", str(tmp / "b"),
                  "--data-dir", str(tmp / "d")],
    }


@pytest.mark.parametrize("verb", ["train", "quickstart", "profile", "bench"])
def test_a_missing_device_is_one_line_naming_the_devices_there_are(tiny: Path, tmp_path: Path, verb: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = _verbs(tiny, tmp_path)[verb]
    assert main([*argv, "--device", MISSING]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"--device={MISSING!r}: no such device on this machine; available: {', '.join(available_devices())}" in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "q").exists()  # refused before any work
    assert main([*argv, "--device", "gpu0"]) == 2  # the syntax, checked by argparse
    assert "must be auto, cpu, cuda or cuda:N" in capsys.readouterr().err


def test_the_loader_holds_its_device_resolved(tiny: Path) -> None:
    auto = LoaderConfig(fanouts=(3,), batch_size=8, device="auto").device
    assert auto == ("cpu" if not torch.cuda.is_available() else f"cuda:{torch.cuda.current_device()}")
    assert LoaderConfig(fanouts=(3,), batch_size=8).device == "cpu"
    with pytest.raises(oa.errors.DeviceNotFoundError, match="available: cpu"):
        oa.OutreLoader(tiny, fanouts=[3], batch_size=8, device=MISSING)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
def test_train_runs_on_the_device(tiny: Path, tmp_path: Path, device: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", str(tiny), "--epochs", "1", "--fanouts", "3,3", "--hidden", "16", "--staleness", "4",
            "--out", str(out), "--device", device, "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["config"]["device"] == device
    assert result["epochs"][0]["batches"] > 0 and result["test_accuracy"] is not None
    state = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    assert all(t.device.type == "cpu" for t in state["model"].values())  # loaded onto the CPU, whatever trained
    assert main([*argv[:-1], "--epochs", "2", "--resume", "--json"]) == 0  # resumes onto the device
    assert len(json.loads(capsys.readouterr().out)["epochs"]) == 2
