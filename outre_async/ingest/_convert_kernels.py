"""numba kernels of the importer: integer text parsing and the CSC bucket sort; arrays in and out.

No I/O and no Python objects here; streaming, files and error messages live in ``_csc_builder`` and
``_text_parsing``.  Every kernel is ``@njit(cache=True, nogil=True)`` and also runs as plain Python under
``NUMBA_DISABLE_JIT=1`` (the tests call ``.py_func`` on small inputs).

Text grammar of :func:`parse_int_pairs` / :func:`parse_int_column` (SNAP/OGB/CSV edge and id lists):

* leading spaces/tabs are skipped; an empty line, or one whose first non-blank byte is ``#`` or
  ``%``, is a comment and yields no row;
* a row is two (one) integers: optional sign, 1 to 18 digits, separated by blanks and/or one comma;
* after the last integer the line ends (trailing blanks and ``\\r`` allowed) or a separator follows,
  after which anything is ignored (extra columns such as weights or timestamps).

The buffer must end with a newline: it is the sentinel that lets the inner loops run without bounds
checks (a check per byte would cost more than the parsing itself; ``benchmarks/bench_convert.py``).  The
row parsers are written out per column count because numba does not unroll a loop over a runtime
``ncols``, and the loop's own bookkeeping would run per byte too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NL, CR, SPACE, TAB, COMMA, HASH, PERCENT, MINUS, PLUS = 10, 13, 32, 9, 44, 35, 37, 45, 43
MAX_DIGITS = 18  # 10**18 < 2**63: no overflow check needed per digit
SMALL_SEGMENT = 16  # insertion sort below this length (no recursion overhead on short lists; bench_convert.py)
NO_SENTINEL = -2  # parse result when the buffer does not end with a newline


@njit(cache=True, nogil=True, inline="always")
def _is_blank(c: np.uint8) -> bool:
    return c == SPACE or c == TAB or c == CR


@njit(cache=True, nogil=True, inline="always")
def _line_start(buf: np.ndarray, i: int) -> tuple[int, bool]:
    """Skip leading blanks; return (index, whether the line holds data: not blank, no comment)."""
    while _is_blank(buf[i]):
        i += 1
    c = buf[i]
    return i, not (c == NL or c == HASH or c == PERCENT)


@njit(cache=True, nogil=True, inline="always")
def _field(buf: np.ndarray, i: int, first: bool) -> tuple[int, np.int64, bool]:
    """A separator (unless ``first``: blanks and/or one comma, at least one byte), then
    ``[+-]digits``; return (next index, value, ok)."""
    if not first:
        start = i
        while _is_blank(buf[i]):
            i += 1
        if buf[i] == COMMA:
            i += 1
            while _is_blank(buf[i]):
                i += 1
        if i == start:
            return i, np.int64(0), False
    negative = buf[i] == MINUS
    if negative or buf[i] == PLUS:
        i += 1
    start = i
    value = np.int64(0)
    digit = np.int64(buf[i]) - 48
    while 0 <= digit <= 9:
        value = value * 10 + digit
        i += 1
        digit = np.int64(buf[i]) - 48
    return i, -value if negative else value, 0 < i - start <= MAX_DIGITS


@njit(cache=True, nogil=True, inline="always")
def _row_end_ok(c: np.uint8) -> bool:
    """After the last wanted integer: end of line, or a separator before ignored columns."""
    return c == NL or c == COMMA or _is_blank(c)


@njit(cache=True, nogil=True, inline="always")
def _next_line(buf: np.ndarray, i: int) -> int:
    while buf[i] != NL:
        i += 1
    return i + 1


@njit(cache=True, nogil=True)
def parse_int_pairs(buf: np.ndarray, out: np.ndarray) -> tuple[int, int, int]:
    """Parse the lines of ``buf`` (uint8, ending with a newline) into ``out[:rows, 0:2]`` (int64,
    at least ``len(buf) // 4 + 1`` rows).  Return ``(rows, bad_line, lines)``: ``bad_line`` is the
    0-based index of the first line breaking the grammar (-1 if none; ``lines`` counts them)."""
    n = len(buf)
    if n == 0 or buf[n - 1] != NL:
        return 0, NO_SENTINEL, 0
    i, row, line = 0, 0, 0
    while i < n:
        i, data = _line_start(buf, i)
        if data:
            i, a, ok_a = _field(buf, i, True)
            i, b, ok_b = _field(buf, i, False)
            if not (ok_a and ok_b and _row_end_ok(buf[i])):
                return row, line, line
            out[row, 0] = a
            out[row, 1] = b
            row += 1
        i = _next_line(buf, i)
        line += 1
    return row, -1, line


@njit(cache=True, nogil=True)
def parse_int_column(buf: np.ndarray, out: np.ndarray) -> tuple[int, int, int]:
    """:func:`parse_int_pairs` for one integer per line into ``out`` (1-D, ``len(buf)//2 + 1``)."""
    n = len(buf)
    if n == 0 or buf[n - 1] != NL:
        return 0, NO_SENTINEL, 0
    i, row, line = 0, 0, 0
    while i < n:
        i, data = _line_start(buf, i)
        if data:
            i, a, ok = _field(buf, i, True)
            if not (ok and _row_end_ok(buf[i])):
                return row, line, line
            out[row] = a
            row += 1
        i = _next_line(buf, i)
        line += 1
    return row, -1, line


@njit(cache=True, nogil=True)
def count_into(counts: np.ndarray, ids: np.ndarray) -> None:
    """``counts[v] += 1`` for every ``v`` in ``ids`` (in-degrees without an O(N) temporary)."""
    for i in range(len(ids)):
        counts[ids[i]] += 1


@njit(cache=True, nogil=True, inline="always")
def _bucket_of(bounds: np.ndarray, v: np.int64) -> int:
    """Index b with ``bounds[b] <= v < bounds[b + 1]`` (binary search; ``bounds`` is cached)."""
    lo, hi = 0, len(bounds) - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if bounds[mid] <= v:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def scatter_by_bucket(pairs: np.ndarray, bounds: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Stable counting sort of the (src, dst) rows of ``pairs`` into ``out`` by the destination
    range ``[bounds[b], bounds[b+1])`` holding dst; return the bucket offsets [B + 1]."""
    num_buckets = len(bounds) - 1
    offsets = np.zeros(num_buckets + 1, dtype=np.int64)
    for i in range(len(pairs)):
        offsets[_bucket_of(bounds, pairs[i, 1]) + 1] += 1
    for b in range(num_buckets):
        offsets[b + 1] += offsets[b]
    pos = offsets[:-1].copy()
    for i in range(len(pairs)):
        b = _bucket_of(bounds, pairs[i, 1])
        out[pos[b], 0] = pairs[i, 0]
        out[pos[b], 1] = pairs[i, 1]
        pos[b] += 1
    return offsets


@njit(cache=True, nogil=True)
def scatter_sources(pairs: np.ndarray, lo: int, pos: np.ndarray, out: np.ndarray) -> None:
    """Put the source of each (src, dst) row at ``out[pos[dst - lo]++]`` (counting sort by dst)."""
    for i in range(len(pairs)):
        d = pairs[i, 1] - lo
        out[pos[d]] = pairs[i, 0]
        pos[d] += 1


@njit(cache=True, nogil=True)
def insertion_sort(a: np.ndarray, lo: int, hi: int) -> None:
    """Sort ``a[lo:hi]`` in place; linear on nearly sorted runs (callers pre-bucket long ones)."""
    for i in range(lo + 1, hi):
        x = a[i]
        j = i - 1
        while j >= lo and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@njit(cache=True, nogil=True)
def sort_segments(out: np.ndarray, offsets: np.ndarray, dedupe: bool, counts: np.ndarray) -> int:
    """Sort each ``out[offsets[v]:offsets[v+1]]`` ascending, drop repeats if ``dedupe`` (compacting
    in place), write the final per-segment lengths into ``counts``; return the total kept."""
    write = 0
    for v in range(len(offsets) - 1):
        lo, hi = offsets[v], offsets[v + 1]
        if hi - lo <= SMALL_SEGMENT:
            insertion_sort(out, lo, hi)
        else:
            out[lo:hi].sort()
        start = write
        for i in range(lo, hi):
            if dedupe and write > start and out[write - 1] == out[i]:
                continue
            out[write] = out[i]
            write += 1
        counts[v] = write - start
    return write
