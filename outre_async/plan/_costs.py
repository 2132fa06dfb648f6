"""What a miss costs on this machine, measured, not assumed (as DUCATI measures its slopes).

* ``row_us``: µs per feature row read through the real :class:`FeatureSource` at the loader's depth:
  ``num_extractors`` concurrent reads of one batch of distinct random rows each, as the extractors
  issue them (io_uring / pread read with ``O_DIRECT``, so the page cache does not flatter it);
  ``row_cpu_us`` is the process's CPU time per row of those reads (submissions, completions, copies:
  what reading takes from the cores, where ``row_us`` is mostly the disk's latency);
* ``list_us``: µs per in-neighbour list read from the dataset's ``indices`` (memory-mapped or in RAM,
  as the sampler's disk tier reads it) for random nodes;
* ``copy_us``: µs per batch row of the extract stage's gather from buffer slots into the batch matrix;
* ``recompute_us``: µs per batch row of one training step (forward, loss on the seeds, backward, the
  optimizer's step) of the library's GraphSAGE at the loader's depth and width (``len(fanouts)``
  layers, ``dim -> hidden -> classes``) on the topology of pre-sampled batches (:class:`BatchShape`,
  kept by ``plan._counts``): what a pruned subtree's rows would have cost the trainer, and what the
  epoch's compute costs (the step's fixed cost shared by its rows).  Why the whole model: one
  ``dim -> hidden`` linear layer is a small part of what the training step really costs a row, so a
  plan priced by it undervalues the history (``benchmarks/bench_profile_prediction.py``);
* ``gpu_hit_us`` / ``gpu_miss_us`` (with a GPU tier only): µs per batch row the GPU tier's assembly
  takes for a row it holds (a gather from the device table) and for one it misses (the host row
  copied to the device), timed through the tier's own code on the training device;
* ``pull_host_us`` / ``pull_device_us`` (with a history only, for the placements the plan may give
  it): µs per history row pulled, through the record's own transfer (``cache._record_transfer``) to
  the training device: with the table's rows on the host, a host gather into the packed buffer and
  its copy over; on the device, the slots' copy and a gather there.  What a pulled row costs the
  step, netted from what its slot spares (``plan._budget_plan``): on a GPU the step's rows are far
  cheaper than on a CPU, so a pull's own cost is no longer small beside them.

The figures are timed in rounds, every figure once per round (:func:`_rounds`), the first round
untimed (it compiles numba kernels, opens rings, allocates), at least ``repeats`` rounds and then
while ``budget_s`` per figure lasts; each figure's timings go through ``_timing.robust`` (outliers
outside Tukey's fences dropped, the median of the rest) and ``spread`` / ``runs`` record each
figure's IQR / median and run count, so that an unstable figure is visible in the profile.  Why
rounds: on a shared machine the load comes in bursts of seconds (a step's cost per row then varies
by orders of magnitude within seconds); timed one after the other, a burst falls on one figure only and
moves the prediction's balance, interleaved it falls on all alike and the median discards it.

``recompute_us`` is measured on the training ``device`` (model and batch there, a
``torch.cuda.synchronize`` around each timed step on CUDA) with the process's torch threads (the
trainer's): a GPU step is far cheaper per row than a CPU one, and so is what a history slot spares.
The measurement runs its own event loop in a short-lived thread, so it works under a running loop
(Jupyter) too; the source it opens is closed.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..features import FeatureSource, open_source
from ..store._csc_kernels import gather_lists
from ..store._dataset import Dataset
from ._timing import BUDGET_S, MAX_RUNS, robust

MIN_ROUNDS = 5     # timed rounds at least (every figure once per round)
WARMUP_ROUNDS = 1  # untimed rounds first


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchShape:
    """A pre-sampled batch's topology (``plan._counts``): what the training step is timed on."""

    edge_index: np.ndarray  # int64 [2, E]: local ids, source then target
    num_nodes: int
    batch_size: int         # seeds (the rows the loss is taken on)


