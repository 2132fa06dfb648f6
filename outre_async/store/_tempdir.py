"""The temporary folders our writers make, named so that a dead writer's leftovers can be told apart.

A writer builds its output in a hidden folder beside the target and renames it into place at the
end (``_install``).  ``kill -9``, a power cut or an OOM kill leave that folder behind; its name says
whose it was:

    .{stem}.outre-{kind}-{host}-{pid}-{token}

``stem``   what was being written (the dataset folder's or partition's name; cut to 120 characters)
``kind``   ``tmp`` (an output being written), ``sort`` (spill files of the edge sort) or ``old``
           (the previous copy during a two-rename replace, see ``_install``)
``host``   6 hex digits hashing the host name: a folder on a shared filesystem is judged only on
           the machine that wrote it
``pid``    the writer's process id
``token``  8 random hex digits, so two writers in one process never share a name

While it lives, the writer also holds an exclusive ``flock`` on its folder (an fd kept open; the
kernel drops the lock when the process dies, however it dies).  :func:`writer_is_dead` says a
folder's writer is gone only when all of these hold: the host tag is ours, no process has that pid,
and the lock is free (or the filesystem has no locks).  A reused pid keeps litter alive a little
longer; it never gets a live writer's folder removed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import socket
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["tmp", "sort", "old"]
STEM_CHARS = 120
_NAME = re.compile(
    r"\.(?P<stem>.+)\.outre-(?P<kind>tmp|sort|old)-(?P<host>[0-9a-f]{6})-(?P<pid>[1-9][0-9]{0,9})-[0-9a-f]{8}",
    re.DOTALL,
)


def host_tag() -> str:
    return hashlib.blake2s(socket.gethostname().encode(), digest_size=3).hexdigest()


def temp_name(stem: str, kind: Kind) -> str:
    """A fresh name of our pattern for this process (``old`` names keep the whole stem: it is the
    name to restore)."""
    stem = stem if kind == "old" else stem[:STEM_CHARS]
    return f".{stem}.outre-{kind}-{host_tag()}-{os.getpid()}-{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class TempName:
    stem: str
    kind: Kind
    host: str
    pid: int


def parse_temp_name(name: str) -> TempName | None:
    """The parts of one of our temp folder names, or None for any other name."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    kind: Kind = m["kind"]  # type: ignore[assignment]  # the pattern allows only the three kinds
    return TempName(stem=m["stem"], kind=kind, host=m["host"], pid=int(m["pid"]))


def writer_is_dead(path: Path, name: TempName) -> bool:
    """True only when the writer of ``path`` is certainly gone (see the module docstring)."""
    if name.host != host_tag() or name.pid == os.getpid():
        return False
    try:
        os.kill(name.pid, 0)
    except ProcessLookupError:
        return not _lock_held(path)
    except PermissionError:  # a live process of another user
        return False
    return False


def _lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return True  # cannot look: assume alive
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # no flock on this filesystem: the pid alone decides
    finally:
        os.close(fd)
    return False


# Every temp folder this process made and has not yet installed or removed.  A signal turned into an
# exception can land where no ``with`` block sees it (inside ``__init__``, between ``__init__`` and
# ``__enter__``); the CLI then calls :func:`remove_own_temp_dirs` on its way out.
_OWN: set[Path] = set()


def remove_own_temp_dirs() -> list[Path]:
    """Delete every temp folder this process still holds (for a process that is exiting)."""
    removed = sorted(_OWN)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
        _OWN.discard(path)
    return removed


class TempDir:
    """One locked temporary folder of ours under ``parent``: ``path``, then :meth:`release` (after the
    folder was renamed into place) or :meth:`remove` (to discard it)."""

    def __init__(self, parent: Path, stem: str, kind: Kind) -> None:
        self.path = parent / temp_name(stem, kind)
        _OWN.add(self.path)  # before it exists: no moment where it exists unrecorded
        fd = -1
        try:
            self.path.mkdir()
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            self._finalizer = weakref.finalize(self, os.close, fd)
        except FileExistsError:  # the name is taken (never ours: the token is new): leave it alone
            _OWN.discard(self.path)
            raise
        except BaseException:
            # A signal turned into an exception (Ctrl-C, the CLI's SIGTERM) can land after mkdir
            # succeeded in the kernel, even inside pathlib's mkdir: the folder may exist, empty and
            # ours, though the call raised.  Remove it, and the fd if one was opened.
            if hasattr(self, "_finalizer"):
                self._finalizer()
            elif fd >= 0:
                os.close(fd)
            shutil.rmtree(self.path, ignore_errors=True)
            _OWN.discard(self.path)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:  # NFS without locks: the pid in the name still protects it
            if exc.errno not in (errno.ENOLCK, errno.EBADF, errno.EINVAL, errno.EOPNOTSUPP):
                self.remove()
                raise

    def release(self) -> None:
        """Drop the lock: the folder now lives under another name (or its old content is gone)."""
        _OWN.discard(self.path)
        self._finalizer()

    def remove(self) -> None:
        """Delete the folder and drop the lock; safe to call twice."""
        shutil.rmtree(self.path, ignore_errors=True)
        _OWN.discard(self.path)
        self._finalizer()
