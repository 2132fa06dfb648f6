"""Timings that a plan can trust: warm-up runs not timed, outliers dropped, the spread reported.

A profile's prediction multiplies a few µs per row by millions of rows, so one bad timing moves it by
orders of magnitude: the first call of a numba kernel compiles it (seconds), the first read of a cold
file pays for the page cache, a neighbour's job steals the core for one run.  Each cost is therefore
timed repeatedly for a small time budget (at least ``min_n``, at most ``max_n`` runs), the timings
outside Tukey's fences (1.5 IQR beyond the quartiles) are dropped and the median of the rest is the
figure; the spread (IQR / median) goes into the profile's meta so that an unstable measurement is
visible there.  Why the median and not the mean of the kept timings: on a shared machine a burst
of load slows a run of consecutive timings several times over, often inside the fences of a handful
of runs; the mean moves with each burst (two profiles minutes apart then predict different epochs),
the median only when most of the runs fall in one (``tests/plan/test_costs.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BUDGET_S = 0.5  # seconds spent timing one cost (after its warm-up)
MIN_RUNS = 3
MAX_RUNS = 50


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    value: float    # median of the timings kept
    spread: float   # (Q3 - Q1) / median of all the timings: 0 for a steady measurement
    runs: int       # timings taken
    dropped: int    # of which outside the fences


def robust(times: Sequence[float]) -> Timing:
    """The median of ``times`` inside Tukey's fences, with their spread (see the module)."""
    a = np.asarray(times, np.float64)
    if len(a) == 0:
        return Timing(value=0.0, spread=0.0, runs=0, dropped=0)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    iqr = q3 - q1
    kept = a[(a >= q1 - 1.5 * iqr) & (a <= q3 + 1.5 * iqr)]
    return Timing(value=float(np.median(kept)), spread=float(iqr / med) if med > 0 else 0.0, runs=len(a),
                  dropped=len(a) - len(kept))


def more(runs: int, started: float, *, budget_s: float, min_n: int, max_n: int) -> bool:
    """Whether to take another timing: until ``min_n``, then while the budget lasts, up to ``max_n``."""
    if runs < min_n:
        return True
    return runs < max_n and time.perf_counter() - started < budget_s


def timed(step: Callable[[], float], *, budget_s: float = BUDGET_S, min_n: int = MIN_RUNS, max_n: int = MAX_RUNS,
          warmup: int = 1) -> Timing:
    """Run ``step`` (it returns its own timing) ``warmup`` times untimed, then as :func:`more` says."""
    for _ in range(warmup):
        step()
    times: list[float] = []
    started = time.perf_counter()
    while more(len(times), started, budget_s=budget_s, min_n=min_n, max_n=max_n):
        times.append(step())
    return robust(times)
