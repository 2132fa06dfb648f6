"""The bench child imports the installed package even when started from a source checkout, whose
``outre_async/`` folder lacks the ``partition/`` and ``cache/`` sub-packages that an install maps in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from outre_async.bench._run_in_child import _parse, child_command

REQUEST = json.dumps({"system": "sync", "spec": {}})  # a spec without fields: the child reports an error


def _decoy_checkout(root: Path) -> Path:
    """A working directory whose ``outre_async/`` fails loudly if anything imports it."""
    (root / "outre_async").mkdir()
    (root / "outre_async" / "__init__.py").write_text('raise ImportError("imported the decoy outre_async")\n')
    return root


def test_child_command_is_in_safe_path_mode() -> None:
    assert child_command(REQUEST)[:2] == [sys.executable, "-P"]


@pytest.mark.slow  # a bench child process, ~15 s
def test_child_ignores_a_source_tree_in_its_working_directory(tmp_path: Path) -> None:
    cwd = _decoy_checkout(tmp_path)
    plain = subprocess.run([sys.executable, "-m", "outre_async.bench.child", REQUEST], cwd=cwd,
                           capture_output=True, text=True, timeout=120)
    assert "imported the decoy" in plain.stderr  # without -P the working directory shadows the install

    done = subprocess.run(child_command(REQUEST), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert "decoy" not in done.stderr
    result = _parse(done.stdout)
    assert result is not None and result["outcome"] == "error", done.stderr[-2000:]
    assert "KeyError" in result["message"] and str(tmp_path) not in result["traceback"]
