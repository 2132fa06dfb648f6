"""``--overwrite`` replaces only what outre wrote, atomically (issue 11 item 4, the writer half).

Refused (exit 2, one line, nothing changed): a folder holding the input, a project folder, a dataset
holding a file outre did not write, a file, a symlink, a partition folder that is not ours.  Accepted:
an empty folder, a dataset, a partition folder; the path is swapped in one ``renameat2`` step.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import generated
from outre_async.partition import partition

import outre_async as oa
from outre_async.cli import main
from outre_async.store._install import install_directory, replace_by_two_renames
from outre_async.store._rename import rename_exchange

CORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cora.npz"  # ../shared beside the checkout
SMALL = {"num_nodes": 300, "feature_dim": 8}


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256), to prove nothing changed."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(capsys: pytest.CaptureFixture[str], verb: str, *reason: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith(f"outre {verb}: error: refusing to overwrite") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for text in reason:
        assert text in err, err


@pytest.fixture
def cora(tmp_path: Path) -> Path:
    if not CORA.exists():
        pytest.skip("shared data not present")
    src = tmp_path / "proj" / "data" / "cora.npz"
    src.parent.mkdir(parents=True)
    shutil.copyfile(CORA, src)
    return src


def test_convert_into_the_folder_holding_the_input_is_refused(cora: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = cora.parents[1]
    (proj / "train.py").write_text("print('mine')\n")
    before = _snapshot(proj)
    assert main(["convert", str(cora), str(proj), "--overwrite"]) == 2
    _refused(capsys, "convert", "contains the input", str(cora))
    assert _snapshot(proj) == before
    with pytest.raises(oa.errors.OverwriteRefusedError, match="contains the input"):
        oa.convert(cora, proj, overwrite=True)
    assert _snapshot(proj) == before


@pytest.mark.parametrize(("manifest", "reason"), [
    (None, "no manifest.json"),
    ("{", "not valid JSON"),
    ('{"format": "someone-elses"}', "not an outre-async manifest"),
])
def test_a_folder_that_is_not_outres_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                manifest: str | None, reason: str) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("keep me\n")
    if manifest is not None:
        (proj / "manifest.json").write_text(manifest)
    before = _snapshot(proj)
    assert main(["generate", str(proj), "--overwrite", "--num-nodes", "300"]) == 2
    _refused(capsys, "generate", "not an outre dataset", reason)
    assert _snapshot(proj) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # no temp folder left either


def test_a_dataset_holding_a_foreign_file_is_refused_and_kept(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ds = generated(tmp_path / "ds", seed=1, **SMALL)
    (ds.path / "my-results.csv").write_text("epoch,acc\n")
    before = _snapshot(ds.path)
    assert main(["generate", str(ds.path), "--overwrite", "--seed", "2", "--num-nodes", "300"]) == 2
    _refused(capsys, "generate", "'my-results.csv'", "which outre did not write")
    assert _snapshot(ds.path) == before


def test_a_file_or_a_symlink_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = generated(tmp_path / "ds", seed=1, **SMALL)
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(ds.path)
    before = _snapshot(ds.path)
    assert main(["generate", str(tmp_path / "file"), "--overwrite"]) == 2
    err = capsys.readouterr().err  # the CLI's output-folder check answers before the writer's
    assert err.startswith("outre generate: error: ") and "is a file" in err and err.count("\n") == 1, err
    with pytest.raises(oa.errors.OverwriteRefusedError, match="is a file"):  # the library refuses on its own
        oa.generate(tmp_path / "file", "tiny", overwrite=True)
    assert main(["generate", str(tmp_path / "link"), "--overwrite", "--num-nodes", "300"]) == 2
    _refused(capsys, "generate", "symbolic link")
    assert (tmp_path / "file").read_text() == "x"
    assert (tmp_path / "link").is_symlink() and _snapshot(ds.path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "file", "link"]


def test_an_empty_folder_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert main(["generate", str(tmp_path / "out"), "--overwrite", "--num-nodes", "300"]) == 0
    assert oa.open_dataset(tmp_path / "out").num_nodes == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_dataset_is_replaced_in_one_step(cora: Path, tmp_path: Path) -> None:
    old = generated(tmp_path / "ds", seed=1, **SMALL)
    partition(old, 4, name="p4")  # partitions/ is outre's too: replaced with the dataset
    held = os.open(old.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert main(["convert", str(cora), str(old.path), "--overwrite"]) == 0
        assert os.fstat(held).st_nlink == 0  # the old folder is deleted, not left aside
    finally:
        os.close(held)
    new = oa.open_dataset(tmp_path / "ds")
    assert (new.num_nodes, new.num_edges) == (2708, 10556)
    assert not (new.path / "partitions").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "proj"]


def test_partition_overwrite_replaces_only_a_partition_folder(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    ds = generated(tmp_path / "ds", seed=3, **SMALL)
    foreign = ds.path / "partitions" / "mine"
    foreign.mkdir(parents=True)
    (foreign / "model.pt").write_bytes(b"weights")
    assert main(["partition", str(ds.path), "--parts", "4", "--name", "mine", "--overwrite"]) == 2
    _refused(capsys, "partition", "not an outre partition folder", "no meta.json")
    assert (foreign / "model.pt").read_bytes() == b"weights"
    with pytest.raises(oa.errors.OverwriteRefusedError):
        partition(ds, 4, name="mine", overwrite=True)
    first = partition(ds, 4, name="p", mode="bloom")
    assert sorted(p.name for p in first.path.iterdir()) == sorted(
        ["meta.json", *(f"{stem}.bin" for stem in first.meta["files"])])  # no bloom scratch installed
    second = partition(ds, 8, name="p", overwrite=True)
    assert second.num_parts == 8
    assert sorted(p.name for p in (ds.path / "partitions").iterdir()) == ["mine", "p"]


def test_a_name_taken_while_writing_is_not_replaced(tmp_path: Path) -> None:
    writer = oa.DatasetWriter(tmp_path / "out", num_nodes=3)
    writer.append_neighbors(np.array([1, 1, 1]), np.array([1, 2, 0]))
    (tmp_path / "out").mkdir()  # an empty folder appears: a plain rename would silently replace it
    with pytest.raises(oa.errors.DatasetExistsError, match="appeared while writing"):
        writer.commit()
    assert list((tmp_path / "out").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _finished(parent: Path, text: str) -> Path:
    tmp = parent / f".out.outre-tmp-{text}"
    tmp.mkdir()
    (tmp / "file").write_text(text)
    return tmp


def test_the_path_never_goes_missing_during_a_replace(tmp_path: Path) -> None:
    probe_a, probe_b = tmp_path / "a", tmp_path / "b"
    probe_a.mkdir(), probe_b.mkdir()
    if not rename_exchange(probe_a, probe_b):
        pytest.skip("renameat2(RENAME_EXCHANGE) unavailable here: the documented two-rename fallback runs")
    out = tmp_path / "out"
    install_directory(_finished(tmp_path, "v0"), out, overwrite=False, exists=AssertionError())
    missing = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if not os.path.isdir(out):
                missing.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(1, 200):
            install_directory(_finished(tmp_path, f"v{i}"), out, overwrite=True, exists=AssertionError())
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert missing == []
    assert (out / "file").read_text() == "v199"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out"]


def test_the_two_rename_fallback_replaces_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    install_directory(_finished(tmp_path, "old"), out, overwrite=False, exists=AssertionError())
    replace_by_two_renames(_finished(tmp_path, "new"), out)
    assert (out / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
