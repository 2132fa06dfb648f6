"""The ``outre`` verbs through ``main(argv)``: exit codes, JSON output, one-line errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import outre_async as oa
from outre_async.cli import main


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_generate_then_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--preset", "tiny", str(tmp_path / "g"), "--json", "--no-progress"]) == 0
    written = _json(capsys)
    assert written["num_nodes"] == oa.open_dataset(tmp_path / "g").num_nodes
    assert main(["info", str(tmp_path / "g"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "nodes" in out and "verify       ok" in out
    assert main(["info", str(tmp_path / "g"), "--json"]) == 0
    assert _json(capsys)["num_edges"] == written["num_edges"]


def test_generate_size_flags_override_the_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", str(tmp_path / "g"), "--num-nodes", "777", "--feature-dim", "12", "--json"]) == 0
    info = _json(capsys)
    assert (info["num_nodes"], info["feature_dim"]) == (777, 12)


def test_generate_list_presets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["generate", "--list", str(tmp_path / "unused")]) == 0
    out = capsys.readouterr().out
    for name in ("tiny", "quickstart", "products-like", "papers-like", "igb-like"):
        assert name in out
    assert not (tmp_path / "unused").exists()
    assert main(["generate", "--list"]) == 0
    assert main(["generate", "--preset", "tiny"]) == 2
    assert "needs an output directory" in capsys.readouterr().err


def test_convert_npz_then_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = Path(__file__).resolve().parents[2] / "shared" / "data" / "cora.npz"
    if not src.exists():
        pytest.skip("shared data not present")
    assert main(["convert", str(src), str(tmp_path / "cora"), "--json"]) == 0
    info = _json(capsys)
    assert (info["num_nodes"], info["num_edges"], info["feature_dim"], info["num_classes"]) == (2708, 10556, 1433, 7)
    assert info["splits"] == {"train": 140, "val": 500, "test": 1000}


def _npz(path: Path, y: np.ndarray) -> Path:
    n = len(y)
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    np.savez(path, edge_index=ring, x=np.ones((n, 4), np.float32), y=y, train_idx=np.arange(0, n, 2),
             val_idx=np.arange(1, n, 2))
    return path


def test_a_stray_label_is_refused_at_convert_and_at_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A label of 10**12 used to become num_classes 10**12 + 1, and `outre train` a 32 TB RuntimeError."""
    y = np.arange(40) % 3
    y[7] = 10**12
    assert main(["convert", str(_npz(tmp_path / "bad.npz", y)), str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "label 1000000000000 makes num_classes=1,000,000,000,001, more than the node count (40)" in err
    assert err.count("\n") == 1 and not (tmp_path / "bad").exists()
    y[7] = 1
    assert main(["convert", str(_npz(tmp_path / "ok.npz", y)), str(tmp_path / "ok")]) == 0
    manifest = tmp_path / "ok" / "manifest.json"  # a manifest is untrusted: edited, the train refuses it whole
    manifest.write_text(manifest.read_text().replace('"num_classes": 3', '"num_classes": 1000000000001'))
    capsys.readouterr()
    assert main(["train", str(tmp_path / "ok"), "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("outre train: error: ") and "num_classes=1,000,000,000,001, more than the node count" in err
    assert not (tmp_path / "run").exists()


def test_errors_are_one_line_and_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("outre info: error: no dataset at") and err.count("\n") == 1
    assert main(["generate", "--preset", "no-such-preset", str(tmp_path / "g")]) == 2
    assert "no-such-preset" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 x\n")
    assert main(["convert", str(bad), str(tmp_path / "out")]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_convert_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n2 0\n")
    assert main(["convert", str(edges), str(tmp_path / "out")]) == 0
    assert main(["convert", str(edges), str(tmp_path / "out")]) == 2
    assert "overwrite" in capsys.readouterr().err
    assert main(["convert", str(edges), str(tmp_path / "out"), "--overwrite", "--undirected"]) == 0
    assert oa.open_dataset(tmp_path / "out").num_edges == 6


def test_bad_budget_and_fanouts_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n")
    assert main(["convert", str(edges), str(tmp_path / "o"), "--memory-budget", "lots"]) == 2
    assert "byte size" in capsys.readouterr().err
    assert main(["quickstart", "--fanouts", "10,x"]) == 2
    assert "fanouts" in capsys.readouterr().err


@pytest.mark.parametrize("staleness", [1, 20])
def test_quickstart_trains_graphsage_better_than_mlp(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     staleness: int) -> None:
    argv = ["quickstart", "--dir", str(tmp_path), "--preset", "tiny", "--epochs", "5",
            "--batch-size", "128", "--staleness", str(staleness), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    # not a terminal (captured): no bars, but a line each quarter epoch, for GraphSAGE and for the MLP
    ticks = [line for line in captured.err.splitlines() if line.strip().startswith("epoch 1: ")]
    assert len(ticks) >= 2 * 2 and "training the graph-blind MLP" in captured.err, captured.err
    history = result["loader_stats"].get("history")
    assert (history is None) == (staleness == 1)
    if history is not None:
        assert history["pulled"] > 0 and max(int(age) for age in history["realised_staleness"]) <= staleness
    losses = [e["loss"] for e in result["epochs"]]
    assert losses[-1] < losses[0]
    assert result["test_accuracy"] > result["mlp_test_accuracy"] + 0.05
    assert np.isfinite(losses).all()
    assert (tmp_path / "dataset" / "manifest.json").exists()


def test_no_command_prints_help() -> None:
    assert main([]) == 2


# -- a fast CLI: the parsers and the light verbs import neither torch, PyG nor numba -------------------

HEAVY = ("torch", "torch_geometric", "numba")


def test_parser_and_light_verbs_import_no_torch(tmp_path: Path) -> None:
    """In a fresh interpreter (this one has long imported torch): building ``outre``'s parser,
    ``outre --help``, ``outre train --help``, an argument error, ``outre info`` and ``outre clean`` leave
    torch, torch_geometric and numba out of ``sys.modules``; ``train`` imports torch once it runs."""
    from conftest import write_store

    indptr = np.array([0, 1, 2, 3], dtype=np.int64)
    write_store(tmp_path / "ds", indptr, np.array([1, 2, 0]), features=np.ones((3, 4), np.float32))
    code = (
        "import sys\n"
        f"heavy = {HEAVY!r}\n"
        "def loaded(): return sorted(set(heavy) & set(sys.modules))\n"
        "from outre_async.cli import _build_parser, main\n"
        "_build_parser()\n"
        "assert not loaded(), ('parser', loaded())\n"
        "assert main(['--help']) == 0 and not loaded(), ('--help', loaded())\n"
        "for verb in ('train', 'bench', 'partition', 'reorder', 'stats', 'profile', 'quickstart'):\n"
        "    assert main([verb, '--help']) == 0 and not loaded(), (verb, loaded())\n"
        f"assert main(['train', {str(tmp_path / 'ds')!r}, '--epochs', '0']) == 2 and not loaded(), loaded()\n"
        f"assert main(['info', {str(tmp_path / 'ds')!r}]) == 0 and not loaded(), ('info', loaded())\n"
        f"assert main(['clean', {str(tmp_path)!r}]) == 0 and not loaded(), ('clean', loaded())\n"
        # the check can fail: a verb that needs torch does import it when it runs
        f"main(['train', {str(tmp_path / 'ds')!r}, '--epochs', '1', '--fanouts', 'x'])\n"
        "assert 'torch' in sys.modules or 'numba' in sys.modules, 'train ran without importing anything'\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    from outre_async.cli import _build_parser

    sub = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_help_shows_every_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each option that takes a value and has a default shows it in ``outre VERB --help``, on the
    option's own help lines (the defaults of train's and quickstart's main knobs included)."""
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option's help: no wrapping inside a value
    checked = set()
    for verb, parser in _verb_parsers().items():
        lines = parser.format_help().splitlines()
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.default in (None, argparse.SUPPRESS, []):
                continue
            at = next(i for i, line in enumerate(lines) if line.strip().startswith(", ".join(action.option_strings)))
            shown = " ".join(lines[at:at + 2])
            assert f"default: {action.default}" in shown, (verb, action.option_strings, shown)
            checked.add((verb, action.option_strings[0]))
    for knob in ("--hidden", "--epochs", "--batch-size", "--lr", "--fanouts", "--staleness"):
        assert ("quickstart", knob) in checked and ("train", knob if knob != "--fanouts" else "--hidden") in checked
    assert ("convert", "--memory-budget") in checked and ("bench", "--preset") in checked
