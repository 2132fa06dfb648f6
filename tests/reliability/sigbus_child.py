"""Truncate one of a dataset's files in the middle of an epoch and report what the reader did.

    python sigbus_child.py ROOT CASE:INDICES ...   (INDICES: ram | map | auto)

CASE is ``<reader>-<file>``: reader ``sync`` (SyncLoader), ``outre`` (OutreLoader, pread backend),
``part`` (OutreLoader over partitions ``p4``) or ``verify`` (``Dataset.verify``); file ``indices`` or
``features``.  The file is truncated to 0 bytes after the first batch.  Each case runs on its own copy ``ROOT/CASE-INDICES``
of the dataset and prints one line ``OUTCOME CASE:INDICES completed|named <Error>|other <Error>``
(flushed, so the cases before a crash are reported); a SIGBUS or SIGSEGV kills the process instead,
which the test sees as a negative return code.  Several cases share one process: importing torch
and the kernels once keeps the test fast.
"""

from __future__ import annotations

import os
import sys

import outre_async as oa
from outre_async.loader._options import group_knobs


def _truncate(ds: oa.Dataset, which: str) -> None:
    name = ds.manifest.indices.file if which == "indices" else ds.manifest.features.file  # type: ignore[union-attr]
    os.truncate(ds.path / name, 0)


def _loader(ds: oa.Dataset, reader: str) -> object:
    common = {"split": "train", "fanouts": [5, 5], "batch_size": 16, "seed": 0}
    if reader == "sync":
        return oa.SyncLoader(ds, **common)  # type: ignore[arg-type]
    options = {"partitions": "p4", "parts_per_batch": 1} if reader == "part" else {}
    return oa.OutreLoader(ds, **group_knobs(dict(backend="pread", **common, **options)))  # type: ignore[arg-type]


def run(path: str, case: str, indices: str) -> str:
    reader, which = case.split("-")
    ds = oa.open_dataset(path, indices_in_ram={"ram": True, "map": False, "auto": None}[indices])
    try:
        if reader == "verify":
            ds.verify()
            _truncate(ds, which)
            ds.verify()
            return "completed"
        loader = _loader(ds, reader)
        try:
            for i, _batch in enumerate(loader):  # type: ignore[attr-defined]
                if i == 0:
                    _truncate(ds, which)
        finally:
            close = getattr(loader, "close", None)
            if close is not None:
                close()
    except oa.OutreError as exc:
        return f"named {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - an unnamed error is the finding
        return f"other {type(exc).__name__}: {exc}"
    return "completed"


if __name__ == "__main__":
    for spec in sys.argv[2:]:
        case, mode = spec.split(":")
        print(f"OUTCOME {spec} " + run(f"{sys.argv[1]}/{case}-{mode}", case, mode), flush=True)
