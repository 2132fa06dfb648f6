"""The atomic directory install shared by the dataset writer and the partitioner."""

from __future__ import annotations

from pathlib import Path

import pytest

from outre_async.store._install import install_directory


def _finished(tmp_path: Path, text: str) -> Path:
    tmp = tmp_path / f".out.tmp-{text}"
    tmp.mkdir()
    (tmp / "file").write_text(text)
    return tmp


def test_install_renames_into_place(tmp_path: Path) -> None:
    install_directory(_finished(tmp_path, "new"), tmp_path / "out", overwrite=False, exists=AssertionError())
    assert (tmp_path / "out" / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_existing_target_raises_the_given_error_and_keeps_both(tmp_path: Path) -> None:
    install_directory(_finished(tmp_path, "old"), tmp_path / "out", overwrite=False, exists=AssertionError())
    tmp = _finished(tmp_path, "new")
    with pytest.raises(FileExistsError, match="taken"):
        install_directory(tmp, tmp_path / "out", overwrite=False, exists=FileExistsError("taken"))
    assert (tmp_path / "out" / "file").read_text() == "old"
    assert (tmp / "file").read_text() == "new"


def test_overwrite_replaces_and_leaves_no_old_copy(tmp_path: Path) -> None:
    install_directory(_finished(tmp_path, "old"), tmp_path / "out", overwrite=False, exists=AssertionError())
    install_directory(_finished(tmp_path, "new"), tmp_path / "out", overwrite=True, exists=AssertionError())
    assert (tmp_path / "out" / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
