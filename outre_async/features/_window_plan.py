"""The I/O plan of a window of queued batches: which missing rows are read together.

Why a window, and why tumbling: the rows one batch misses are sparse over the file (on igb-like's
partition-ordered copy, barely more than one row per merged read), but consecutive partition batches
miss rows of the same few partitions, so the union of K batches' missing rows is K times denser and
merges into far fewer reads (``benchmarks/replay_window_reads.py --read-ahead`` replays an epoch by K).
Reading the next batch's rows with each batch (a sliding window of one) never forms that union: each
read holds one new batch's misses.  So the
buffer plans *tumbling* windows: a batch that no window planned reads its own missing rows together
with rows of the queued batches after it (:func:`plan_window`), and those batches, planned, read
only what is left; the next unplanned batch starts the next window.

Which rows of the queued batches: only those that share a merged read with another row of the plan
(ids at most ``near`` apart: the source's gap rule, ``_staging.merge_gap_bytes``, in rows).  A row
alone in its read gains nothing from being read early (one I/O now or one later) and would take a
slot from rows needed sooner, so it is left for its own batch: that read fewer rows for the same reads,
and bounding the plan by the slots no queued batch needs as well fewer still
(``benchmarks/simulate_cache_policies.py``, where the consumer takes batches at once; with a training
step, ``outre bench --step-ms``, the extract queue stays full and the rows come closer to MIN).

The budget: a window's rows land in the buffer's slots, held until the read completes, then they
stay on standby pinned by their batches (their next use).  :func:`plan_window` takes whole batches
while the rows it plans fit ``room`` (the extracting piece's share of the slots, at most the slots
on standby), so a plan never holds more than that share and other extractors still find slots; the
first batch that does not fit ends the window (and plans its own).

Which request reads what (:func:`window_groups`): the window is not read as one request.  Its merged
reads (*extents*: rows at most ``near`` ids apart, the same rule the source merges by, so splitting
the plan between requests along extents merges exactly as one request would) are grouped by the
first batch that needs a row of them: the extracting piece's own rows are group 0 (read with the
piece), a queued batch ``k`` of the window group ``k``.  Each group is one request with its own
priority (``_read_priority``), so the batches of a window go one after another as their reads land,
instead of all at the end, and the next window starts while this one's last reads are in flight.
Pure: arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ._window_kernels import nearest_present

EMPTY = np.zeros(0, np.int64)


def merged_rows(own: np.ndarray, queued: np.ndarray, near: int) -> np.ndarray:
    """The rows of ``queued`` (sorted unique, none in ``own``) that share a read with another row of
    ``own ∪ queued`` when rows at most ``near`` ids apart merge (``near`` < 1: none)."""
    if near < 1 or not len(queued):
        return EMPTY
    rows = np.union1d(own, queued)
    close = np.diff(rows) <= near
    lone = np.ones(len(rows), dtype=bool)  # alone in its read: no neighbour within near on either side
    lone[1:] &= ~close
    lone[:-1] &= ~close
    return queued[~lone[np.searchsorted(rows, queued)]]


def plan_window(own: np.ndarray, missing: Iterable[np.ndarray], room: int, near: int) -> tuple[np.ndarray, int]:
    """``(rows, batches)``: of the queued batches' ``missing`` rows (in queue order; none of them in
    ``own``, the extracting piece's own reads), the rows that merge (:func:`merged_rows`) for the
    longest prefix ``missing[:batches]`` whose planned rows fit ``room``; sorted unique.  Nothing
    fits, or ``room <= 0``: no rows, 0 batches.

    One pass (:func:`_planned_from`: the prefix from which each row is planned) instead of a union and
    :func:`merged_rows` per added batch, which on igb-like held the event loop far longer per window
    than the reads in flight last (the disk idled: ``benchmarks/disk_idle_epoch.py``).  The first batch
    alone is checked first, so a buffer too small for any window (fewer slots than one batch's rows)
    does not look up the other batches' rows."""
    if room <= 0:
        return EMPTY, 0
    batches: list[np.ndarray] = []
    for more in missing:
        batches.append(np.asarray(more, dtype=np.int64))
        if len(batches) == 1 and len(merged_rows(own, np.unique(batches[0]), near)) > room:
            return EMPTY, 0
    if not batches:
        return EMPTY, 0
    rows, start = _planned_from(own, batches, near)
    planned = np.cumsum(np.bincount(start, minlength=len(batches) + 2)[1 : len(batches) + 1])
    k = int(np.searchsorted(planned, room, side="right"))  # planned rows only grow with the prefix
    return rows[start <= k], k


def _planned_from(own: np.ndarray, batches: list[np.ndarray], near: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted unique rows of ``batches`` and, per row, the shortest prefix of ``batches`` whose
    :func:`merged_rows` holds it (``len(batches) + 1``: none): the row is in the prefix from its first
    batch on and shares a read from the prefix on where another row of ``own`` (prefix 0) or of the
    batches lies at most ``near`` ids away."""
    last = len(batches) + 1
    asked = np.concatenate(batches)
    which = np.repeat(np.arange(1, len(batches) + 1, dtype=np.int64), [len(b) for b in batches])
    order = np.argsort(asked * last + which, kind="stable")  # by row, then batch: each row's first batch first
    asked, which = asked[order], which[order]
    first = np.ones(len(asked), dtype=bool)
    first[1:] = asked[1:] != asked[:-1]
    rows, since = asked[first], which[first]
    if near < 1 or not len(rows):
        return rows, np.full(len(rows), last, np.int64)
    ids = np.concatenate([np.asarray(own, dtype=np.int64), rows])
    present = np.concatenate([np.zeros(len(own), np.int64), since])
    order = np.argsort(ids, kind="stable")
    ids, present = ids[order], present[order]
    near_from = nearest_present(ids, present, near, last)  # the earliest prefix holding another row within near
    start = np.empty(len(ids), np.int64)
    start[order] = np.maximum(present, near_from)
    return rows, start[len(own) :]


def window_groups(own: np.ndarray, rows: np.ndarray, missing: Sequence[np.ndarray], near: int) -> np.ndarray:
    """The request group of each planned row (``rows``, sorted unique, none in ``own``): 0 if its extent
    (the rows of ``own ∪ rows`` chained by gaps of at most ``near`` ids) holds a row of ``own``, else
    ``k`` for the first queued batch ``missing[k-1]`` that misses a row of its extent."""
    if not len(rows):
        return np.zeros(0, np.int64)
    union = np.union1d(own, rows)
    extent = np.concatenate([[0], np.cumsum(np.diff(union) > max(near, 0))])
    first = np.full(len(union), len(missing) + 1, np.int64)  # the group each union row asks for
    first[np.searchsorted(union, own)] = 0
    if missing:
        asked = np.concatenate(missing).astype(np.int64, copy=False)
        by = np.repeat(np.arange(1, len(missing) + 1, dtype=np.int64), [len(m) for m in missing])
        pos = np.minimum(np.searchsorted(union, asked), len(union) - 1)
        inside = union[pos] == asked
        np.minimum.at(first, pos[inside], by[inside])
    group = np.full(int(extent[-1]) + 1, len(missing) + 1, np.int64)
    np.minimum.at(group, extent, first)
    return group[extent[np.searchsorted(union, rows)]]
