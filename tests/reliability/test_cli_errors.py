"""Hostile ``outre`` invocations: every one ends in exit code 2 and one line on stderr, never a traceback.

Each verb and flag gets out-of-range, non-finite, wrong-type and impossible values, plus output paths
whose parent is a file or cannot be created.  The cases run in one child process
(``cli_driver.py``, address space capped: a size the CLI fails to refuse is a recorded
``MemoryError`` there, not an OOM kill here); each case is then its own test.  ``{ds}`` is a small
valid dataset, ``{file}`` a plain file, ``{tmp}`` an empty folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import generated

HERE = Path(__file__).resolve().parent

GEN = ["generate", "{tmp}/g"]
PART = ["partition", "{ds}", "--parts", "4"]
STATS = ["stats", "redundancy", "{ds}"]
QS = ["quickstart", "--dir", "{tmp}/qs"]
BENCH = ["bench", "--preset", "tiny", "--out", "{tmp}/results", "--data-dir", "{tmp}/data"]

CASES: list[list[str]] = [
    # argparse's own errors: one line too
    ["no-such-verb"], ["generate", "--num-nodes", "many", "{tmp}/g"], ["partition"],
    ["quickstart", "--backend", "floppy"], ["partition", "{ds}", "--parts", "4", "--levels", "3"],
    # generate
    GEN + ["--num-nodes", "-5"], GEN + ["--num-nodes", "0"], GEN + ["--avg-degree", "nan"],
    GEN + ["--avg-degree", "-1"], GEN + ["--avg-degree", "inf"], GEN + ["--feature-dim", "-1"],
    GEN + ["--num-classes", "0"], GEN + ["--num-communities", "0"], GEN + ["--seed", "-1"],
    GEN + ["--num-nodes", "1000000000000000"], GEN + ["--feature-dim", "1000000000"],
    GEN + ["--num-nodes", "100000000", "--feature-dim", "4096"],
    ["generate", "--preset", "nope", "{tmp}/g"], ["generate", "{file}/g"], ["generate", "/proc/outre/g"],
    ["generate", "{ds}"],
    # convert
    ["convert", "{tmp}/missing.npz", "{tmp}/c"], ["convert", "{tmp}", "{tmp}/c"], ["convert", "{file}", "{tmp}/c"],
    ["convert", "{edges}", "{tmp}/c", "--num-nodes", "-1"], ["convert", "{edges}", "{tmp}/c", "--num-nodes", "2"],
    ["convert", "{edges}", "{tmp}/c", "--memory-budget", "0"], ["convert", "{edges}", "{tmp}/c", "--memory-budget", "-1"],
    ["convert", "{edges}", "{tmp}/c", "--memory-budget", "100TiB"],
    ["convert", "{edges}", "{tmp}/c", "--num-nodes", "1000000000000000"],
    ["convert", "{edges}", "{file}/c"], ["convert", "{edges}", "/proc/outre/c"],
    ["convert", "{edges}", "{edges}"],
    # info
    ["info", "{tmp}/missing"], ["info", "{file}"], ["info", "{tmp}"],
    # quickstart
    QS + ["--epochs", "0"], QS + ["--epochs", "-1"], QS + ["--batch-size", "0"], QS + ["--batch-size", "-1"],
    QS + ["--fanouts", "0"], QS + ["--fanouts", "-2,5"], QS + ["--fanouts", ""], QS + ["--fanouts", "10,x"],
    QS + ["--fanouts", "-1,5", "--epochs", "0"],  # -1,5 parses (full neighbourhood); the epochs error is reached
    QS + ["--hidden", "0"], QS + ["--hidden", "-1"], QS + ["--lr", "nan"], QS + ["--lr", "-1"], QS + ["--lr", "0"],
    QS + ["--lr", "inf"], QS + ["--seed", "-1"], QS + ["--preset", "nope"], QS + ["--hidden", "100000000000"],
    ["quickstart", "--dir", "{file}/qs"], ["quickstart", "--dir", "/proc/outre/qs"],
    # partition
    PART[:3] + ["0"], PART[:3] + ["-1"], PART[:3] + ["1000000000000"], PART + ["--first-level", "0"],
    PART + ["--levels", "2", "--first-level", "3"], PART + ["--levels", "2", "--first-level", "-2"],
    PART + ["--passes", "0"], PART + ["--passes", "-1"], PART + ["--gamma", "nan"], PART + ["--gamma", "-1"],
    PART + ["--nu", "nan"], PART + ["--nu", "0"], PART + ["--nu", "-1"], PART + ["--alpha", "nan"],
    PART + ["--alpha", "-1"], PART + ["--train-weight", "nan"], PART + ["--train-weight", "-1"],
    PART + ["--chunk", "0"], PART + ["--chunk", "-1"], PART + ["--chunk", "abc"], PART + ["--chunk", "100TiB"],
    PART + ["--write-buffer", "0"], PART + ["--write-buffer", "1"], PART + ["--write-buffer", "100TiB"], PART + ["--bloom-memory", "0"],
    PART + ["--mode", "bloom", "--bloom-memory", "100TiB"], PART + ["--name", ""],
    ["partition", "{file}", "--parts", "4"], ["partition", "{tmp}/missing", "--parts", "4"],
    # stats redundancy
    STATS + ["--fanouts", "0"], STATS + ["--fanouts", "x"], STATS + ["--batch-size", "0"],
    STATS + ["--batch-size", "-1"], STATS + ["--parts-per-batch", "0"], STATS + ["--split", "nope"],
    STATS + ["--seed", "-1"], STATS + ["--max-batches", "0"], STATS + ["--max-batches", "-1"],
    STATS + ["--partitions", "nope"], STATS + ["--fanouts", "-1,5", "--max-batches", "0"],
    # bench: refused before anything is generated or run
    BENCH + ["--repeats", "0"], BENCH + ["--repeats", "-1"], BENCH + ["--max-batches", "0"],
    BENCH + ["--max-batches", "-1"], BENCH + ["--cap", "-1"], BENCH + ["--cap", "abc"],
    BENCH + ["--timeout", "0"], BENCH + ["--timeout", "-1"], BENCH + ["--timeout", "nan"],
    BENCH + ["--probe-seconds", "-1"], BENCH + ["--probe-seconds", "nan"], BENCH + ["--systems", "nope"],
    BENCH + ["--systems", ","], BENCH + ["--systems", "nomodule:Nope"], BENCH + ["--seed", "-1"],
    BENCH + ["--set", "admission=grad"], BENCH + ["--set", "outre-hist.admission"],
    BENCH + ["--systems", "outre-hist", "--set", "outre-hist.staleness=nan"],
    BENCH + ["--systems", "outre", "--set", "outre-hist.admission=grad"],
    BENCH + ["--systems", "outre-hist", "--set", "outre-hist.colour=red"],
    ["bench", "--preset", "tiny", "--out", "{file}/r", "--data-dir", "{tmp}/data"],
    ["bench", "--preset", "tiny", "--out", "{tmp}/r", "--data-dir", "{file}/data"],
]


def _fill(argv: list[str], where: dict[str, str]) -> list[str]:
    return [a.format(**where) for a in argv]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("cli-errors")
    ds = generated(root / "ds", "tiny")
    (root / "file").write_text("not a folder\n")
    edges = root / "edges.txt"
    np.savetxt(edges, np.array([[0, 1], [1, 2], [2, 0], [3, 1]]), fmt="%d")
    (root / "tmp").mkdir()
    where = {"ds": str(ds.path), "file": str(root / "file"), "tmp": str(root / "tmp"), "edges": str(edges)}
    cases = [_fill(argv, where) for argv in CASES]
    (root / "cases.json").write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, str(HERE / "cli_driver.py"), str(root / "cases.json"), str(root / "out.json")],
                          capture_output=True, text=True, timeout=240, env=env, cwd=root)
    done = json.loads((root / "out.json").read_text()) if (root / "out.json").exists() else []
    out = {" ".join(r["argv"]): r for r in done}
    for argv in cases[len(done):]:
        out[" ".join(argv)] = {"argv": argv, "code": None, "stderr": proc.stderr[-2000:],
                               "traceback": f"driver died with {proc.returncode} before this case"}
    return {" ".join(_fill(argv, {"ds": "DS", "file": "FILE", "tmp": "TMP", "edges": "EDGES"})): r
            for argv, r in zip(CASES, (out[" ".join(c)] for c in cases), strict=True)}


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a))
def test_one_line_exit_2_no_traceback(results: dict[str, dict[str, Any]], argv: list[str]) -> None:
    r = results[" ".join(_fill(argv, {"ds": "DS", "file": "FILE", "tmp": "TMP", "edges": "EDGES"}))]
    assert r["traceback"] is None, r["traceback"]
    assert "Traceback" not in r["stderr"], r["stderr"]
    assert r["code"] == 2, r
    lines = r["stderr"].strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("outre"), r["stderr"]


def test_a_fanout_list_starting_with_minus_one_is_a_value_not_an_option() -> None:
    from outre_async.cli import _build_parser, parse_fanouts

    args = _build_parser().parse_args(["quickstart", "--fanouts", "-1,5"])
    assert parse_fanouts(args.fanouts) == (-1, 5)
    args = _build_parser().parse_args(["stats", "redundancy", "DS", "--fanouts", "-1,-1"])
    assert parse_fanouts(args.fanouts) == (-1, -1)
