"""What a miss costs on this machine, measured, not assumed (issue 12; DUCATI's measured slopes).

* ``row_us``: µs per feature row read through the real :class:`FeatureSource` at the loader's depth:
  ``num_extractors`` concurrent reads of one batch of distinct random rows each, as the extractors
  issue them (io_uring / pread read with ``O_DIRECT``, so the page cache does not flatter it);
* ``list_us``: µs per in-neighbour list read from the dataset's ``indices`` (memory-mapped or in RAM,
  as the sampler's disk tier reads it) for random nodes;
* ``recompute_us``: µs per batch row of one training step (forward, loss, backward, the optimizer's
  step) of the library's GraphSAGE at the loader's depth and width (``len(fanouts)`` layers,
  ``dim -> hidden``) on a synthetic batch of the profile's rows per batch, laid out as the sampler
  lays one out (``fanouts`` in-edges per node of each hop): what a pruned subtree's rows would have
  cost the trainer, and what the epoch's compute costs (the step's fixed cost shared by its rows).
  Why the whole model: one ``dim -> hidden`` linear layer, measured before, was 3.2 µs per row on
  igb-like against 15.7 µs per row the training step really took, so the plan undervalued the
  history (whose items save compute) five times and predicted a third of the epoch.

Each figure is timed after an untimed warm-up (the first call compiles numba kernels, opens rings,
allocates), repeated for ``budget_s`` seconds (at least ``repeats`` runs), outliers dropped
(``_timing``); ``spread`` and ``runs`` record each figure's IQR / median and run count, so that an
unstable figure is visible in the profile.  ``recompute_us`` is measured on the training ``device``
(model and batch there, a ``torch.cuda.synchronize`` around each timed step on CUDA): a GPU step is
~100x cheaper per row than a CPU one, and so is what a history slot spares.  The measurement runs its
own event loop in a short-lived thread, so it works under a running loop (Jupyter) too; the source it
opens is closed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..features import FeatureSource, open_source
from ..store._csc_kernels import gather_lists
from ..store._dataset import Dataset
from ._timing import BUDGET_S, Timing, more, robust, timed


@dataclass(frozen=True, kw_only=True, slots=True)
class MissCosts:
    row_us: float
    list_us: float
    recompute_us: float
    backend: str
    device: str = "cpu"                                         # where recompute_us was measured
    threads: int = 0                                            # torch's intra-op threads it ran with
    spread: dict[str, float] = field(default_factory=dict)      # IQR / median of each figure's timings
    runs: dict[str, int] = field(default_factory=dict)          # timings taken per figure (after warm-up)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def measure_costs(ds: Dataset, *, backend: str, batch_rows: int, num_extractors: int, hidden: int,
                  seed: int = 0, repeats: int = 3, source_options: dict[str, Any] | None = None,
                  source: FeatureSource | None = None, fanouts: tuple[int, ...] | list[int] = (10, 10),
                  device: str = "cpu", budget_s: float = BUDGET_S) -> MissCosts:
    """Measure the three costs (see the module); ``source`` reuses a caller's source (not closed)."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(int(batch_rows), ds.num_nodes))
    n = max(1, repeats)
    row, used = _in_thread(lambda: _row_cost(ds, backend, rows, num_extractors, rng, n, budget_s,
                                             source_options or {}, source))
    lst = _list_cost(ds, rng, n, budget_s)
    rec = _recompute_cost(ds.feature_dim, hidden, n, list(fanouts), device, budget_s, rows)
    import torch  # loaded by the step above

    # the trainer's threads, recorded: on a loaded CPU box two intra-op threads made one step 1-300x
    # slower than one thread did (a thread waits for its descheduled peer), the first cause of an
    # unstable recompute_us there (issue 25)
    threads = torch.get_num_threads()
    figures = {"row_us": row, "list_us": lst, "recompute_us": rec}
    return MissCosts(row_us=row.value, list_us=lst.value, recompute_us=rec.value, backend=used, device=device, threads=threads,
                     spread={k: round(t.spread, 4) for k, t in figures.items()},
                     runs={k: t.runs for k, t in figures.items()})


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
                    budget_s: float, opts: dict[str, Any], given: FeatureSource | None) -> tuple[Timing, str]:
    source = given if given is not None else open_source(ds, backend, **opts)  # type: ignore[arg-type]
    try:
        outs = [np.empty((rows, ds.feature_dim), np.float32) for _ in range(readers)]

        async def once() -> float:
            ids = [np.sort(rng.choice(ds.num_nodes, rows, replace=False)) for _ in range(readers)]
            start = time.perf_counter()
            await asyncio.gather(*(source.read_rows(i, o) for i, o in zip(ids, outs, strict=True)))
            return (time.perf_counter() - start) * 1e6 / (rows * readers)

        await once()  # warm-up: ring set-up, the kernels' first call
        times: list[float] = []
        started = time.perf_counter()
        while more(len(times), started, budget_s=budget_s, min_n=repeats, max_n=4 * max(repeats, 5)):
            times.append(await once())
        return robust(times), source.backend
    finally:
        if given is None:
            await source.aclose()


def _list_cost(ds: Dataset, rng: np.random.Generator, repeats: int, budget_s: float) -> Timing:
    count = max(1, min(4096, ds.num_nodes))

    def once() -> float:
        nodes = rng.choice(ds.num_nodes, count, replace=False).astype(np.int64)
        total = int((ds.indptr[nodes + 1] - ds.indptr[nodes]).sum())
        out_ptr, out = np.empty(count + 1, np.int64), np.empty(total, ds.indices.dtype)
        ds.check_mapped()
        start = time.perf_counter()
        gather_lists(ds.indptr, ds.indices, nodes, out_ptr, out)
        return (time.perf_counter() - start) * 1e6 / count

    return timed(once, budget_s=budget_s, min_n=repeats)  # the warm-up compiles gather_lists


def _recompute_cost(dim: int, hidden: int, repeats: int, fanouts: list[int], device: str, budget_s: float,
                    batch_rows: int) -> Timing:
    """µs per row of one optimizer step on a batch of about ``batch_rows`` rows.  Why the profile's
    batch size and the optimizer: a step has a fixed cost (dispatch, the optimizer, on CUDA the
    launches) that one 4096-row batch without the optimizer, measured before, hid: on the tiny
    preset's 733-row batches it gave 1 µs per row against 27-50 µs per row the bench trained, and
    the epoch was predicted 0.009 s for 0.4-1.0 s measured.  (A line through two sizes split the
    fixed cost from the marginal one, but under load the difference of two noisy timings was
    itself noise: a 1.1 s "fixed cost" once.)"""
    import torch

    from ..nn import GraphSAGE

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    model = GraphSAGE(dim, hidden, max(len(fanouts), 2), 16).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, edge_index = _synthetic_batch(dim, [f if f > 0 else 10 for f in fanouts] or [10], rows=max(1, batch_rows))
    x, edge_index = x.to(dev), edge_index.to(dev)
    target = torch.zeros(len(x), dtype=torch.long, device=dev)

    def once() -> float:
        if cuda:
            torch.cuda.synchronize(dev)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x, edge_index), target).backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize(dev)
        return (time.perf_counter() - start) * 1e6 / len(x)

    # warm-up: the first steps pay for allocation, dispatch set-up and (CUDA) the context and kernels' load
    return timed(once, budget_s=budget_s, min_n=repeats, warmup=3 if cuda else 1)


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
