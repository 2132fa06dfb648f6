"""The one way to open a file of a project (manifest, partition, profile and reorder artefacts,
checkpoints): a regular file of a bounded size, checked before a byte of it is read.

Every opener here opens with ``O_RDONLY | O_NONBLOCK | O_CLOEXEC`` (a FIFO put in place of a meta
then opens at once instead of blocking until a writer comes, and is refused by the next step), then
``fstat``-s the descriptor and refuses anything that is not a regular file (FIFO, device such as a
link to ``/dev/zero``, directory, socket) and any size above the cap of its kind (or other than the
exact size a manifest or meta implies), all before reading.  Reads then stop at the cap even if the
file grows meanwhile.  JSON is parsed with a bounded nesting depth (a scan of the brackets outside
strings, before ``json.loads`` could recurse) and bounded number literals (``parse_int`` /
``parse_float`` hooks, before Python's 4300-digit limit raises its ``ValueError``).

Each refusal is the caller's named error (its own tree: :class:`ManifestError`,
:class:`PartitionCorruptError`, :class:`ProfileCorruptError`, :class:`CheckpointError`) with one line
naming the file, why, and what to do (``fix``).  Two cases keep their own type because callers
mean different things by them: a missing file is the ``FileNotFoundError`` of ``os.open`` (a missing
manifest means "no dataset", a missing partition file "re-partition"), and a process out of file
descriptors (EMFILE/ENFILE) is :class:`TooManyOpenFilesError` whatever the file.  Paths are confined
by the caller first (``_paths.confined``); symlinks inside the folder are allowed there, so no
``O_NOFOLLOW`` here.
"""

from __future__ import annotations

import errno as errnos
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OutreError, TooManyOpenFilesError

JSON_MAX_BYTES = 16 << 20  # a manifest or meta is a few KiB
JSON_MAX_DEPTH = 32  # the deepest document outre writes nests 4 levels
JSON_MAX_NUMBER_CHARS = 40  # an int64 has 20 characters, a float's repr at most 24

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"))


def fd_exhausted(exc: OSError, what: str | Path) -> TooManyOpenFilesError | None:
    """The named error for an ``OSError`` that is EMFILE/ENFILE (opening ``what``), else None."""
    if exc.errno not in (errnos.EMFILE, errnos.ENFILE):
        return None
    try:
        import resource

        limit = f"the soft limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}"
    except (ImportError, OSError, ValueError):
        limit = "the limit is unknown"
    scope = "this process" if exc.errno == errnos.EMFILE else "the system"
    return TooManyOpenFilesError(
        f"{what}: {scope} has no file descriptors left ({errnos.errorcode[exc.errno]}, {limit}); "
        "close loaders and datasets you no longer use, or raise the limit (`ulimit -n`)")


