"""Every small file of a project read defensively (issue 27, item 1): a FIFO, a device, a folder, a
64 GiB sparse file or pathological JSON in place of a manifest, partition meta or array, profile meta
or array, or checkpoint ends in one named error, reads at most the cap of its kind, and never hangs.

Each hostile file (``small_files.py``) is read in a forked child of one ``runner.py`` process with a
20 s alarm: a reader that blocks on a FIFO is killed by it and the case fails as ``hang`` instead of
hanging the run.  Property tests then write random bytes, random JSON and valid documents with one
entry replaced by random JSON to each small file and read it in-process (under a per-test timeout):
success or a named error, never another exception.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runner import classify, run_jobs
from small_files import FILES, Hostile, all_hostile, call_for, make_project, materialize

import outre_async as oa
from outre_async.store._safe_read import JSON_MAX_BYTES

CASES = all_hostile()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("trust"))


@pytest.fixture(scope="module")
def swept(project: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("hostile")
    jobs = []
    for i, h in enumerate(CASES):
        copy = materialize(project, h, root / f"case{i}")
        call, args = call_for(h, copy)
        jobs.append({"id": f"{h.id}@call", "verb": "call", "call": call, "args": args, "timeout": 20,
                     "io": str(root / f"case{i}.io"), "logs": str(root)})
    results = run_jobs(jobs, root, timeout=600)
    for i, h in enumerate(CASES):
        results[f"{h.id}@call"]["read"] = int((root / f"case{i}.io").read_text() or -1)
    return {h.id: results[f"{h.id}@call"] for h in CASES}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("hostile", CASES, ids=lambda h: h.id)
def test_a_hostile_small_file_is_one_named_error_read_within_its_cap(swept: dict[str, dict[str, Any]],
                                                                     hostile: Hostile) -> None:
    result = swept[hostile.id]
    assert classify(SimpleNamespace(escape=False, unread_by=()), result) == "named-error", result  # type: ignore[arg-type]
    line = result["stderr"].strip()
    assert FILES[hostile.file][0].rsplit("/", 1)[1] in line or "project/ds" in line, line  # it names the file
    # nothing streamed from a device or a sparse file: the reader refused it before reading
    limit = 2 << 20 if hostile.how in ("dev-zero", "sparse-64G", "fifo", "dir") else JSON_MAX_BYTES + (1 << 20)
    assert 0 <= result["read"] <= limit, result["read"]


def test_the_sweep_covers_every_class_and_file() -> None:
    assert {h.cls for h in CASES} == {"non-regular", "size-before-read", "json"}
    assert {h.file for h in CASES if h.how == "fifo"} == set(FILES)


# -- property tests: random content in each small file, read in-process ---------------------------

def _read(project: Path, kind: str) -> None:
    import trust_calls

    fn = FILES[kind][1]
    args = {"open_dataset": [project / "ds"], "open_partitions": [project / "ds", "p4"],
            "read_profile": [project / "ds", "default"], "load_checkpoint": [project / "run" / "last.pt"]}[fn]
    getattr(trust_calls, fn)(*(str(a) for a in args))


def _named_or_fine(project: Path, kind: str, content: bytes) -> None:
    path = project / FILES[kind][0]
    good = path.read_bytes()
    try:
        path.write_bytes(content)
        try:
            _read(project, kind)
        except oa.OutreError as exc:
            assert "\n" not in str(exc), str(exc)  # one line
    finally:
        path.write_bytes(good)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('"\\[]{}'), max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
SMALL = ["manifest", "part.meta", "profile.meta", "checkpoint"]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", SMALL)
@PROPERTY
@given(data=st.binary(max_size=2048))
def test_random_bytes_in_a_small_file_are_read_or_named(project: Path, kind: str, data: bytes) -> None:
    _named_or_fine(project, kind, data)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["manifest", "part.meta", "profile.meta"])
@PROPERTY
@given(doc=json_values)
def test_random_json_in_a_small_file_is_read_or_named(project: Path, kind: str, doc: Any) -> None:
    _named_or_fine(project, kind, json.dumps(doc).encode())


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a JSON document (into objects and lists)."""
    out = [prefix]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out += _paths(v, (*prefix, k))
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["manifest", "part.meta", "profile.meta"])
@PROPERTY
@given(data=st.data(), value=json_values)
def test_a_valid_document_with_one_entry_replaced_is_read_or_named(project: Path, kind: str, data: st.DataObject,
                                                                   value: Any) -> None:
    doc = json.loads((project / FILES[kind][0]).read_text())
    where = data.draw(st.sampled_from(_paths(doc)[1:]))
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    _named_or_fine(project, kind, json.dumps(doc).encode())


@pytest.mark.timeout(300)
@PROPERTY
@given(key=st.sampled_from(["model", "optimizer", "epoch", "config", "metrics", "best", "torch_rng", "dataset"]),
       value=json_values)
def test_a_checkpoint_with_one_entry_replaced_is_read_or_named(project: Path, key: str, value: Any) -> None:
    import io

    state = torch.load(project / "run" / "last.pt", weights_only=True)
    state[key] = value
    buf = io.BytesIO()
    torch.save(state, buf)
    _named_or_fine(project, "checkpoint", buf.getvalue())


@pytest.mark.timeout(60)
def test_json_depth_matches_a_plain_scanner() -> None:
    from outre_async.store._safe_read import json_depth

    def reference(raw: bytes) -> int:
        """The rule in plain Python: a quote is a string's edge unless an odd run of backslashes
        precedes it; brackets count outside strings."""
        depth = deepest = run = 0
        inside = False
        for c in raw.decode("latin-1"):
            if c == '"' and run % 2 == 0:
                inside = not inside
            elif not inside and c in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif not inside and c in "]}":
                depth -= 1
            run = run + 1 if c == "\\" else 0
        return deepest

    def nesting(value: Any) -> int:
        if isinstance(value, dict | list):
            items = value.values() if isinstance(value, dict) else value
            return 1 + max((nesting(v) for v in items), default=0)
        return 0

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(['[', ']', '{', '}', '"', '\\', 'a', ',', ':']), max_size=200),
           st.integers(min_value=1, max_value=16))
    def check(chars: list[str], chunk: int) -> None:
        raw = "".join(chars).encode()
        assert json_depth(raw, chunk=chunk) == reference(raw)

    @settings(max_examples=300, deadline=None)
    @given(json_values, st.integers(min_value=1, max_value=16))
    def valid(value: Any, chunk: int) -> None:
        raw = json.dumps(value).encode()
        assert json_depth(raw, chunk=chunk) == nesting(value)

    check()
    valid()
    assert json_depth(json.dumps({"a": [[1, "[[["], {"b": "\\\"[["}]}).encode()) == 3


@pytest.mark.timeout(60)
def test_a_64GiB_sparse_profile_array_is_refused_before_a_byte_is_read(project: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "p"
    shutil.copytree(project, copy, symlinks=True)
    os.truncate(copy / FILES["profile.static_rows"][0], 64 << 30)
    with pytest.raises(oa.errors.ProfileCorruptError, match=r"static_rows\.bin has 68719476736 bytes, expected"):
        _read(copy, "profile.static_rows")
