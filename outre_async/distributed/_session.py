"""One rank's session under torchrun: the process group, its device, and failures turned into errors.

    with init_distributed() as ctx:                    # gloo on CPU, NCCL on CUDA
        loader = OutreLoader(ds, fanouts=[10, 5], batch_size=512, **ctx.loader_options())
        model = ctx.wrap(GraphSAGE(...))                # torch DistributedDataParallel
        ...

Failure rule: a rank whose code raises leaves the ``with`` block, destroys its process group (its
peers' pending collective then breaks at once on gloo: "connection closed by peer") and re-raises.  A
rank whose collective breaks or outlives ``timeout`` raises :class:`DistributedError` from the
backend's error.  A normal exit waits for every rank (gloo: ``monitored_barrier``, which names a rank
that never arrives) within ``timeout``, so no rank hangs in a step another rank never takes; the
loader's equal step counts are what keep the ranks in step before that.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..errors import ConfigError, DistributedError

_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_COLLECTIVE_SIGNS = ("Connection closed by peer", "Connection reset", "monitoredBarrier", "Timed out", "timed out",
                     "Gloo", "gloo", "NCCL")


@dataclass(frozen=True, slots=True)
class DistributedContext:
    """Where this process stands in the run (from torchrun's environment) and its backend and device."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: torch.device

    def loader_options(self) -> dict[str, Any]:
        """Knobs for :class:`~outre_async.OutreLoader`: this rank's share of every epoch, and
        ``memory_budget`` read as the host's (split by the ranks on this host)."""
        from ..loader._options import RankOptions

        return {"ranks": RankOptions(rank=self.rank, world_size=self.world_size, local_world_size=self.local_world_size),
                "device": str(self.device)}

    def wrap(self, model: torch.nn.Module) -> torch.nn.parallel.DistributedDataParallel:
        """``model`` moved to this rank's device inside DDP (gradients averaged over the ranks)."""
        model = model.to(self.device)
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


@contextmanager
def init_distributed(*, backend: str | None = None, timeout: float = 300.0,
                     env: Mapping[str, str] | None = None) -> Iterator[DistributedContext]:
    """Join the process group torchrun set up (its ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ... in
    ``env``, default ``os.environ``) for the ``with`` block; see the module for the failure rule."""
    env = os.environ if env is None else env
    ctx = _context(env, backend)
    if not timeout > 0:
        raise ConfigError(f"{timeout=} must be > 0 seconds")
    if dist.is_initialized():
        raise ConfigError("a torch.distributed process group is initialised already; use it, or leave it "
                          "(destroy_process_group) before init_distributed")
    if ctx.device.type == "cuda":
        torch.cuda.set_device(ctx.device)
    # what env:// does, from the mapping given (torchrun's variables)
    dist.init_process_group(ctx.backend, init_method=f"tcp://{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
                            rank=ctx.rank, world_size=ctx.world_size,
                            timeout=timedelta(seconds=timeout))
    try:
        yield ctx
        _wait_for_all(ctx, timeout)
    except RuntimeError as exc:
        if isinstance(exc, dist.DistError) or any(sign in str(exc) for sign in _COLLECTIVE_SIGNS):
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise DistributedError(f"rank {ctx.rank} of {ctx.world_size}: a collective failed ({first}); another "
                                   "rank failed or stopped taking steps: see its traceback") from exc
        raise
    finally:
        dist.destroy_process_group()


def _wait_for_all(ctx: DistributedContext, timeout: float) -> None:
    if ctx.backend == "gloo":
        dist.monitored_barrier(timeout=timedelta(seconds=timeout))
    else:
        dist.barrier()


def _context(env: Mapping[str, str], backend: str | None) -> DistributedContext:
    missing = [k for k in _TORCHRUN_VARS if k not in env]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not set: this is not a torchrun process; start it with "
                          "`torchrun --nproc_per_node N script.py` or outre_async.distributed.launch")
    try:
        rank, world, local_rank, local_world = (int(env[k]) for k in _TORCHRUN_VARS[:4])
    except ValueError as exc:
        raise ConfigError(f"torchrun variables must be integers: {exc}") from exc
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"{backend=} must be 'gloo' (CPU) or 'nccl' (CUDA)")
    if backend == "nccl" and not cuda:
        raise ConfigError("backend='nccl' needs CUDA; use 'gloo' on a machine without a GPU")
    device = torch.device("cuda", local_rank % torch.cuda.device_count()) if backend == "nccl" else torch.device("cpu")
    return DistributedContext(rank, world, local_rank, local_world, backend, device)
