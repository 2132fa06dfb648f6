"""What a miss costs on this machine, measured, not assumed (issue 12; DUCATI's measured slopes).

* ``row_us``: µs per feature row read through the real :class:`FeatureSource` at the loader's depth:
  ``num_extractors`` concurrent reads of one batch of distinct random rows each, as the extractors
  issue them (io_uring / pread read with ``O_DIRECT``, so the page cache does not flatter it);
* ``list_us``: µs per in-neighbour list read from the dataset's ``indices`` (memory-mapped or in RAM,
  as the sampler's disk tier reads it) for random nodes;
* ``recompute_us``: µs per batch row of one training step (forward, loss, backward) of the library's
  GraphSAGE at the loader's depth and width (``len(fanouts)`` layers, ``dim -> hidden``) on a
  synthetic batch laid out as the sampler lays one out (``fanouts`` in-edges per node of each hop):
  what a pruned subtree's rows would have cost the trainer, and what the epoch's compute costs.
  Why the whole model: one ``dim -> hidden`` linear layer, measured before, was 3.2 µs per row on
  igb-like against 15.7 µs per row the training step really took, so the plan undervalued the
  history (whose items save compute) five times and predicted a third of the epoch.

Each figure is the median of ``repeats`` timings.  The measurement runs its own event loop in a
short-lived thread, so it works under a running loop (Jupyter) too; the source it opens is closed.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..features import FeatureSource, open_source
from ..store._csc_kernels import gather_lists
from ..store._dataset import Dataset


@dataclass(frozen=True, kw_only=True, slots=True)
class MissCosts:
    row_us: float
    list_us: float
    recompute_us: float
    backend: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def measure_costs(ds: Dataset, *, backend: str, batch_rows: int, num_extractors: int, hidden: int,
                  seed: int = 0, repeats: int = 3, source_options: dict[str, Any] | None = None,
                  source: FeatureSource | None = None, fanouts: tuple[int, ...] | list[int] = (10, 10)) -> MissCosts:
    """Measure the three costs (see the module); ``source`` reuses a caller's source (not closed)."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(int(batch_rows), ds.num_nodes))
    row_us, used = _in_thread(lambda: _row_cost(ds, backend, rows, num_extractors, rng, repeats,
                                                source_options or {}, source))
    return MissCosts(row_us=row_us, list_us=_list_cost(ds, rng, repeats),
                     recompute_us=_recompute_cost(ds.feature_dim, hidden, repeats, list(fanouts)), backend=used)


def _in_thread(fn: Any) -> Any:
    result: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(fn()))
        except BaseException as exc:  # handed to the caller below
            error.append(exc)

    thread = threading.Thread(target=run, name="outre-profile-costs")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


async def _row_cost(ds: Dataset, backend: str, rows: int, readers: int, rng: np.random.Generator, repeats: int,
                    opts: dict[str, Any], given: FeatureSource | None) -> tuple[float, str]:
    source = given if given is not None else open_source(ds, backend, **opts)  # type: ignore[arg-type]
    try:
        outs = [np.empty((rows, ds.feature_dim), np.float32) for _ in range(readers)]
        times = []
        for _ in range(max(1, repeats)):
            ids = [np.sort(rng.choice(ds.num_nodes, rows, replace=False)) for _ in range(readers)]
            start = time.perf_counter()
            await asyncio.gather(*(source.read_rows(i, o) for i, o in zip(ids, outs, strict=True)))
            times.append((time.perf_counter() - start) * 1e6 / (rows * readers))
        return statistics.median(times), source.backend
    finally:
        if given is None:
            await source.aclose()


def _list_cost(ds: Dataset, rng: np.random.Generator, repeats: int) -> float:
    count = max(1, min(4096, ds.num_nodes))
    times = []
    for _ in range(max(1, repeats)):
        nodes = rng.choice(ds.num_nodes, count, replace=False).astype(np.int64)
        total = int((ds.indptr[nodes + 1] - ds.indptr[nodes]).sum())
        out_ptr, out = np.empty(count + 1, np.int64), np.empty(total, ds.indices.dtype)
        ds.check_mapped()
        start = time.perf_counter()
        gather_lists(ds.indptr, ds.indices, nodes, out_ptr, out)
        times.append((time.perf_counter() - start) * 1e6 / count)
    return statistics.median(times)


def _recompute_cost(dim: int, hidden: int, repeats: int, fanouts: list[int]) -> float:
    import torch

    from ..nn import GraphSAGE

    x, edge_index = _synthetic_batch(dim, [f if f > 0 else 10 for f in fanouts] or [10], rows=4096)
    model = GraphSAGE(dim, hidden, max(len(fanouts), 2), 16)
    target = torch.zeros(len(x), dtype=torch.long)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x, edge_index), target).backward()

    step()  # warm-up: the first call pays for allocation and dispatch set-up
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e6 / len(x))
    return statistics.median(times)


def _synthetic_batch(dim: int, fanouts: list[int], rows: int) -> tuple[Any, Any]:
    """About ``rows`` rows laid out hop by hop (seeds, then each hop's ``fanout`` children per node,
    no repeats) and their edges child -> parent."""
    import torch

    per_seed = 1
    width = 1
    for f in fanouts:
        width *= f
        per_seed += width
    seeds = max(1, rows // per_seed)
    sizes, edges, start = [seeds], [], 0
    for f in fanouts:
        parents = torch.arange(start, start + sizes[-1])
        first = start + sizes[-1]
        children = torch.arange(first, first + sizes[-1] * f)
        edges.append(torch.stack([children, parents.repeat_interleave(f)]))
        start, sizes = first, sizes + [sizes[-1] * f]
    return torch.randn(sum(sizes), dim), torch.cat(edges, dim=1)
