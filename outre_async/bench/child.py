"""One benchmark run in its own process: ``python -m outre_async.bench.child '<json>'``.

The harness starts this inside the memory cap after evicting the dataset from the page cache.  It
builds the model (seeded: the same initial weights for every system), lets the system plug-in build
its loader, trains one timed epoch (or ``max_batches``), snapshots the I/O counters around exactly
that epoch, evaluates on validation nodes, and prints one line ``RESULT_MARKER + json`` on stdout.
A skipped system or an exception in the plug-in is reported in that line too (exit code 0 / 1);
an OOM kill or timeout leaves no line, and the harness records that instead.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

RESULT_MARKER = "OUTRE-BENCH-RESULT "
COMPUTE_ONLY = "compute-only"
COMPUTE_ONLY_PART = "compute-only-part"  # compute-only on the batches of the partition systems (outre-part)
LIMIT_RUNS = (COMPUTE_ONLY, COMPUTE_ONLY_PART)  # measured by the harness itself, uncapped; not systems


def run(system_name: str, spec_dict: dict[str, Any]) -> dict[str, Any]:
    import torch

    from ..machine._device import resolve_device
    from ..nn import GraphSAGE
    from ..store._dataset import open_dataset
    from ._epoch import proxy_step, timed_epoch, validation_accuracy
    from ._gpu_util import UtilisationSampler
    from ._measure import device_of, diskstats_read_bytes, peak_rss_bytes, proc_read_bytes
    from ._physical_limit import compute_only, compute_only_part
    from ._systems import RunSpec, resolve_system

    spec = RunSpec(**{**spec_dict, "fanouts": tuple(spec_dict["fanouts"])})
    ds = open_dataset(spec.dataset)
    device = device_of(ds.path)
    target = resolve_device(spec.device)
    torch.manual_seed(spec.seed)
    model = GraphSAGE(ds.feature_dim, spec.hidden, len(spec.fanouts), ds.num_classes).to(target)
    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr)
    setup_start = time.perf_counter()
    system = None if system_name in LIMIT_RUNS else resolve_system(system_name)
    batches = None if system is None else system.open(ds, spec)
    setup = time.perf_counter() - setup_start
    planned = _planned(ds, spec, getattr(system, "loader", None))  # before the epoch: a partition plan's length is the next epoch's
    io0, disk0 = proc_read_bytes(), diskstats_read_bytes(device)
    if system is None:
        measure = compute_only_part if system_name == COMPUTE_ONLY_PART else compute_only
        metrics = measure(model, optimizer, ds, spec)
    else:
        assert batches is not None  # opened above whenever a system is given
        step = proxy_step(spec.step_ms / 1e3) if spec.step_ms > 0 else None
        try:
            with UtilisationSampler(target) as gpu:
                counters = timed_epoch(model, optimizer, batches, num_nodes=ds.num_nodes, max_batches=spec.max_batches,
                                       step=step, device=target)
            stage = system.stats()
        finally:
            system.close()
        metrics = {**counters.as_dict(), **stage, "gpu_utilisation": gpu.result(),
                   "step_share": counters.train_seconds / counters.epoch_seconds if counters.epoch_seconds else 0.0,
                   "device": str(target), "step_ms": spec.step_ms}
    io1, disk1 = proc_read_bytes(), diskstats_read_bytes(device)
    metrics.update(
        setup_seconds=setup, read_bytes_proc=io1 - io0,
        read_bytes_diskstats=None if disk0 is None or disk1 is None else disk1 - disk0,
        peak_rss_bytes=peak_rss_bytes(),
        redundancy=metrics["rows_requested"] / max(metrics["rows_unique"], 1),
        planned_batches=planned,
    )
    metrics.update(validation_accuracy(model.cpu(), ds, fanouts=spec.fanouts, batch_size=spec.batch_size, seed=spec.seed,
                                       max_nodes=spec.val_nodes))
    return {"outcome": "ok", "metrics": metrics}


def _planned(ds: Any, spec: Any, loader: Any) -> int:
    """The epoch's batches as the system plans them (a loader's ``len``: partition batches are not
    ``ceil(seeds / batch_size)``), else the node-mode count; at most ``max_batches``."""
    try:
        full = len(loader)
    except TypeError:  # no loader (the compute-only runs), or one without a length
        full = -(-len(ds.split("train")) // spec.batch_size)
    return min(full, spec.max_batches) if spec.max_batches else full


def main(argv: list[str] | None = None) -> int:
    from ._systems import SystemSkipped

    args = sys.argv[1:] if argv is None else argv
    request = json.loads(args[0])
    try:
        result = run(request["system"], request["spec"])
    except SystemSkipped as exc:
        result = {"outcome": "skipped", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - any plug-in failure is a recorded outcome, not a crash
        result = {"outcome": "error", "message": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-4000:]}
    print(RESULT_MARKER + json.dumps(result, default=float), flush=True)
    return 1 if result["outcome"] == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
