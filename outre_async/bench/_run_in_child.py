"""Run one system in a child process under the memory cap, and turn whatever happens into a record.

Before the child starts, the dataset's files are evicted from the page cache; the child joins a
fresh cgroup between fork and exec (so its first allocation is already capped); afterwards the
cgroup's peak and OOM-kill count are read and the cgroup is removed, whatever the outcome.  An OOM
kill, a timeout, a crash or a plug-in exception becomes ``outcome`` + ``message``, never an exception
of the harness.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._units import format_bytes
from ._cgroup import MemoryCap, open_cap
from ._measure import evict_from_page_cache
from ._systems import RunSpec
from .child import RESULT_MARKER


def run_in_child(system: str, spec: RunSpec, *, cap_bytes: int | None, timeout_s: float,
                 dataset_dir: Path) -> dict[str, Any]:
    evicted = evict_from_page_cache(dataset_dir)
    cap = open_cap(cap_bytes)
    request = json.dumps({"system": system, "spec": asdict(spec)})
    record: dict[str, Any] = {"system": system, "cap": cap.describe(), "cap_bytes": cap.limit_bytes,
                              "evicted_bytes": evicted}
    start = time.perf_counter()
    try:
        record.update(_run(request, cap, timeout_s))
    finally:
        record["wall_seconds"] = time.perf_counter() - start
        if isinstance(cap, MemoryCap):
            record["cgroup_peak_bytes"] = cap.peak_bytes()
            kills = cap.oom_kills()
            cap.remove()
            if kills and record["outcome"] not in ("ok", "skipped"):
                record.update(outcome="oom", message=f"OOM at {format_bytes(cap.limit_bytes)} "
                                                     f"(cgroup oom_kill={kills})")
    return record


def child_command(request: str) -> list[str]:
    """The child's command line.  ``-P`` (safe path) keeps the working directory off ``sys.path``: run
    from a source checkout, its ``outre_async/`` folder would otherwise shadow the installed package,
    which alone has ``partition/`` and ``cache/`` mapped in as ``outre_async.partition`` / ``.cache``."""
    return [sys.executable, "-P", "-m", "outre_async.bench.child", request]


def _run(request: str, cap: Any, timeout_s: float) -> dict[str, Any]:
    cmd = child_command(request)
    attach = cap.attach if isinstance(cap, MemoryCap) else None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, preexec_fn=attach)
    except subprocess.TimeoutExpired as exc:
        return {"outcome": "timeout", "message": f"timeout after {timeout_s:.0f} s",
                "stderr_tail": _tail(exc.stderr)}
    result = _parse(done.stdout)
    if result is not None:
        out = {k: v for k, v in result.items() if k != "traceback"}
        if result["outcome"] == "error":
            out["stderr_tail"] = _tail(result.get("traceback", "")) or _tail(done.stderr)
        return out
    if done.returncode == -9 and isinstance(cap, MemoryCap):
        return {"outcome": "killed", "message": f"SIGKILL under the {format_bytes(cap.limit_bytes)} cap",
                "stderr_tail": _tail(done.stderr)}
    return {"outcome": "error", "message": f"child exited with {done.returncode} without a result",
            "stderr_tail": _tail(done.stderr)}


def _parse(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    return None


def _tail(text: str | bytes | None, limit: int = 1500) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text[-limit:]
