"""``outre partition``, ``outre info`` listing partitions, and ``outre stats redundancy``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import outre_async as oa
from outre_async.cli import main


def test_partition_info_and_redundancy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = oa.generate(tmp_path / "g", "tiny", seed=1, feature_dim=0)
    assert main(["partition", str(ds), "--parts", "8", "--passes", "2", "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_parts"] == 8 and 0 < out["quality"]["edge_cut_fraction"] < 1
    assert main(["partition", str(ds), "--parts", "8", "--levels", "2", "--first-level", "2", "--mode", "bloom",
                 "--name", "two", "--bloom-memory", "64KiB", "--progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["info", str(ds)]) == 0
    text = capsys.readouterr().out
    assert "partitions   fennel-8: 8 parts" in text and "partitions   two: 8 parts, levels 2, bloom" in text
    assert main(["stats", "redundancy", str(ds), "--partitions", "fennel-8", "--fanouts", "5,5", "--batch-size", "64",
                 "--parts-per-batch", "1", "--json"]) == 0
    rr = json.loads(capsys.readouterr().out)
    assert rr["partition"]["rr"] < rr["random"]["rr"]


def test_partition_without_parts_uses_the_default_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from outre_async.partition._batches import default_num_parts, default_parts_per_batch

    ds = oa.generate(tmp_path / "g", "tiny", seed=1, feature_dim=0)
    assert main(["partition", str(ds), "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    k = default_num_parts(oa.open_dataset(ds).num_nodes)
    assert out["num_parts"] == k and out["path"].endswith(f"fennel-{k}")
    assert main(["stats", "redundancy", str(ds), "--partitions", f"fennel-{k}", "--json"]) == 0
    rr = json.loads(capsys.readouterr().out)
    assert rr["parts_per_batch"] == default_parts_per_batch(k, rr["random"]["seeds"], rr["batch_size"])


def test_partition_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["partition", str(tmp_path / "missing"), "--parts", "4"]) == 2
    assert capsys.readouterr().err.startswith("outre partition: error: no dataset at")
    ds = oa.generate(tmp_path / "g", "tiny", seed=1, feature_dim=0)
    assert main(["partition", str(ds), "--parts", "0"]) == 2
    err = capsys.readouterr().err
    assert "--parts" in err and err.count("\n") == 1
    assert main(["stats", "redundancy", str(ds), "--partitions", "nope"]) == 2
    assert "no partitions 'nope'" in capsys.readouterr().err


def test_streaming_rate_leaves_compile_time_out_and_never_prints_zero() -> None:
    """The first ``outre partition`` in an environment compiles the streaming kernels (seconds, on a
    graph streamed in milliseconds): the clock counts numba's compile events inside its block only,
    and the printed rate is in k edges/s below 0.1 M (it once read "0.00 M edges/s")."""
    import numba
    from outre_async.partition._api import _CompileClock
    from outre_async.partition._cli import _rate

    @numba.njit(cache=False)
    def fresh(x: int) -> int:  # a new function: compiled on its first call, inside the clock
        return x * 3 + 1

    with _CompileClock() as clock:
        assert fresh(2) == 7
    compiled = clock.seconds
    assert compiled > 0.0
    with _CompileClock() as again:
        assert fresh(3) == 10  # already compiled: nothing to count
    assert again.seconds == 0.0
    slow = _rate({"edges_per_second": 19_259 / 8.5, "compile_seconds": 8.0})
    assert slow == "2.3 k edges/s streaming, 8.0 s of it compiling the kernels"
    assert _rate({"edges_per_second": 2.5e7, "compile_seconds": 0.0}) == "25.00 M edges/s streaming"
