"""OUTRE's split of the cache budget (§4.4, §5.3), kept beside the joint knapsack as its baseline.

OUTRE ranks feature rows by how often they are gathered and histories by the rows their subtree
would have read plus ``beta`` times its sampling work ("feature-read equivalents", uncalibrated,
every history assumed fresh, rows under pruned subtrees still counted), then tries
``alpha`` in 0.01 … 0.99, giving ``alpha`` of the budget to embeddings and the rest to features:

    score(alpha) = prefix(sort(feat))[(B (1 - alpha) - table_f) / row]
                 + prefix(sort(hist))[(B alpha - table_h) / slot]

and keeps the best.  The neighbour cache is sized separately (here: none out of this budget).
:func:`alpha_choice` gives the choice of one fixed ``alpha`` (the α sweep of the benchmark).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ._knapsack import Choice, KnapsackInput, compute_saved_us, saved_us

ALPHAS = np.round(np.arange(1, 100) / 100, 2)


def outre_split(inp: KnapsackInput, budget: int, *, beta: float) -> tuple[Choice, float]:
    """OUTRE's grid: the best ``alpha`` by its own proxy score, and the choice it implies."""
    feat, hist = _ranked(inp, beta)
    pf, ph = _prefix(feat[1]), _prefix(hist[1])
    best, best_alpha = -1.0, float(ALPHAS[0])
    for alpha in ALPHAS.tolist():
        nf, nh = _counts(inp, budget, alpha, len(feat[0]), len(hist[0]))
        score = pf[nf] + ph[nh]
        if score > best:
            best, best_alpha = score, alpha
    return alpha_choice(inp, budget, best_alpha, beta=beta), best_alpha


def alpha_choice(inp: KnapsackInput, budget: int, alpha: float, *, beta: float) -> Choice:
    """The rows and slots a fixed ``alpha`` buys (most frequent rows, best-scored histories)."""
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha={alpha!r} must lie in [0, 1] (the budget's share for embeddings)")
    feat, hist = _ranked(inp, beta)
    nf, nh = _counts(inp, budget, alpha, len(feat[0]), len(hist[0]))
    s = np.zeros(len(inp.row_hot), bool)
    s[feat[0][:nf]] = True
    h = np.zeros(len(inp.hist_nodes), bool)
    h[hist[0][:nh]] = True
    lst = np.zeros(len(inp.row_hot), bool)
    nbytes = {"features": nf * inp.row_bytes + (inp.tables.get("features", 0) if nf else 0),
              "history": nh * inp.slot_bytes + (inp.tables.get("history", 0) if nh else 0), "neighbors": 0}
    return Choice(features=np.flatnonzero(s), history=inp.hist_nodes[np.flatnonzero(h)],
                  neighbors=np.flatnonzero(lst), bytes=nbytes, saved_us=saved_us(inp, s, h, lst),
                  compute_saved_us=compute_saved_us(inp, h))


def _ranked(inp: KnapsackInput, beta: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(order, sorted scores) of rows by reads and of candidates by OUTRE's saved-I/O proxy."""
    a = inp.attribution
    hist = np.bincount(a.cand, weights=a.rows + beta * a.lists, minlength=len(inp.hist_nodes))
    fo = np.lexsort((np.arange(len(inp.row_hot)), -inp.row_hot))
    ho = np.lexsort((np.arange(len(hist)), -hist))
    fo, ho = fo[inp.row_hot[fo] > 0], ho[hist[ho] > 0]
    return (fo, inp.row_hot[fo]), (ho, hist[ho])


def _prefix(values: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(values)])


def _counts(inp: KnapsackInput, budget: int, alpha: float, most_f: int, most_h: int) -> tuple[int, int]:
    room_f = int(budget * (1 - alpha)) - inp.tables.get("features", 0)
    room_h = int(budget * alpha) - inp.tables.get("history", 0)
    nf = min(most_f, max(0, room_f // inp.row_bytes))
    nh = min(most_h, max(0, room_h // inp.slot_bytes), most_h if inp.max_slots is None else inp.max_slots)
    return nf, nh
