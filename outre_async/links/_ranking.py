"""Streaming ranking metrics: each positive pair against its own candidates, fed in chunks.

Every query ``i`` has one positive score ``p_i`` and ``c`` negative scores (its candidates).  As
OGB's evaluator, its rank is ``1 + (#neg > p_i + #neg >= p_i) / 2`` (ties count half); ``mrr`` is the
mean of ``1 / rank`` and ``hits@K`` the share of queries ranked ``<= K``.  ``auc`` is the ROC AUC of
all positive scores against all negative scores (scikit-learn's ``roc_auc_score`` on the two sets,
ties half): with the positives sorted once, each chunk of negatives adds the number of positives
above each negative (``searchsorted``), so no score is kept beyond the chunk at hand.

State is O(Q) (two counts and one score per query); a chunk is scored and dropped, so the memory of
an evaluation does not grow with the number of candidates.  Counts are Python ints: exact.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import ConfigError

_HITS = re.compile(r"hits@([1-9][0-9]*)$")


def check_metrics(metrics: object) -> tuple[str, ...]:
    """The metric names asked for: ``mrr``, ``auc`` and ``hits@K`` (K >= 1), at least one."""
    names = (metrics,) if isinstance(metrics, str) else tuple(metrics)  # type: ignore[arg-type]
    bad = [m for m in names if not isinstance(m, str) or (m not in ("mrr", "auc") and not _HITS.match(m))]
    if bad or not names:
        raise ConfigError(f"metrics must name mrr, auc or hits@K (K >= 1), got {bad or list(names)!r}; "
                          "e.g. metrics=('mrr', 'hits@10', 'auc')")
    return names


class Ranking:
    """Metric sums over the queries whose positive scores are given; :meth:`add` their negatives."""

    def __init__(self, positive: np.ndarray) -> None:
        self.positive = np.asarray(positive, dtype=np.float32)
        self._sorted = np.sort(self.positive)
        self.above = np.zeros(len(self.positive), np.int64)     # negatives scoring above the positive
        self.at_least = np.zeros(len(self.positive), np.int64)  # negatives scoring >= the positive
        self._auc2 = 0   # twice the positive-over-negative pair count (ties count one of the two)
        self.negatives = 0

    def add(self, queries: np.ndarray, scores: np.ndarray) -> None:
        """``scores[r, j]``: the ``j``-th scored candidate of query ``queries[r]`` (``[q, k]`` float32)."""
        p = self.positive[queries][:, None]
        self.above[queries] += (scores > p).sum(axis=1)
        self.at_least[queries] += (scores >= p).sum(axis=1)
        flat = scores.ravel()
        right = np.searchsorted(self._sorted, flat, side="right")
        left = np.searchsorted(self._sorted, flat, side="left")
        q = len(self._sorted)
        self._auc2 += 2 * int((q - right).sum()) + int((right - left).sum())
        self.negatives += flat.size

    def result(self, metrics: tuple[str, ...]) -> dict[str, float]:
        rank = 1.0 + 0.5 * (self.above + self.at_least)
        out: dict[str, float] = {}
        for name in metrics:
            if name == "mrr":
                out[name] = float((1.0 / rank).mean())
            elif name == "auc":
                pairs = len(self.positive) * self.negatives
                out[name] = self._auc2 / (2 * pairs) if pairs else float("nan")
            else:
                out[name] = float((rank <= int(name.split("@")[1])).mean())
        return out
