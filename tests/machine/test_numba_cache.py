"""``kernels_to_compile``: a kernel whose numba cache has no index (the first run on a machine) needs
a compile, one that numba cached does not, a changed source needs one again; the CLI says so once."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numba
import pytest

from outre_async.machine._numba_cache import NOTE, kernels_to_compile

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT: no kernel is compiled")

KERNEL = "import numba\n\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"


def _module(folder: Path, name: str, source: str = KERNEL) -> ModuleType:
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("cache_dir", [None, "numba-cache"])
def test_an_uncompiled_kernel_is_found_and_a_cached_one_is_not(tmp_path: Path, cache_dir: str | None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the module (``__pycache__/*.nbi``) and under NUMBA_CACHE_DIR (numba's ``CACHE_DIR``, set
    before the kernel is defined, as the variable is read when numba starts)."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / cache_dir) if cache_dir else "")
    src = tmp_path / "src"
    src.mkdir()
    first = _module(src, f"kern_{cache_dir or 'tree'}")
    assert kernels_to_compile([first.twice])
    assert first.twice(21) == 42  # compiles and writes numba's cache
    index = list((tmp_path / cache_dir if cache_dir else src / "__pycache__").rglob("*.nbi"))
    assert len(index) == 1, index
    assert not kernels_to_compile([first.twice])
    edited = _module(src, f"kern_{cache_dir or 'tree'}", KERNEL.replace("2 * x", "20 * x"))  # the source changed
    assert kernels_to_compile([edited.twice])  # its index is stale: numba compiles again
    assert not kernels_to_compile([lambda x: x])  # not a numba kernel: nothing to say


def test_train_and_quickstart_say_compiling_with_an_empty_cache(tmp_path: Path) -> None:
    """The real sampler and buffer kernels with an empty NUMBA_CACHE_DIR (a machine's first run): each
    command says the note once on stderr after its arguments are checked (here it then stops at a
    dataset or a device that is not there); nothing is compiled to find out.  A child process (numba
    reads the variable when it starts), one for both commands (its imports are most of its time)."""
    commands = [["train", str(tmp_path / "missing"), "--epochs", "1", "--progress"],
                ["quickstart", "--epochs", "1", "--device", "cuda:99", "--progress"],
                ["train", str(tmp_path / "missing"), "--epochs", "1", "--no-progress"]]  # a log: progress news off
    code = ("import sys; from outre_async.cli import main\n"
            f"for argv in {commands!r}:\n    print(main(argv), file=sys.stderr)")
    root = Path(__file__).parents[2]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty"), "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert [line.split(":")[0] if line.startswith("outre ") else line for line in lines] == [
        NOTE, "outre train", "2", NOTE, "outre quickstart", "2", "outre train", "2"], done.stderr
    assert not list((tmp_path / "empty").rglob("*.nbc"))  # nothing compiled to find out
