"""The readers ``small_files.py``'s hostile files go through, as plain functions of paths and names
(``runner.py``'s ``call`` verb runs one per forked child); imports only names older checkouts have
too, so ``benchmarks/trust_sweep.py`` can measure one of those (PYTHONPATH) for the "before" column."""

from __future__ import annotations

from pathlib import Path


def open_dataset(path: str) -> None:
    import outre_async as oa

    oa.open_dataset(path)


def open_partitions(path: str, name: str) -> None:
    from outre_async.partition import open_partitions as open_parts

    import outre_async as oa

    open_parts(oa.open_dataset(path), name).close()


def read_profile(path: str, name: str) -> None:
    import outre_async as oa
    from outre_async.plan._files import read_profile as read

    read(oa.open_dataset(path), name)


def load_checkpoint(path: str) -> None:
    from outre_async.trainer._files import load_checkpoint as load

    load(Path(path))
