"""The GPU's utilisation during a timed epoch, as NVML reports it (``nvidia-smi``'s "GPU-Util").

A background thread samples ``nvmlDeviceGetUtilizationRates`` every ``period`` seconds between
``__enter__`` and ``__exit__`` (the epoch), so the figure covers the loader's stalls as well as the
steps, and it can differ widely from the synchronized steps' share of the epoch (NVML's own sampling;
docs/benchmarks.md has a run's two figures side by side).  Where there is nothing to sample (a CPU
run, no ``pynvml``, no driver) the result says why instead of a number; nothing here raises for a missing NVML.

The thread is owned by the context manager: started on enter, stopped (an event, not a flag
polled in a sleep) and joined on exit.  NVML's utilisation is itself an average over its last
sample period (1/6 s to 1 s by GPU), so sampling faster than ~20 Hz adds nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import torch


class UtilisationSampler:
    def __init__(self, device: torch.device, *, period: float = 0.05) -> None:
        self.device, self.period = device, period
        self.samples: list[int] = []
        self.skipped: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None

    def __enter__(self) -> UtilisationSampler:
        if self.device.type != "cuda":
            self.skipped = f"training on {self.device.type}"
            return self
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - ImportError, or NVMLError without a driver: recorded
            self.skipped = f"no NVML ({type(exc).__name__}: {exc}); `pip install nvidia-ml-py` for the figure"
            return self
        self._nvml = pynvml
        # NVML counts physical GPUs; torch's index is within CUDA_VISIBLE_DEVICES (equal when it is unset)
        handle = pynvml.nvmlDeviceGetHandleByIndex(self.device.index or 0)
        self._thread = threading.Thread(target=self._run, args=(handle,), name="outre-nvml", daemon=True)
        self._thread.start()
        return self

    def _run(self, handle: Any) -> None:
        while True:
            self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            if self._stop.wait(self.period):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._nvml.nvmlShutdown()

    def result(self) -> dict[str, Any]:
        """``{"mean_percent", "max_percent", "samples"}``, or ``{"skipped": why}``."""
        if self.skipped is not None or not self.samples:
            return {"skipped": self.skipped or "no sample taken (epoch shorter than one period)"}
        return {"mean_percent": sum(self.samples) / len(self.samples), "max_percent": max(self.samples),
                "samples": len(self.samples)}
