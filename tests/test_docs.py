"""The documentation runs: every ```python block of docs/**/*.md and README.md is executed, and the
site builds with warnings as errors.

A page's blocks run in order in one namespace (a page reads like a notebook: a later block may use
what an earlier one made), with the working directory a temp folder holding ``data/tiny``, the
dataset the pages tell the reader to make with ``outre generate --preset tiny data/tiny`` (generated
here once per session with the same call, ``oa.generate(path, "tiny")``, and copied per page).
HOME and XDG_CACHE_HOME are temp folders already (conftest.py).

A block that must not run here says why on its first line, ``# docs: skip (REASON)`` (torchrun, a
GPU, a large download), or runs only under ``-m slow`` with ``# docs: slow (REASON)``; the quick run
of a page leaves its slow blocks out, so a quick block never depends on a slow one.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
_MARKER = re.compile(r"^# docs: (skip|slow) \((\S.*)\)$")
_ANY_MARKER = re.compile(r"^\s*#\s*docs\s*:", flags=re.M)


@dataclass(frozen=True)
class Block:
    page: str   # path relative to the repository root
    index: int  # the block's place on its page, from 0
    code: str
    mode: str   # "run", "slow" or "skip"
    reason: str


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def page_blocks(page: Path) -> list[Block]:
    """The page's python blocks, each with the mode its first line gives (``run`` when none)."""
    out = []
    for i, code in enumerate(_BLOCK.findall(page.read_text())):
        first = code.split("\n", 1)[0]
        marker = _MARKER.match(first)
        mode, reason = (marker.group(1), marker.group(2)) if marker else ("run", "")
        name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)
        out.append(Block(name, i, code, mode, reason))
    return out


ALL_BLOCKS = [b for page in _pages() for b in page_blocks(page)]
RUN_PAGES = sorted({b.page for b in ALL_BLOCKS if b.mode == "run"})
SLOW_PAGES = sorted({b.page for b in ALL_BLOCKS if b.mode == "slow"})


def test_every_block_is_run_or_says_why_not() -> None:
    """Markers are well formed (a misspelt one would silently run or be left out), each skip or slow
    block gives a reason, and most blocks run in the quick suite."""
    bad = [f"{b.page} block {b.index}: {line!r}" for b in ALL_BLOCKS for i, line in enumerate(b.code.splitlines())
           if _ANY_MARKER.match(line) and not (i == 0 and _MARKER.match(line))]
    assert not bad, "a '# docs:' marker must be the block's first line, '# docs: skip (REASON)' or " \
                    f"'# docs: slow (REASON)': {bad}"
    counts = {mode: sum(b.mode == mode for b in ALL_BLOCKS) for mode in ("run", "slow", "skip")}
    assert all(b.reason.strip() for b in ALL_BLOCKS if b.mode != "run")
    assert counts["run"] >= 20, counts
    assert counts["skip"] <= counts["run"] // 3, f"too many blocks left out: {counts}"


def test_marker_parsing(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("```python\n# docs: skip (needs a GPU)\nx = 1\n```\n\n```python\ny = 2\n```\n"
                    "```python\n# docs: slow (a minute)\nz = 3\n```\n")
    blocks = page_blocks(page)
    assert [(b.mode, b.reason) for b in blocks] == [("skip", "needs a GPU"), ("run", ""), ("slow", "a minute")]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import outre_async as oa

    return Path(oa.generate(tmp_path_factory.mktemp("docs-data") / "tiny", "tiny"))


def _run_page(page: str, modes: set[str], tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(tiny, tmp_path / "data" / "tiny")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    blocks = [b for b in ALL_BLOCKS if b.page == page and b.mode in modes]
    assert blocks
    for block in blocks:
        try:
            exec(compile(block.code, f"{page}[block {block.index}]", "exec"), namespace)
        except BaseException as exc:
            raise AssertionError(f"{page}, python block {block.index} (from 0) failed: {exc!r}") from exc
    for value in namespace.values():  # a page that leaves a loader open is closed here, not at exit
        close = getattr(value, "close", None)
        if type(value).__name__ in {"OutreLoader", "FeatureStore"} and callable(close):
            close()
    namespace.clear()
    gc.collect()


@pytest.mark.timeout(280)
@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_code_runs(page: str, tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_page(page, {"run"}, tiny_dataset, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", SLOW_PAGES)
def test_page_code_runs_with_slow_blocks(page: str, tiny_dataset: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _run_page(page, {"run", "slow"}, tiny_dataset, tmp_path, monkeypatch)


def test_readme_links_resolve() -> None:
    """Every relative link of the README names a file of the repository (the README sends readers to
    the docs pages for everything it no longer says)."""
    text = (ROOT / "README.md").read_text()
    links = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t]
    assert links, "the README links to the docs"
    missing = [t for t in links if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.timeout(280)
def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (as CI runs it): broken links, pages left out of the nav and
    docstrings the API reference cannot read fail the build."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]" builds the site')
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=260)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "loader" / "index.html").is_file()