def open_regular(path: str | Path, *, error: type[OutreError], fix: str, max_bytes: int | None = None,
                 exact_bytes: int | None = None, dir_fd: int | None = None) -> int:
    """A descriptor of ``path`` (relative to ``dir_fd`` when given: then ``path``'s name is opened
    there) after checking it is a regular file of at most ``max_bytes`` / exactly ``exact_bytes``.

    Raises ``FileNotFoundError`` when it is missing, :class:`TooManyOpenFilesError` on EMFILE/ENFILE,
    ``error`` for anything else (one line: the file, why, then ``fix``)."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path.name if dir_fd is not None else path, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise fd_exhausted(exc, path) or error(f"{path}: cannot open ({exc.strerror}); {fix}") from exc
    try:
        check_regular(fd, path, error=error, fix=fix, max_bytes=max_bytes, exact_bytes=exact_bytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(fd: int, path: str | Path, *, error: type[OutreError], fix: str, max_bytes: int | None = None,
                  exact_bytes: int | None = None) -> int:
    """``fstat(fd)``: refuse a non-regular file or a size beyond the bounds; returns the size."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise error(f"{path} is {kind}, not a regular file; {fix}")
    if exact_bytes is not None and st.st_size != exact_bytes:
        raise error(f"{path} has {st.st_size} bytes, expected {exact_bytes} (truncated or replaced); {fix}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise error(f"{path} has {st.st_size} bytes, more than the {max_bytes} a file of its kind may have; {fix}")
    return int(st.st_size)


def read_capped(path: str | Path, *, error: type[OutreError], fix: str, max_bytes: int,
                dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (never more read, even if it grows)."""
    fd = open_regular(path, error=error, fix=fix, max_bytes=max_bytes, dir_fd=dir_fd)
    try:
        chunks, got = [], 0
        while got <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - got))):
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise fd_exhausted(exc, path) or error(f"{path}: read failed at byte {got} ({exc.strerror}); {fix}") from exc
    finally:
        os.close(fd)
    if got > max_bytes:
        raise error(f"{path} grew past {max_bytes} bytes while being read; {fix}")
    return b"".join(chunks)


def read_json(path: str | Path, *, error: type[OutreError], fix: str, max_bytes: int = JSON_MAX_BYTES,
              dir_fd: int | None = None) -> Any:
    """A JSON document read with :func:`read_capped` and parsed with :func:`parse_json`."""
    return parse_json(read_capped(path, error=error, fix=fix, max_bytes=max_bytes, dir_fd=dir_fd),
                      path, error=error, fix=fix)


def parse_json(raw: bytes, path: str | Path, *, error: type[OutreError], fix: str,
               max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``raw`` as JSON, refusing (``error``) invalid UTF-8 or JSON, nesting deeper than ``max_depth``
    and number literals longer than :data:`JSON_MAX_NUMBER_CHARS` characters."""
    depth = json_depth(raw)
    if depth > max_depth:
        raise error(f"{path} nests {depth} levels deep, more than the {max_depth} a file of its kind may; {fix}")
    try:
        return json.loads(raw.decode("utf-8"), parse_int=_parse_int, parse_float=_parse_float)
    except _NumberTooLong as exc:
        raise error(f"{path} holds a number of {exc.args[0]} characters, more than {JSON_MAX_NUMBER_CHARS}; {fix}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text (byte {exc.start}); {fix}") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise error(f"{path} is not valid JSON ({str(exc).splitlines()[0][:200]}); {fix}") from exc


def json_depth(raw: bytes, chunk: int = 1 << 20) -> int:
    """The deepest nesting of ``[``/``{`` in ``raw`` outside string literals, in linear time and
    bounded memory (numpy over chunks; a quote is a string's edge unless an odd run of backslashes
    precedes it).  Exact for JSON; for other text exact up to its first error, which is as far as
    ``json.loads`` gets before it fails, so the parser never nests deeper than this says."""
    if b"[" not in raw and b"{" not in raw:
        return 0
    deepest = depth = run = 0  # run: the backslashes ending the previous chunk
    inside = 0  # 1 while in a string at the chunk's start
    for start in range(0, len(raw), chunk):
        a = np.frombuffer(raw, np.uint8, count=min(chunk, len(raw) - start), offset=start)
        idx = np.arange(len(a), dtype=np.int64)
        last_other = np.maximum.accumulate(np.where(a == 92, -1, idx))  # last non-backslash at or before i
        ends = idx - last_other + np.where(last_other < 0, run, 0)  # backslashes ending at i
        before = np.empty_like(ends)
        before[0], before[1:] = run, ends[:-1]
        quote = (a == 34) & (before % 2 == 0)
        quotes = np.cumsum(quote, dtype=np.int64) + inside
        outside = (quotes % 2 == 0) & ~quote
        step = (outside & ((a == 91) | (a == 123))).astype(np.int64) - (outside & ((a == 93) | (a == 125)))
        level = depth + np.cumsum(step)
        deepest, depth = max(deepest, int(level.max())), int(level[-1])
        inside, run = int(quotes[-1] % 2), int(ends[-1])
    return deepest


class _NumberTooLong(ValueError):
    pass


def _parse_int(text: str) -> int:
    if len(text) > JSON_MAX_NUMBER_CHARS:
        raise _NumberTooLong(len(text))
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > JSON_MAX_NUMBER_CHARS:
        raise _NumberTooLong(len(text))
    return float(text)
