"""The shape of a suite's JSON, checked before it is written (and by the tests on what was written).

A small structural schema: required keys and their types, nested.  ``None`` is allowed where a
figure may be unknown (a skipped run has no metrics; a system that cannot tell its disk rows).
"""

from __future__ import annotations

from typing import Any

from ..errors import OutreError

NUM = (int, float)
OPT_NUM = (int, float, type(None))

_METRICS = {
    "epoch_seconds": NUM, "train_seconds": NUM, "stall_seconds": NUM, "sample_seconds": NUM,
    "extract_seconds": NUM, "batches": int, "planned_batches": int, "seeds": int, "rows_requested": int,
    "rows_unique": int, "rows_from_cache": (int, type(None)), "rows_from_disk": (int, type(None)),
    "read_bytes_proc": int, "read_bytes_diskstats": (int, type(None)), "peak_rss_bytes": int,
    "redundancy": NUM, "loss": NUM, "train_accuracy": NUM, "val_accuracy": NUM, "setup_seconds": NUM,
}
_RUN = {"system": str, "repeat": int, "outcome": str, "cap": str, "cap_bytes": (int, type(None)), "wall_seconds": NUM}
_OUTCOMES = {"ok", "skipped", "error", "oom", "killed", "timeout"}
_TOP = {
    "schema_version": int, "suite": str, "command": str, "started": str, "finished": str, "mode": str,
    "preset": dict, "dataset": dict, "cap": dict, "repeats": int, "seed": int, "machine": dict,
    "disk_probe": dict, "runs": list, "summary": dict,
}
_PROBE = {"tool": str, "iops": NUM, "bytes_per_s": NUM, "block_bytes": int}
_SUMMARY_SYSTEM = {"runs": int, "ok_runs": int, "outcome": str, "speedup_vs_baseline": OPT_NUM, "efficiency": OPT_NUM}
# a partition system against compute-only-part (None where either did not finish)
_SAME_BATCHES = {key: OPT_NUM for key in ("train_vs_compute_only", "train_seconds", "batches", "rows_requested",
                                          "compute_only_train_seconds", "compute_only_batches",
                                          "compute_only_rows_requested")}


class SchemaError(OutreError):
    """A suite result that does not have the documented shape."""


def validate_result(result: dict[str, Any]) -> None:
    """Raise :class:`SchemaError` listing every problem, or return None."""
    problems: list[str] = []
    _keys(result, _TOP, "", problems)
    _keys(result.get("disk_probe", {}), _PROBE, "disk_probe.", problems)
    for i, run in enumerate(result.get("runs", [])):
        where = f"runs[{i}]."
        _keys(run, _RUN, where, problems)
        if run.get("outcome") not in _OUTCOMES:
            problems.append(f"{where}outcome {run.get('outcome')!r} not in {sorted(_OUTCOMES)}")
        if run.get("outcome") == "ok":
            _keys(run.get("metrics", {}), _METRICS, where + "metrics.", problems)
        elif not isinstance(run.get("message"), str):
            problems.append(f"{where}message must say why the run is {run.get('outcome')!r}")
    summary = result.get("summary", {})
    for name, s in summary.get("systems", {}).items():
        _keys(s, _SUMMARY_SYSTEM, f"summary.systems[{name}].", problems)
    for name, s in summary.get("same_batches", {}).items():
        _keys(s, _SAME_BATCHES, f"summary.same_batches[{name}].", problems)
    if problems:
        raise SchemaError("bench result does not match the schema: " + "; ".join(problems[:20]))


def _keys(obj: Any, spec: dict[str, Any], where: str, problems: list[str]) -> None:
    if not isinstance(obj, dict):
        problems.append(f"{where or 'result'} must be an object, got {type(obj).__name__}")
        return
    for key, types in spec.items():
        if key not in obj:
            problems.append(f"{where}{key} is missing")
        elif isinstance(obj[key], bool) or not isinstance(obj[key], types):
            problems.append(f"{where}{key} has type {type(obj[key]).__name__}")
