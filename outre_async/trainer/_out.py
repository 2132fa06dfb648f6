"""A training run's ``--out`` folder: never inside a dataset, and one run at a time.

``outre train DS --out DS`` used to write ``last.pt``/``best.pt``/``metrics.json`` among the dataset's
files (after which an ``--overwrite`` of the dataset is refused: it holds files outre did not write
there); :func:`check_outside_datasets` refuses an ``--out`` that is, or lies inside, any outre dataset
folder (the one trained on or another), symlinks resolved, before anything is created.

Two runs into one ``--out`` at once used to both exit 0 with the files of two runs mixed.
:func:`hold_output` takes an exclusive ``flock`` on the folder itself (an fd of the directory kept
open for the run, as ``store._tempdir`` locks its temp folders): the kernel drops it when the process
ends, however it ends, and nothing is left in the folder (a lock *file* would be, or would need an
unlink-and-recheck dance).  The second run gets :class:`OutputLockedError` at once, before it writes.
Where the file system has no ``flock`` (some NFS), the run goes on unlocked, as the temp folders do.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError, DatasetError, FormatVersionError, OutputLockedError
from ..store._manifest import read_manifest

_NO_LOCKS = (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP)


def check_outside_datasets(out: Path) -> None:
    """Raise :class:`ConfigError` if ``out`` (resolved) is an outre dataset folder or lies inside one."""
    resolved = out.resolve()
    for folder in (resolved, *resolved.parents):
        if _is_dataset(folder):
            where = "is the dataset" if folder == resolved else "is inside the dataset"
            raise ConfigError(f"--out {out} {where} {folder}: the run's checkpoints would mix with the dataset's files; "
                              "choose an --out outside it (the default is DATASET-train-MODEL beside it)")


def _is_dataset(folder: Path) -> bool:
    """Whether ``folder`` holds an outre manifest (of any format version); another project's
    ``manifest.json`` (a web app's) is not one."""
    try:
        read_manifest(folder)
    except FormatVersionError:
        return True
    except (DatasetError, OSError):
        return False
    return True


@contextmanager
def hold_output(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder ``out`` (which exists) for the block, or raise
    :class:`OutputLockedError` at once if another process holds it."""
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise OutputLockedError(f"another run holds {out} (an outre train writing its checkpoints there); wait "
                                    "for it to finish or choose another --out") from exc
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
        yield
    finally:
        os.close(fd)  # drops the lock