@dataclass(frozen=True, kw_only=True, slots=True)
class MissCosts:
    row_us: float
    list_us: float
    recompute_us: float
    backend: str
    device: str = "cpu"                                         # where recompute_us was measured
    threads: int = 0                                            # torch's intra-op threads it ran with
    row_cpu_us: float = 0.0     # host CPU per row read (submissions, completions): the loader's, not the disk's
    copy_us: float = 0.0        # host CPU per batch row gathered from the buffer's slots into the batch matrix
    gpu_hit_us: float = 0.0     # GPU tier: µs per batch row gathered from the device table (0: no tier)
    gpu_miss_us: float = 0.0    # GPU tier: µs per batch row that misses it (copied from the host matrix)
    pull_host_us: float = 0.0   # history: µs per row pulled from a table on the host, to the device (0: not measured)
    pull_device_us: float = 0.0  # history: µs per row pulled from a table on the device (0: not measured)
    step_us: float = 0.0        # a training step that is a fixed wait per batch (``outre bench --step-ms``;
                                # recompute_us is then 0): off the cores, its rows spare nothing
    spread: dict[str, float] = field(default_factory=dict)      # IQR / median of each figure's timings
    runs: dict[str, int] = field(default_factory=dict)          # timings taken per figure (after warm-up)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def measure_costs(ds: Dataset, *, backend: str, batch_rows: int, num_extractors: int, hidden: int,
                  seed: int = 0, repeats: int = MIN_ROUNDS, source_options: dict[str, Any] | None = None,
                  source: FeatureSource | None = None, fanouts: tuple[int, ...] | list[int] = (10, 10),
                  device: str = "cpu", budget_s: float = BUDGET_S, shapes: Sequence[BatchShape] = (),
                  gpu_rows: int = 0, history_dim: int = 0, pull_placements: Sequence[str] = ()) -> MissCosts:
    """Measure the costs (see the module); ``source`` reuses a caller's source (not closed);
    ``shapes``: pre-sampled batches the step is timed on (a synthetic batch of ``batch_rows`` without);
    ``gpu_rows`` > 0: the GPU tier's costs too, with a device table of that many rows (capped);
    ``pull_placements``: the history's pulls from a table of ``history_dim``-wide rows so placed."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(int(batch_rows), ds.num_nodes))
    figures = _Figures(ds, rng, rows, list(fanouts), device, hidden, list(shapes), gpu_rows)
    figures.pulls = {p: _PullTimer(history_dim, rows, p, device, rng) for p in pull_placements if history_dim}
    timings = _in_thread(lambda: _rounds(figures, backend, num_extractors, source_options or {}, source,
                                         max(1, repeats), budget_s))
    # the trainer's threads, recorded: on a loaded CPU box intra-op threads wait for a descheduled
    # peer, so the thread count is the first cause of an unstable recompute_us (the profile's spread)
    threads = figures.threads
    got = {k: robust(v) for k, v in timings.items() if k != "backend"}
    return MissCosts(row_us=got["row_us"].value, list_us=got["list_us"].value, recompute_us=got["recompute_us"].value,
                     backend=timings["backend"], device=device, threads=threads, row_cpu_us=got["row_cpu_us"].value,
                     copy_us=got["copy_us"].value, gpu_hit_us=got["gpu_hit_us"].value if gpu_rows else 0.0,
                     gpu_miss_us=got["gpu_miss_us"].value if gpu_rows else 0.0,
                     pull_host_us=got["pull_host_us"].value if "pull_host_us" in got else 0.0,
                     pull_device_us=got["pull_device_us"].value if "pull_device_us" in got else 0.0,
                     spread={k: round(t.spread, 4) for k, t in got.items() if t.runs},
                     runs={k: t.runs for k, t in got.items() if t.runs})


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


async def _rounds(figures: _Figures, backend: str, readers: int, opts: dict[str, Any], given: FeatureSource | None,
                  min_rounds: int, budget_s: float) -> dict[str, Any]:
    """Every figure once per round, rounds repeated (at least ``min_rounds``, then while ``budget_s``
    per figure lasts): a burst of load on a shared machine then falls on every figure alike, rather
    than on whichever was being timed (module docstring).  The first round is the untimed warm-up."""
    import torch

    # the caller's (the trainer's) intra-op threads in this thread too: OpenMP's count is per thread
    torch.set_num_threads(figures.threads)
    source = given if given is not None else open_source(figures.ds, backend, **opts)  # type: ignore[arg-type]
    try:
        reader = _RowReader(source, figures, readers)
        steps: dict[str, Callable[[], Awaitable[float] | float]] = {
            "row_us": reader.wall, "list_us": figures.list_once, "recompute_us": figures.step_once,
            "copy_us": figures.copy_once}
        gpu = figures.gpu
        if gpu is not None:
            steps.update(gpu_hit_us=lambda: gpu.once(hits=True), gpu_miss_us=lambda: gpu.once(hits=False))
        for placement, pull in figures.pulls.items():
            steps[f"pull_{placement}_us"] = pull.once
        times: dict[str, list[float]] = {k: [] for k in steps}
        started = time.perf_counter()
        for rnd in range(-WARMUP_ROUNDS, MAX_RUNS):
            if rnd >= min_rounds and time.perf_counter() - started > budget_s * len(steps):
                break
            if rnd == 0:
                started = time.perf_counter()
            for name, once in steps.items():
                got = once()
                value = await got if inspect.isawaitable(got) else got
                if rnd >= 0:
                    times[name].append(float(value))  # type: ignore[arg-type]
        return {**times, "row_cpu_us": reader.cpu_per_row[-len(times["row_us"]):], "backend": source.backend}
    finally:
        if given is None:
            await source.aclose()


class _RowReader:
    """``row_us``: one round of ``readers`` concurrent reads of a batch of distinct random rows each,
    as the extractors issue them; beside the wall time per row, the process's CPU time per row
    (``row_cpu_us``: what the reads take from the cores the trainer also uses)."""

    def __init__(self, source: FeatureSource, figures: _Figures, readers: int) -> None:
        self.source, self.f, self.readers = source, figures, readers
        held = figures.ds.row_format.held  # rows land in the buffer in their stored words (``RowFormat``)
        self.outs = [np.empty((figures.rows, figures.ds.feature_dim), held) for _ in range(readers)]
        self.cpu_per_row: list[float] = []

    async def wall(self) -> float:
        f = self.f
        ids = [np.sort(f.rng.choice(f.ds.num_nodes, f.rows, replace=False)) for _ in range(self.readers)]
        cpu, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(self.source.read_rows(i, o) for i, o in zip(ids, self.outs, strict=True)))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        n = f.rows * self.readers
        self.cpu_per_row.append(cpu * 1e6 / n)
        return wall * 1e6 / n


class _Figures:
    """The synchronous figures, one timing per call (module docstring)."""

    def __init__(self, ds: Dataset, rng: np.random.Generator, rows: int, fanouts: list[int], device: str,
                 hidden: int, shapes: list[BatchShape], gpu_rows: int) -> None:
        import torch

        self.ds, self.rng, self.rows, self.gpu_rows = ds, rng, rows, gpu_rows
        self.threads = torch.get_num_threads()
        self._step = _TrainStep(ds.feature_dim, hidden, max(ds.num_classes, 2), fanouts, device, shapes, rows)
        held = ds.row_format.held  # slots and batch matrices hold the stored words (``RowFormat``)
        self._slots = rng.integers(0, 100, (min(ds.num_nodes, 4 * rows), ds.feature_dim)).astype(held)
        self._batch = np.empty((rows, ds.feature_dim), held)
        self.gpu = _GpuTierTimer(ds.feature_dim, rows, gpu_rows, device, rng) if gpu_rows else None
        self.pulls: dict[str, _PullTimer] = {}  # by the history table's placement (measure_costs)

    def list_once(self) -> float:
        ds = self.ds
        count = max(1, min(4096, ds.num_nodes))
        nodes = self.rng.choice(ds.num_nodes, count, replace=False).astype(np.int64)
        total = int((ds.indptr[nodes + 1] - ds.indptr[nodes]).sum())
        out_ptr, out = np.empty(count + 1, np.int64), np.empty(total, ds.indices.dtype)
        ds.check_mapped()
        start = time.perf_counter()
        gather_lists(ds.indptr, ds.indices, nodes, out_ptr, out)
        return (time.perf_counter() - start) * 1e6 / count

    def step_once(self) -> float:
        return self._step.once()

    def copy_once(self) -> float:
        """The extract stage's gather of a batch's rows from buffer slots into its matrix, per row."""
        slots = self.rng.integers(0, len(self._slots), self.rows)
        start = time.perf_counter()
        np.take(self._slots, slots, axis=0, out=self._batch)
        return (time.perf_counter() - start) * 1e6 / self.rows


class _TrainStep:
    """µs per row of one optimizer step of the trainer's model (the library's GraphSAGE, ``len(fanouts)``
    layers, ``dim -> hidden -> classes``, the loss on the seeds as ``outre train`` and the bench take
    it) on the pre-sampled batches' own topology, round robin (random features: values do not change
    the cost).  Why real shapes: a synthetic tree batch of the same rows (no shared neighbours, one
    edge per row, the loss on every row) has more edges and more loss rows than a real batch, so it
    times slower than the step on real batches.  Why the profile's batch size and the optimizer: a
    step has a fixed cost (dispatch, the optimizer, on CUDA the launches) that one large batch without
    the optimizer hides, spread over its rows (``benchmarks/bench_profile_prediction.py`` sets predicted
    against measured steps).  Without shapes (costs measured on their own), a
    synthetic batch of about ``rows`` rows laid out hop by hop stands in."""

    def __init__(self, dim: int, hidden: int, classes: int, fanouts: list[int], device: str,
                 shapes: list[BatchShape], rows: int) -> None:
        import torch

        from ..nn import GraphSAGE

        self.dev = torch.device(device)
        self.cuda = self.dev.type == "cuda"
        layers = max(len(fanouts), 1)
        self.model = GraphSAGE(dim, hidden, layers, classes).to(self.dev)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        if not shapes:
            x, edge_index = _synthetic_batch(dim, [f if f > 0 else 10 for f in fanouts] or [10], rows=max(1, rows))
            shapes = [BatchShape(edge_index=edge_index.numpy(), num_nodes=len(x), batch_size=len(x))]
        gen = torch.Generator().manual_seed(0)
        self.batches = [(torch.randn(s.num_nodes, dim, generator=gen).to(self.dev),
                         torch.as_tensor(s.edge_index, dtype=torch.long).to(self.dev),
                         torch.randint(0, classes, (max(s.batch_size, 1),), generator=gen).to(self.dev))
                        for s in shapes]
        self.turn = 0
        for _ in range(2 * len(self.batches) if self.cuda else 0):  # CUDA: the context and kernels' load
            self.once()

    def once(self) -> float:
        import torch

        x, edge_index, target = self.batches[self.turn % len(self.batches)]
        self.turn += 1
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(x, edge_index)[: len(target)]
        torch.nn.functional.cross_entropy(out, target).backward()
        self.optimizer.step()
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        return (time.perf_counter() - start) * 1e6 / len(x)


class _GpuTierTimer:
    """The GPU tier's own costs through its real assembly (``features._device_rows.DeviceRows``):
    a batch of ``rows`` rows all held (``gpu_hit_us``: the gather from the device table) and all
    missed (``gpu_miss_us``: the host matrix's rows copied to the device, pinned on CUDA as the
    loader's pool is), per row, synchronised on CUDA.  The table holds ``min(gpu_rows, 4 rows)`` random
    rows: enough to gather from at random, no more device memory than a few batches."""

    def __init__(self, dim: int, rows: int, gpu_rows: int, device: str, rng: np.random.Generator) -> None:
        import torch

        self.dev = torch.device(device)
        self.cuda = self.dev.type == "cuda"
        self.rng, self.rows = rng, rows
        held = max(1, min(gpu_rows, 4 * rows))
        self.table = torch.from_numpy(rng.standard_normal((held, dim), dtype=np.float32)).to(self.dev)
        host = torch.from_numpy(rng.standard_normal((rows, dim), dtype=np.float32))
        self.host = host.pin_memory() if self.cuda else host
        self.empty = torch.empty((0, dim), dtype=torch.float32)

    def once(self, *, hits: bool) -> float:
        import torch

        from ..features._device_rows import DeviceRows

        pos = self.rng.permutation(self.rows).astype(np.int64)
        none = np.empty(0, np.int64)
        if hits:
            slots = self.rng.integers(0, len(self.table), self.rows).astype(np.int64)
            rows, misses = DeviceRows(self.table, self.rows, none, pos, slots), self.empty
        else:
            rows, misses = DeviceRows(self.table, self.rows, pos, none, none), self.host
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        start = time.perf_counter()
        rows.assemble(misses)
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        return (time.perf_counter() - start) * 1e6 / self.rows


class _PullTimer:
    """A history pull through the record's real transfer (``cache._record_transfer``): ``rows`` random
    slots of a table of ``dim``-wide rows on the host (``placement="host"``) or on the training device
    (``"device"``), sent to the device, per row pulled, synchronised on CUDA.  The table holds ``4 rows``
    slots (a gather at random, no more memory than a few batches)."""

    def __init__(self, dim: int, rows: int, placement: str, device: str, rng: np.random.Generator) -> None:
        import torch

        from ..cache._history import HistoryTable
        from ..cache._record_transfer import RecordTransfer

        self.dev = torch.device(device)
        self.cuda = self.dev.type == "cuda"
        self.rng, self.rows = rng, rows
        slots = 4 * rows
        self.table = HistoryTable(np.arange(slots), slots, dim, pin=placement == "host" and self.cuda,
                                  device=self.dev if placement == "device" else "cpu")
        self.table.rows.copy_(torch.from_numpy(rng.standard_normal((slots, dim), dtype=np.float32)))
        self.transfer = RecordTransfer(self.dev)

    def once(self) -> float:
        import torch

        slots = self.rng.integers(0, self.table.num_slots, self.rows)
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        start = time.perf_counter()
        self.transfer.send((), self.table, slots)
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        return (time.perf_counter() - start) * 1e6 / self.rows


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
