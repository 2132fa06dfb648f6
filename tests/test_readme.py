"""The README's two set-up commands exist, and CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_readme_has_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    run_cmd = next(b for b in blocks if "outre quickstart" in b)
    test_cmd = next(b for b in blocks if "pytest" in b)
    for cmd in (run_cmd, test_cmd):
        assert "pip install torch==2.13.0" in cmd, cmd
    ci = (ROOT / ".ci" / "run").read_text()
    test_step = test_cmd.split("&&")[-1].strip()
    assert test_step in ci.splitlines(), f"CI must run the README test command {test_step!r}"
    # the quick suite leaves the slow tests out; CI runs them after it, as the README says
    slow_step = "python -m pytest -q -m slow"
    assert slow_step in ci.splitlines(), f"CI must run the slow tests too: {slow_step!r}"
    assert ci.splitlines().index(slow_step) > ci.splitlines().index(test_step)
    assert f"`{slow_step}`" in (ROOT / "README.md").read_text(), "the README must say how to run the slow tests"
    assert "not slow" in (ROOT / "pyproject.toml").read_text(), "the default pytest run must deselect the slow tests"
    assert "pip install --quiet torch==2.13.0" in ci


def test_partition_and_cache_install_under_outre_async() -> None:
    import outre_async.cache
    import outre_async.partition

    assert Path(outre_async.partition.__file__).parent.name == "partition"
    assert Path(outre_async.cache.__file__).parent.name == "cache"


@pytest.mark.slow  # torchrun ranks, ~45 s
@pytest.mark.timeout(295)
def test_docs_torchrun_example_runs_on_two_ranks(tmp_path: Path) -> None:
    """The data-parallel script of docs/tutorials/distributed.md (moved there from the README),
    extracted as written, run by torchrun (through the launcher) with 2 gloo ranks on a tiny
    generated dataset, under a timeout."""
    import outre_async as oa
    from outre_async.distributed import launch

    page = ROOT / "docs" / "tutorials" / "distributed.md"
    blocks = re.findall(r"```python\n(?:# docs: skip \(.*?\)\n)?(# train_ddp\.py.*?)\n```", page.read_text(), flags=re.S)
    assert len(blocks) == 1
    script = tmp_path / "train_ddp.py"
    script.write_text(blocks[0] + "\n")
    ds = oa.generate(tmp_path / "g", "tiny", seed=3, feature_dim=8)
    try:
        launch(str(script), [str(ds)], nproc=2, timeout=270)  # generous: 2 imports of torch on a loaded 2-core box
    except oa.errors.DistributedError as exc:
        pytest.fail(f"the docs' torchrun example failed: {exc}")
