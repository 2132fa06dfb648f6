"""One knapsack in time over everything the cache budget can buy (design §8; DUCATI's idea).

Three kinds of item compete for the same bytes:

* ``features``: a node's feature row held in the static feature cache (never evicted);
* ``history``: a history slot for a candidate node (its h^(L-1) row, so its hop-1 subtree is pruned);
* ``neighbors``: a node's in-neighbour list in the global neighbour cache.

Each item's *value* is the time (µs per epoch) it saves: hotness (reads per epoch, from profiling)
times the measured cost of a miss; a history slot's is ``fresh`` (the chance its row is young enough
when met) times the rows and lists its subtree would have read, priced the same way, plus the rows it
spares the model.  The kinds interact: a row under a pruned subtree is no longer read, so it is worth
less as a static row, and a history saves nothing on rows the static cache already holds.  Both are
captured by ``attribution`` (for each candidate ``v`` and node ``u``: how often per epoch ``u``'s row
and list are read *only* because of ``v``'s subtree), and :func:`saved_us` prices a choice exactly:

    saved = c_row  Σ_{u∈S} hot[u]  +  c_list Σ_{w∈L} lists[w]
          + Σ_{v∈H} fresh[v] (c_row Σ_{u∉S} r(v,u) + c_list Σ_{w∉L} l(v,w) + own[v])

:func:`solve` re-counts the marginal values given the other kinds' current choice and takes items in
one density sort (value / bytes, greedily skipping those that no longer fit), for ``rounds`` rounds,
keeping the best choice :func:`saved_us` finds.  Each kind has a fixed ``table`` (its node → slot map)
paid once if any of its items is taken: every subset of kinds is tried.  Without interaction the
greedy is within one item's value of the integral optimum, and exact when a kind's items weigh the
same (the tests check both against brute force).  ``max_slots`` bounds the history's count apart
from the bytes (rows on a GPU: a slot costs the host budget its bookkeeping only, the device budget
its row): the greedy skips slots past it, and the brute force checks that too.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from . import _knapsack_kernels as K

KINDS = ("features", "history", "neighbors")


@dataclass(frozen=True, kw_only=True, slots=True)
class Attribution:
    """Per epoch, how often node ``node[i]``'s row (``rows[i]``) and list (``lists[i]``) are read only
    because candidate ``cand[i]`` (a position in the history items) is expanded."""

    cand: np.ndarray   # int64 [k]
    node: np.ndarray   # int64 [k]
    rows: np.ndarray   # float64 [k]
    lists: np.ndarray  # float64 [k]

    @classmethod
    def empty(cls) -> Attribution:
        return cls(cand=np.empty(0, np.int64), node=np.empty(0, np.int64), rows=np.empty(0), lists=np.empty(0))


@dataclass(frozen=True, kw_only=True, slots=True)
class KnapsackInput:
    """Everything :func:`solve` weighs, per epoch and in µs; ``N`` nodes, ``C`` history candidates."""

    row_hot: np.ndarray       # float64 [N]: feature-row reads per epoch without caches
    list_hot: np.ndarray      # float64 [N]: neighbour-list reads per epoch that miss the other tiers
    list_bytes: np.ndarray    # int64 [N]: bytes a node's list takes in the neighbour cache
    hist_nodes: np.ndarray    # int64 [C]: the candidates' node ids
    hist_fresh: np.ndarray    # float64 [C]: chance a candidate's row is fresh when it is met
    hist_own: np.ndarray      # float64 [C]: µs per epoch of compute its history spares (rows recomputed)
    attribution: Attribution
    row_us: float             # measured µs per feature row read from the source
    list_us: float            # measured µs per neighbour list read from disk
    row_bytes: int            # bytes of one static cache row
    slot_bytes: int           # bytes of one history slot (of the budget: host bytes, ``cache.slot_prices``)
    tables: dict[str, int]    # fixed bytes per kind, paid once when any of its items is taken
    max_slots: int | None = None  # the most history slots, whatever the budget (rows on a GPU: its budget)

    def __post_init__(self) -> None:
        n, c = len(self.row_hot), len(self.hist_nodes)
        if len(self.list_hot) != n or len(self.list_bytes) != n:
            raise ConfigError(f"row_hot, list_hot and list_bytes must hold one entry per node ({n})")
        if len(self.hist_fresh) != c or len(self.hist_own) != c:
            raise ConfigError(f"hist_fresh and hist_own must hold one entry per candidate ({c})")
        a = self.attribution
        if len(a.cand) and (a.cand.min() < 0 or a.cand.max() >= c or a.node.min() < 0 or a.node.max() >= n):
            raise ConfigError("attribution names a candidate or node out of range; re-profile")
        if self.row_bytes < 1 or self.slot_bytes < 1:
            raise ConfigError(f"row_bytes={self.row_bytes} and slot_bytes={self.slot_bytes} must be >= 1")
        if self.max_slots is not None and self.max_slots < 0:
            raise ConfigError(f"max_slots={self.max_slots} must be >= 0 (or None: no bound)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """What to hold: node ids per kind, their bytes (tables included) and the µs per epoch saved."""

    features: np.ndarray
    history: np.ndarray    # node ids (not candidate positions)
    neighbors: np.ndarray
    bytes: dict[str, int]
    saved_us: float
    compute_saved_us: float = 0.0  # the part of ``saved_us`` that is compute (histories' own rows)

    def split(self) -> dict[str, int]:
        """Bytes per kind: the realised split of the cache budget."""
        return dict(self.bytes)


def saved_us(inp: KnapsackInput, s: np.ndarray, h: np.ndarray, lst: np.ndarray) -> float:
    """µs per epoch saved by holding rows ``s`` (bool [N]), history slots ``h`` (bool [C]) and lists
    ``lst`` (bool [N]) — the objective, exact for the model of the module docstring."""
    a = inp.attribution
    total = inp.row_us * float(inp.row_hot[s].sum()) + inp.list_us * float(inp.list_hot[lst].sum())
    on = h[a.cand]
    f = inp.hist_fresh[a.cand[on]]
    total += inp.row_us * float((f * a.rows[on] * ~s[a.node[on]]).sum())
    total += inp.list_us * float((f * a.lists[on] * ~lst[a.node[on]]).sum())
    return total + compute_saved_us(inp, h)


def solve(inp: KnapsackInput, budget: int, *, rounds: int = 3) -> Choice:
    """The best choice within ``budget`` bytes (tables included) over every subset of kinds."""
    if budget < 0:
        raise ConfigError(f"cache budget {budget} must be >= 0")
    n, c = len(inp.row_hot), len(inp.hist_nodes)
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]] = (
        0.0, np.zeros(n, bool), np.zeros(c, bool), np.zeros(n, bool), ())
    for k in range(1, len(KINDS) + 1):
        for kinds in itertools.combinations(KINDS, k):
            room = budget - sum(inp.tables.get(kind, 0) for kind in kinds)
            if room < 0:
                continue
            value, s, h, lst = _rounds(inp, room, kinds, rounds)
            if value > best[0]:
                best = (value, s, h, lst, kinds)
    value, s, h, lst, kinds = best
    return _choice(inp, s, h, lst, kinds, value)


def _rounds(inp: KnapsackInput, room: int, kinds: tuple[str, ...],
            rounds: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    n, c = len(inp.row_hot), len(inp.hist_nodes)
    s, h, lst = np.zeros(n, bool), np.zeros(c, bool), np.zeros(n, bool)
    best = (-1.0, s, h, lst)
    for _ in range(max(1, rounds)):
        values, weights, kind_of, index = _items(inp, s, h, lst, kinds)
        s, h, lst = np.zeros(n, bool), np.zeros(c, bool), np.zeros(n, bool)
        taken = _greedy(values, weights, room, kind_of, inp.max_slots)
        for kind, chosen in enumerate((s, h, lst)):
            chosen[index[taken[kind_of[taken] == kind]]] = True
        value = saved_us(inp, s, h, lst)
        if value > best[0]:
            best = (value, s, h, lst)
    return best


def _items(inp: KnapsackInput, s: np.ndarray, h: np.ndarray, lst: np.ndarray,
           kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every item's marginal value given the current choice of the *other* kinds, its bytes, its kind
    (0 features, 1 history, 2 neighbours) and its index within its kind."""
    a = inp.attribution
    f = inp.hist_fresh[a.cand]
    parts = []
    if "features" in kinds:
        pruned = np.bincount(a.node, weights=f * a.rows * h[a.cand], minlength=len(inp.row_hot))
        parts.append((inp.row_us * np.maximum(inp.row_hot - pruned, 0.0),
                      np.full(len(inp.row_hot), inp.row_bytes, np.int64), 0))
    if "history" in kinds:
        per = f * (inp.row_us * a.rows * ~s[a.node] + inp.list_us * a.lists * ~lst[a.node])
        value = np.bincount(a.cand, weights=per, minlength=len(inp.hist_nodes)) + inp.hist_fresh * inp.hist_own
        parts.append((value, np.full(len(inp.hist_nodes), inp.slot_bytes, np.int64), 1))
    if "neighbors" in kinds:
        pruned = np.bincount(a.node, weights=f * a.lists * h[a.cand], minlength=len(inp.list_hot))
        parts.append((inp.list_us * np.maximum(inp.list_hot - pruned, 0.0), inp.list_bytes.astype(np.int64), 2))
    values = np.concatenate([p[0] for p in parts])
    weights = np.concatenate([p[1] for p in parts])
    kind_of = np.concatenate([np.full(len(p[0]), p[2], np.int8) for p in parts])
    index = np.concatenate([np.arange(len(p[0])) for p in parts])
    return values, weights, kind_of, index


