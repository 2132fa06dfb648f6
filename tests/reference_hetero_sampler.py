"""Plain-Python reference of the per-edge-type sampler kernel (``sampling._hetero_kernels``): the oracle.

Step by step what the kernel's docstring says: hop ``h`` expands the nodes first discovered in hop
``h - 1``, each target's list is walked run by run (one run per edge type, ascending), and each run
takes ``fanouts[r][h]`` positions with the homogeneous reference's ``choose_positions`` (0: none, no
random numbers drawn).  A dict relabels global ids; the result is the kernel's flat form.
"""

from __future__ import annotations

from reference_sampler import _Rng, choose_positions


def reference_hetero_sample(indptr, indices, type_per_edge, seeds, fanouts, *, seed: int, stream: int = 0) -> dict:
    """``fanouts[r][h]`` per edge type ``r`` and hop ``h``; ``seeds`` are global ids."""
    rng = _Rng(seed, stream)
    n_id = [int(s) for s in seeds]
    local = {v: i for i, v in enumerate(n_id)}
    rows, cols, kinds, e_id = [], [], [], []
    nodes_per_hop, edges_per_hop = [len(n_id)], []
    lo, hops = 0, len(fanouts[0])
    for h in range(hops):
        hi, before = len(n_id), len(rows)
        for t in range(lo, hi):
            start, stop = int(indptr[n_id[t]]), int(indptr[n_id[t] + 1])
            runs: dict[int, list[int]] = {}
            for p in range(start, stop):
                runs.setdefault(int(type_per_edge[p]), []).append(p)
            for r in sorted(runs):
                k = fanouts[r][h]
                if k == 0:
                    continue
                positions = runs[r]
                for off in choose_positions(rng, len(positions), k):
                    p = positions[off]
                    u = int(indices[p])
                    if u not in local:
                        local[u] = len(n_id)
                        n_id.append(u)
                    rows.append(local[u])
                    cols.append(t)
                    kinds.append(r)
                    e_id.append(p)
        nodes_per_hop.append(len(n_id) - hi)
        edges_per_hop.append(len(rows) - before)
        lo = hi
    return {"n_id": n_id, "rows": rows, "cols": cols, "kinds": kinds, "e_id": e_id,
            "nodes_per_hop": nodes_per_hop, "edges_per_hop": edges_per_hop}
