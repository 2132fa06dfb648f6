"""Run damaged-input jobs each in its own forked child, so a segfault or a bus error is one job's
outcome and not a dead run.  ``python -P runner.py JOBS.json RESULTS.json``.

The parent imports the product once (torch, numba) and forks one child per job: the child installs an
audit hook that records every ``open`` of a path that resolves under the job's ``outside`` folder,
sends stdout/stderr to files, runs the job and leaves with its exit code; ``SIGALRM`` after
``timeout`` seconds ends a hung child.  Jobs:

* ``{"verb": "cli", "argv": [...]}``: ``outre_async.cli.main(argv)``, the real ``outre`` command;
  an exception escaping it prints its traceback and exits 1, as the installed script would;
* ``{"verb": "call", "call": "module:function", "args": [...], "io": path}``: one reader (e.g. of
  ``trust_calls``); an :class:`OutreError` prints one line and exits 2; the bytes read go to ``io``;
* ``{"verb": "loader", "dataset": ..., "partitions": name or null}``: one epoch of a pread-backed
  ``OutreLoader`` taking every neighbour on two hops (so the epoch reads nearly every list); an
  :class:`OutreError` prints one line and exits 2 (the library's contract: a named error), anything
  else prints its traceback and exits 1.

Each result: ``rc`` (negative: killed by that signal), ``stderr``, ``outside`` (paths opened outside)
and ``changed`` (entries of the job's ``root`` that differ after the run).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from damage import VERBS, Damage, materialize, tree_digest  # noqa: E402


def main(jobs_file: str, results_file: str) -> None:
    import outre_async.partition  # noqa: F401
    import torch  # noqa: F401  (imported once, before the forks: torch and PyG take seconds)
    import torch_geometric  # noqa: F401

    import outre_async as oa  # noqa: F401
    import outre_async.cli  # noqa: F401
    import outre_async.loader  # noqa: F401

    jobs = json.loads(Path(jobs_file).read_text())
    results = {job["id"]: {**_run(job), "verb": job["id"].rsplit("@", 1)[1]} for job in jobs}
    Path(results_file).write_text(json.dumps(results))


def _run(job: dict[str, Any]) -> dict[str, Any]:
    log = Path(job["logs"]) / str(abs(hash(job["id"])))
    before = tree_digest(Path(job["root"])) if job.get("root") else {}
    import time

    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(_child(job, log))
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    after = tree_digest(Path(job["root"])) if job.get("root") else {}
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    outside = _read(log.with_suffix(".outside")).splitlines()
    return {"rc": rc, "stderr": _read(log.with_suffix(".err")), "outside": sorted(set(outside)), "changed": changed,
            "seconds": time.perf_counter() - start}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _child(job: dict[str, Any], log: Path) -> int:
    outside = os.path.realpath(job["outside"]) + os.sep if job.get("outside") else None
    record = open(log.with_suffix(".outside"), "w")  # noqa: SIM115 - lives as long as the child

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and outside and isinstance(args[0], str | os.PathLike):
            real = os.path.realpath(os.fspath(args[0]))
            if (real + os.sep).startswith(outside):
                record.write(real + "\n")
                record.flush()

    sys.addaudithook(hook)
    err = os.open(log.with_suffix(".err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    out = os.open(os.devnull, os.O_WRONLY)
    os.dup2(out, 1)
    os.dup2(err, 2)
    signal.alarm(int(job.get("timeout", 60)))
    try:
        code = _job(job)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _job(job: dict[str, Any]) -> int:
    if job["verb"] == "call":
        return _call(job)
    if job["verb"] == "cli":
        from outre_async.cli import main as cli_main

        return cli_main(job["argv"])
    import outre_async as oa

    try:
        loader = oa.OutreLoader(job["dataset"], split="train", fanouts=[-1, -1], batch_size=128, 
                                partitions=job.get("partitions"), io=oa.IOOptions(backend="pread"), pipeline=oa.PipelineOptions(num_samplers=1, num_extractors=1))
        for _ in loader:
            pass
    except oa.OutreError as exc:
        print(f"loader: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _call(job: dict[str, Any]) -> int:
    """``module:function(*args)`` (e.g. a ``trust_calls`` reader); the bytes this process read meanwhile
    (``rchar`` of ``/proc/self/io``) go to ``job["io"]``."""
    import importlib

    import outre_async as oa

    module, name = job["call"].split(":")
    fn = getattr(importlib.import_module(module), name)
    before = _rchar()
    try:
        fn(*job["args"])
    except oa.OutreError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if job.get("io"):
            Path(job["io"]).write_text(str(_rchar() - before))
    return 0


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


# -- planning and judging jobs (used by the tests and benchmarks/reliability_sweep.py) -------------


def jobs_for(damage: Damage, base: Path, work: Path, logs: Path) -> list[dict[str, Any]]:
    """Materialize ``damage`` under ``work`` and the jobs that must each refuse it."""
    path, name = materialize(base, damage, work)
    ds = str(work / "ds")
    argv = {
        "info": ["info", ds, "--verify"],
        "partition": ["partition", ds, "--parts", "4", "--name", "fresh"],
        "stats": ["stats", "redundancy", ds, "--partitions", str(name), "--max-batches", "2", "--fanouts", "4,4",
                  "--batch-size", "64"],
        "convert": ["convert", str(path), str(work / "ds" / "out")],
    }
    jobs = []
    for verb in VERBS[damage.target]:
        job: dict[str, Any] = {"id": f"{damage.id}@{verb}", "root": str(work / "ds"), "outside": str(work / "outside"),
                               "logs": str(logs)}
        if verb.startswith("loader"):
            job.update(verb="loader", dataset=ds, partitions=name if verb == "loader-part" else None)
        else:
            job.update(verb="cli", argv=argv[verb])
        jobs.append(job)
    return jobs


def run_jobs(jobs: list[dict[str, Any]], scratch: Path, timeout: float) -> dict[str, dict[str, Any]]:
    """Run ``jobs`` in one ``python -P runner.py`` process (one fork per job)."""
    import subprocess

    (scratch / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, "-P", __file__, str(scratch / "jobs.json"), str(scratch / "results.json")],
                   check=True, timeout=timeout, capture_output=True)
    results: dict[str, dict[str, Any]] = json.loads((scratch / "results.json").read_text())
    return results


OUTCOMES = ("crash", "hang", "followed-outside", "traceback", "accepted", "other", "named-error", "unread")


def classify(damage: Damage, result: dict[str, Any], named_rc: tuple[int, ...] = (2,)) -> str:
    """One of ``OUTCOMES``; only ``named-error`` is right for a damaged input, and ``unread`` (exit 0 by
    an operation that never reads the damaged bytes, see ``Damage.unread_by``).  ``named_rc``: the exit
    codes of a named error (``(1, 2)`` for checkouts from before the CLI exited 2)."""
    rc, err = result["rc"], result["stderr"]
    if rc == -signal.SIGALRM:
        return "hang"
    if rc < 0:
        return "crash"
    if result["outside"] or (damage.escape and rc == 0):
        return "followed-outside"
    if "Traceback" in err:
        return "traceback"
    if rc == 0:
        return "unread" if result.get("verb") in damage.unread_by else "accepted"
    lines = err.strip().splitlines()
    return "named-error" if rc in named_rc and len(lines) == 1 and ": error: " in lines[0] else "other"


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
