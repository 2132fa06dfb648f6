"""Crash litter is collected (issue 11 item 8): real writer subprocesses killed mid-write.

``kill -9`` leaves no partial output, and the temp folders it leaves (named with the writer's pid) are
removed by the next writer into the same parent or by ``outre clean``; SIGTERM is handled like Ctrl-C,
so the CLI removes its own temp folder and exits 143.  The collector never touches anything but our
own dead writers' folders.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import types
import weakref
from pathlib import Path

import numpy as np
import pytest
from conftest import generated

import outre_async as oa
from outre_async.cli import main
from outre_async.store._litter import collect_litter
from outre_async.store._tempdir import host_tag, parse_temp_name

# A real writer that stops mid-write and says where: it prints its temp folders, then waits on stdin.
WRITER = """
import sys, numpy as np, outre_async as oa
from outre_async.ingest._csc_builder import CSCBuilder
out = sys.argv[1]
builder = CSCBuilder(memory_budget=1024, tmp_dir=sys.argv[2], tmp_stem="ds")
builder.add(np.arange(500) % 7, np.arange(500) % 11)  # past the 1 KiB budget: spills
writer = oa.DatasetWriter(out, num_nodes=1000, feature_dim=16)
writer.append_neighbors(np.ones(500, np.int64), np.arange(500))
writer.append_features(np.ones((200, 16), np.float32))
print(writer._tmp, builder._tmp_dir(), flush=True)
sys.stdin.read()
"""
PART_WRITER = """
import sys, outre_async as oa
from outre_async.partition._output import PartitionWriter
writer = PartitionWriter(oa.open_dataset(sys.argv[1]), "p4")
(writer.tmp / "assignment.bin").write_bytes(bytes(4096))
print(writer.tmp, flush=True)
sys.stdin.read()
"""


def _start(script: str, *args: str) -> tuple[subprocess.Popen[str], list[Path]]:
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, "the writer died before reaching mid-write"
    return child, [Path(p) for p in line.split()]


def _kill9(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.communicate(timeout=30)  # reaped (its pid is free again), pipes closed
    assert child.returncode == -signal.SIGKILL


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    return int(done.stdout)


def test_kill_9_mid_write_leaves_litter_that_the_next_writer_collects(tmp_path: Path) -> None:
    child, temps = _start(WRITER, str(tmp_path / "ds"), str(tmp_path / "sort"))
    assert all(t.is_dir() for t in temps)
    _kill9(child)
    assert not (tmp_path / "ds").exists()  # no partial output
    for t in temps:  # litter, named with the dead writer's pid
        name = parse_temp_name(t.name)
        assert t.is_dir() and name is not None and name.pid == child.pid
    generated(tmp_path / "other", num_nodes=300, feature_dim=8)  # the next writer into tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "sort"]
    assert [p.name for p in (tmp_path / "sort").iterdir()] == [temps[1].name]  # another parent: left
    edges = tmp_path / "e.txt"
    edges.write_text("".join(f"{i} {(i * 7) % 300}\n" for i in range(300)))
    oa.convert(edges, tmp_path / "conv", memory_budget=1024, tmp_dir=tmp_path / "sort")  # spills there
    assert list((tmp_path / "sort").iterdir()) == []


def test_kill_9_of_a_partition_writer_is_collected_by_outre_clean(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ds = generated(tmp_path / "ds", num_nodes=300, feature_dim=8)
    child, (temp,) = _start(PART_WRITER, str(ds.path))
    _kill9(child)
    assert temp.parent == ds.path / "partitions" and temp.is_dir()
    assert oa.open_dataset(ds.path) is not None and not (ds.path / "partitions" / "p4").exists()
    assert main(["clean", str(ds.path), "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(f["path"], f["action"], f["pid"]) for f in report["folders"]] == [(str(temp), "removed", child.pid)]
    assert temp.is_dir()  # a dry run changes nothing
    assert main(["clean", str(ds.path)]) == 0
    out = capsys.readouterr().out
    assert f"removed          {temp}  (pid {child.pid}, 4.0 KiB)" in out
    assert "1 dead writers' temp folder(s) were removed (4.0 KiB)" in out
    assert list((ds.path / "partitions").iterdir()) == []


def test_sigterm_mid_write_removes_the_temp_folder_and_exits_143(tmp_path: Path) -> None:
    """SIGSTOP freezes the CLI as soon as its temp folder shows; it is mid-write if the folder is still
    there while frozen (else the run was too quick: try again, bigger)."""
    for attempt in range(4):
        out = tmp_path / f"g{attempt}"
        child = subprocess.Popen([sys.executable, "-m", "outre_async.cli", "generate", str(out), "--no-progress",
                                  "--num-nodes", str(100_000 << attempt), "--feature-dim", "64"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        temp = _wait_for_temp(tmp_path, child)
        if temp is not None:
            child.send_signal(signal.SIGSTOP)
            if temp.exists():
                break
            child.send_signal(signal.SIGCONT)
        child.wait(timeout=120)
    else:
        pytest.fail("never caught the writer mid-write")
    child.send_signal(signal.SIGTERM)
    child.send_signal(signal.SIGCONT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert err == "outre generate: terminated\n"
    # The signal is handled between bytecodes: one that lands while the final rename is in the kernel
    # takes effect just after it, so the output is then complete (and opens), never partial.
    assert not temp.exists() and (not out.exists() or oa.open_dataset(out).num_nodes > 0)
    assert not [p for p in tmp_path.iterdir() if parse_temp_name(p.name) is not None]


@pytest.mark.parametrize("where", ["inside mkdir", "after mkdir", "after open"])
def test_an_interrupt_landing_just_after_mkdir_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                where: str) -> None:
    """The SIGTERM test's race made deterministic: the signal's exception can surface after mkdir
    succeeded in the kernel (inside pathlib's mkdir, or just after it): the folder exists though
    the call raised, and nobody else will ever remove it."""
    from outre_async.store import _tempdir

    real_mkdir, real_open = Path.mkdir, os.open
    fired = []  # one interrupt, as one signal gives (the cleanup's own calls then run normally)

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if where == "inside mkdir" and not fired:
            fired.append(self)
            raise KeyboardInterrupt

    def open_(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if where == "after mkdir" and not fired and isinstance(path, Path):
            fired.append(path)
            raise KeyboardInterrupt
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def finalize(*args: object) -> object:  # the first Python call after the fd is open
        if where == "after open" and not fired:
            fired.append(args)
            raise KeyboardInterrupt
        return weakref.finalize(*args)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(_tempdir, "weakref", types.SimpleNamespace(finalize=finalize))
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        _tempdir.TempDir(tmp_path, "g", "tmp")
    monkeypatch.undo()
    assert fired and list(tmp_path.iterdir()) == [] and not _tempdir._OWN
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_taken_temp_name_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from outre_async.store import _tempdir

    monkeypatch.setattr(_tempdir, "temp_name", lambda stem, kind: "taken")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "theirs").write_text("x")
    with pytest.raises(FileExistsError):
        _tempdir.TempDir(tmp_path, "g", "tmp")
    assert (tmp_path / "taken" / "theirs").read_text() == "x" and not _tempdir._OWN


def _wait_for_temp(parent: Path, child: subprocess.Popen[str]) -> Path | None:
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        for entry in os.listdir(parent):
            name = parse_temp_name(entry)
            if name is not None and name.pid == child.pid:
                return parent / entry
        time.sleep(0.002)
    return None


def test_the_collector_touches_only_our_dead_writers_folders(tmp_path: Path) -> None:
    dead, host = _dead_pid(), host_tag()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("x")
    names = {
        "dead": f".ds.outre-tmp-{host}-{dead}-0123abcd",
        "alive": f".ds.outre-tmp-{host}-{os.getpid()}-0123abcd",
        "other_host": f".ds.outre-tmp-{'0' * 6 if host != '0' * 6 else '1' * 6}-{dead}-0123abcd",
        "locked": f".ds.outre-sort-{host}-{dead}-4567abcd",
        "file": f".ds.outre-tmp-{host}-{dead}-89abcdef",
        "symlink": f".ds.outre-tmp-{host}-{dead}-fedcba98",
        "legacy": f".ds.tmp-{dead}-0123abcd",
        "lookalike": f".ds.outre-tmp-{host}-{dead}-0123ABCD",
        "user": "ds.outre-tmp-backup",
    }
    for key, name in names.items():
        if key == "file":
            (tmp_path / name).write_text("not a folder")
        elif key == "symlink":
            (tmp_path / name).symlink_to(target)
        else:
            (tmp_path / name).mkdir()
            (tmp_path / name / "f").write_bytes(bytes(10))
    lock = os.open(tmp_path / names["locked"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a live writer in another pid namespace holds its lock
        found = {Path(x.path).name: x.action for x in collect_litter(tmp_path)}
    finally:
        os.close(lock)
    assert found == {names["dead"]: "removed", names["alive"]: "kept", names["other_host"]: "kept",
                     names["locked"]: "kept"}
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"elsewhere", *(n for k, n in names.items() if k != "dead")}
    assert (target / "precious").read_text() == "x"
    assert {Path(x.path).name: x.action for x in collect_litter(tmp_path)}[names["locked"]] == "removed"


def test_an_interrupted_two_rename_replace_is_restored(tmp_path: Path) -> None:
    """The fallback replace moves the old dataset aside first: if the writer dies before moving the new
    one in, the path is free and the old copy is the only one, so it is put back, not deleted."""
    ds = generated(tmp_path / "ds", num_nodes=300, feature_dim=8)
    edges = ds.num_edges
    aside = tmp_path / f".ds.outre-old-{host_tag()}-{_dead_pid()}-0123abcd"
    os.rename(ds.path, aside)
    writer = oa.DatasetWriter(tmp_path / "next", num_nodes=2)  # the next writer into the parent
    writer.abort()
    assert oa.open_dataset(tmp_path / "ds").num_edges == edges
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    current = generated(tmp_path / "ds2", num_nodes=300, feature_dim=8, seed=5)
    stale = generated(tmp_path / "ds2-before", num_nodes=300, feature_dim=8, seed=6).path
    os.rename(stale, aside.with_name(aside.name.replace(".ds.", ".ds2.")))  # died after its swap
    assert [(Path(x.path).name, x.action) for x in collect_litter(tmp_path)] == [
        (aside.name.replace(".ds.", ".ds2."), "removed")]  # the path holds the new copy: the old goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "ds2"]
    assert np.array_equal(oa.open_dataset(tmp_path / "ds2").split("train"), current.split("train"))
