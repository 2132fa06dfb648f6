"""Plain-Python, in-memory FENNEL: the reference the streaming numba partitioner is tested against.

Scores every partition of v's group for every node (O(K) per node, no heaps), with the same
parameters (``partition._fennel.LevelParams``), the same tie rule (higher score, then the smaller
partition, then the lower id) and the same fallback for training nodes that find no partition with
training room.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

FENNEL, LDG = 0, 1


def reference_fennel(indptr, indices, is_train, params, *, passes=1, order=None, node_group=None):
    n = len(indptr) - 1
    kk, groups = params.kk, len(params.alpha)
    size, tsize = [0] * (kk * groups), [0] * (kk * groups)
    assign = [-1] * n
    order = range(n) if order is None else [int(v) for v in order]
    for r in range(passes):
        for v in order:
            g = 0 if node_group is None else int(node_group[v])
            cap, tcap = int(params.cap[g]), int(params.tcap[g])
            alpha, alpha_t, gamma = float(params.alpha[g]), float(params.alpha_t[g]), params.gamma
            tr = bool(is_train[v])
            if r > 0:
                old = assign[v]
                assign[v] = -1
                size[old] -= 1
                tsize[old] -= int(tr)
            parts = range(g * kk, (g + 1) * kk)

            def allowed(p, t, cap=cap, tcap=tcap):
                return size[p] < cap and (not t or tsize[p] < tcap)

            t = tr and params.objective == FENNEL and any(allowed(p, True) for p in parts)
            cnt = Counter()
            for u in indices[indptr[v]:indptr[v + 1]]:
                u = int(u)
                if u != v and assign[u] >= 0 and assign[u] // kk == g:
                    cnt[assign[u]] += 1
            best, best_key = -1, None
            for p in parts:
                if not allowed(p, t):
                    continue
                if params.objective == LDG:
                    score = cnt[p] * (1.0 - size[p] / cap) if cnt[p] else 0.0
                else:
                    c = alpha * gamma * float(size[p]) ** (gamma - 1.0)
                    if t:
                        c = c + alpha_t * gamma * float(tsize[p]) ** (gamma - 1.0)
                    score = cnt[p] - c
                key = (score, -size[p], -p)
                if best_key is None or key > best_key:
                    best, best_key = p, key
            assign[v] = best
            size[best] += 1
            tsize[best] += int(tr)
    return np.array(assign, dtype=np.int32)
