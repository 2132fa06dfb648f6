"""The suite never touches the user's caches: its home and cache folder are temp folders (conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REAL_HOME, TEST_HOME

from outre_async.bench._cli import DEFAULT_DATA_DIR
from outre_async.profiling._probe_cli import default_cache_dir


def test_the_probe_cache_and_bench_data_resolve_inside_the_tests_home() -> None:
    home = Path(TEST_HOME)
    assert Path(REAL_HOME).resolve() != home.resolve()
    assert default_cache_dir().is_relative_to(home)  # what `outre probe`/`profile`/`bench` would write to
    assert DEFAULT_DATA_DIR.expanduser().is_relative_to(home)


def test_child_processes_inherit_the_tests_home() -> None:
    out = subprocess.run([sys.executable, "-c", "from outre_async.profiling._probe_cli import default_cache_dir;"
                          " print(default_cache_dir())"], capture_output=True, text=True, check=True,
                         env=os.environ.copy()).stdout.strip()
    assert Path(out).is_relative_to(TEST_HOME)
