"""`outre train --task link` on a tiny split graph: trains end to end through the CLI, reports ranking
metrics each epoch, resumes to the uninterrupted run's weights, and refuses what it cannot do by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.cli import main
from outre_async.trainer import TrainConfig
from outre_async.trainer._files import load_checkpoint

ARGS = ["--task", "link", "--fanouts", "3,3", "--hidden", "16", "--batch-size", "512", "--deterministic",
        "--backend", "pread", "--candidates", "20"]


@pytest.fixture(scope="module")
def tiny_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train-link")
    ds = generated(root / "tiny", "tiny", num_nodes=200)
    return oa.split_edges(ds, root / "links", val=0.1, test=0.1, seed=0)


@pytest.mark.parametrize("decoder", ["dot", "mlp"])
def test_trains_and_reports_ranking_metrics(tiny_links: Path, tmp_path: Path, capsys, decoder: str) -> None:
    out = tmp_path / "run"
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(out), "--decoder", decoder, "--json", *ARGS]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = json.loads((out / "metrics.json").read_text())["epochs"]
    assert [r["epoch"] for r in rows] == [1, 2]
    for row in rows:
        for key in ("val_mrr", "val_hits@10", "val_auc", "test_mrr", "test_hits@10", "test_auc"):
            assert 0.0 < row[key] <= 1.0, (key, row)
        assert row["loss"] > 0 and row["batches"] >= 1
    assert result["test_mrr"] == result["best"]["test_mrr"] and result["best"]["epoch"] in (1, 2)
    state = load_checkpoint(out / "last.pt")
    keys = set(state["model"])
    assert any(k.startswith("encoder.convs.") for k in keys)
    assert any(k.startswith("decoder.lins.") for k in keys) == (decoder == "mlp")


def test_resume_continues_the_uninterrupted_run(tiny_links: Path, tmp_path: Path, capsys) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(straight), *ARGS]) == 0
    text = capsys.readouterr().out
    assert "link prediction: dot decoder, 1 uniform negatives per pair, ranked against 20 candidates" in text
    assert "v mrr  t mrr" in text and "best validation mrr" in text
    assert main(["train", str(tiny_links), "--epochs", "1", "--out", str(split), *ARGS]) == 0
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(split), "--resume", *ARGS]) == 0
    a, b = load_checkpoint(straight / "last.pt"), load_checkpoint(split / "last.pt")
    assert b["epoch"] == 2 and [r["val_mrr"] for r in b["metrics"]] == [r["val_mrr"] for r in a["metrics"]]
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=0, msg=name)
    capsys.readouterr()
    # a node-task checkpoint's shape is not a link model's: named, not a load_state_dict traceback
    assert main(["train", str(tiny_links), "--epochs", "3", "--out", str(split), "--resume",
                 *[a for a in ARGS if a not in ("--task", "link")]]) == 2
    assert "has task='link', this run 'node'" in capsys.readouterr().err


def test_what_link_training_cannot_do_is_named(tiny_links: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(oa.NotSupportedError, match="--task link with --partitions is not supported yet"):
        TrainConfig(task="link", partitions="p4")
    with pytest.raises(oa.NotSupportedError, match="--task link with --staleness"):
        TrainConfig(task="link", staleness=3)
    with pytest.raises(oa.ConfigError, match="--decoder one of dot, mlp, got 'link' and 'cos'"):
        TrainConfig(task="link", decoder="cos")
    plain = generated(tmp_path / "plain", "tiny", num_nodes=100).path
    assert main(["train", str(plain), "--epochs", "1", "--out", str(tmp_path / "r"), *ARGS]) == 2
    err = capsys.readouterr().err
    assert "has no 'train' edge split" in err and "outre split-edges" in err


def test_checkpoint_every_resumes_mid_epoch_to_the_uninterrupted_weights(tiny_links: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """As for nodes: a link run stopped after step 2 of epoch 2 and resumed from that last.pt ends
    with the uninterrupted run's weights (the loader's place in the epoch and the sums restored)."""
    from outre_async.trainer import _run

    args = ARGS  # 4 batches an epoch
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(straight), *args]) == 0
    kept: list[bytes] = []
    real = _run.save_checkpoint

    def keep(path: Path, state: dict) -> None:
        real(path, state)
        if path.name == "last.pt" and "loader" in state and state["epoch"] == 1 and not kept:
            kept.append(path.read_bytes())

    monkeypatch.setattr(_run, "save_checkpoint", keep)
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(split), "--checkpoint-every", "2", *args]) == 0
    monkeypatch.undo()
    (split / "last.pt").write_bytes(kept[0])
    assert load_checkpoint(split / "last.pt")["partial"]["count"] == 2
    assert main(["train", str(tiny_links), "--epochs", "2", "--out", str(split), "--resume", *args]) == 0
    a, b = load_checkpoint(straight / "last.pt"), load_checkpoint(split / "last.pt")
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=0, msg=name)
    for key in ("batches", "loss", "train_accuracy", "val_mrr"):
        assert b["metrics"][1][key] == a["metrics"][1][key], key


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gcn", "gat"])
def test_gcn_and_gat_encoders_train_too(tiny_links: Path, tmp_path: Path, model: str) -> None:
    out = tmp_path / model
    assert main(["train", str(tiny_links), "--epochs", "1", "--out", str(out), "--model", model, *ARGS]) == 0
    row = json.loads((out / "metrics.json").read_text())["epochs"][0]
    assert 0.0 < row["test_mrr"] <= 1.0 and 0.0 < row["val_auc"] <= 1.0
