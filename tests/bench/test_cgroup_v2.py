"""cgroup v2: the memory controller enabled down the ancestors when it is available but not enabled
(the lent GPU machine of issue 25 ran uncapped for want of it), on a folder tree shaped like
``/sys/fs/cgroup`` (the kernel's files are plain files here: what is written is what is read)."""

from __future__ import annotations

from pathlib import Path

from outre_async.bench._cgroup import _own_memory_cgroup, enable_memory_controller


def _tree(root: Path, groups: list[str], *, controllers: str = "cpu io memory pids") -> None:
    for rel in ["", *groups]:
        node = root / rel
        node.mkdir(parents=True, exist_ok=True)
        (node / "cgroup.controllers").write_text(controllers + "\n")
        (node / "cgroup.subtree_control").write_text("cpu\n")


def test_memory_is_enabled_in_every_ancestor_and_the_group(tmp_path: Path) -> None:
    _tree(tmp_path, ["a", "a/b"])
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory\n")  # the root has it already: untouched
    assert enable_memory_controller(tmp_path, tmp_path / "a" / "b") is None
    assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu memory\n"
    assert (tmp_path / "a" / "cgroup.subtree_control").read_text() == "+memory"
    assert (tmp_path / "a" / "b" / "cgroup.subtree_control").read_text() == "+memory"


def test_an_unavailable_controller_is_a_reason_not_an_error(tmp_path: Path) -> None:
    _tree(tmp_path, ["a"], controllers="cpu pids")
    reason = enable_memory_controller(tmp_path, tmp_path / "a")
    assert reason is not None and "not available" in reason and (tmp_path / "a" / "cgroup.subtree_control").read_text() == "cpu\n"


def test_a_refused_write_is_a_reason(tmp_path: Path) -> None:
    _tree(tmp_path, ["a"])
    target = tmp_path / "a" / "cgroup.subtree_control"
    target.unlink()
    target.mkdir()  # writing to it fails, as EBUSY would on a group that holds processes
    reason = enable_memory_controller(tmp_path, tmp_path / "a")
    assert reason is not None and ("cannot read" in reason or "cannot enable" in reason)


def test_the_own_group_is_found_only_when_memory_could_be_enabled(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import outre_async.bench._cgroup as cg

    _tree(tmp_path, ["user.slice", "user.slice/me"])
    real = Path.read_text

    def read_text(self: Path, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
        return "0::/user.slice/me\n" if str(self) == "/proc/self/cgroup" else real(self, *args, **kwargs)

    monkeypatch.setattr(cg.Path, "read_text", read_text)
    why: list[str] = []
    assert _own_memory_cgroup(tmp_path, why) == (tmp_path / "user.slice" / "me", 2) and why == []
    _tree(tmp_path / "x", [], controllers="cpu")  # another tree without the controller
    (tmp_path / "x" / "user.slice" / "me").mkdir(parents=True)
    for node in (tmp_path / "x" / "user.slice", tmp_path / "x" / "user.slice" / "me"):
        (node / "cgroup.controllers").write_text("cpu\n")
        (node / "cgroup.subtree_control").write_text("\n")
    assert _own_memory_cgroup(tmp_path / "x", why) == (None, 2) and "not enabled" in why[0]
