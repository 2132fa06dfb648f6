"""From a source checkout, ``outre_async`` maps exactly two names outside its folder:
``outre_async.partition`` and ``outre_async.cache`` (the checkout's ``partition/`` and ``cache/``);
the checkout's other folders (``tests``, ``benchmarks``, ``docs``) are not parts of the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import importlib.util, json
import outre_async, outre_async.partition, outre_async.cache, outre_async.partition._fennel
print(json.dumps({
    "package": outre_async.__file__,
    "partition": outre_async.partition.__file__,
    "fennel": outre_async.partition._fennel.__file__,
    "cache": outre_async.cache.__file__,
    "path": list(outre_async.__path__),
    "others": {name: importlib.util.find_spec("outre_async." + name) is not None
               for name in ("tests", "benchmarks", "docs", "conftest")},
}))
"""


def test_a_checkout_maps_partition_and_cache_and_nothing_else() -> None:
    # ``python -c`` in the repository root puts the checkout first on sys.path: the source folder is imported
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    got = json.loads(out.stdout)
    assert Path(got["package"]).parent == ROOT / "outre_async"
    assert Path(got["partition"]) == ROOT / "partition" / "__init__.py"
    assert Path(got["fennel"]) == ROOT / "partition" / "_fennel.py"
    assert Path(got["cache"]) == ROOT / "cache" / "__init__.py"
    assert [Path(p) for p in got["path"]] == [ROOT / "outre_async"]
    assert got["others"] == {"tests": False, "benchmarks": False, "docs": False, "conftest": False}