def _greedy(values: np.ndarray, weights: np.ndarray, room: int, kind_of: np.ndarray | None = None,
            max_slots: int | None = None) -> np.ndarray:
    """Positions taken by one density sort: best value per byte first, skipping what no longer fits
    and history slots (kind 1) past ``max_slots``."""
    keep = values > 0
    pos = np.flatnonzero(keep)
    if not len(pos):
        return pos
    density = values[pos] / np.maximum(weights[pos], 1)
    order = pos[np.lexsort((pos, -density))]
    taken = np.zeros(len(order), np.uint8)
    kinds = np.zeros(len(values), np.int8) if kind_of is None else kind_of
    caps = np.array([-1, -1 if max_slots is None else int(max_slots), -1], np.int64)
    K.take_in_order(order, weights.astype(np.int64), int(room), taken, kinds, caps)
    return order[taken.astype(bool)]


def _choice(inp: KnapsackInput, s: np.ndarray, h: np.ndarray, lst: np.ndarray, kinds: tuple[str, ...],
            value: float) -> Choice:
    nbytes = {
        "features": int(s.sum()) * inp.row_bytes + (inp.tables.get("features", 0) if s.any() else 0),
        "history": int(h.sum()) * inp.slot_bytes + (inp.tables.get("history", 0) if h.any() else 0),
        "neighbors": int(inp.list_bytes[lst].sum()) + (inp.tables.get("neighbors", 0) if lst.any() else 0),
    }
    return Choice(features=np.flatnonzero(s), history=inp.hist_nodes[np.flatnonzero(h)],
                  neighbors=np.flatnonzero(lst), bytes=nbytes, saved_us=float(value),
                  compute_saved_us=compute_saved_us(inp, h))


def compute_saved_us(inp: KnapsackInput, h: np.ndarray) -> float:
    """µs of compute per epoch the history slots ``h`` (bool [C]) spare."""
    return float((inp.hist_fresh[h] * inp.hist_own[h]).sum())
