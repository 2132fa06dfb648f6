"""Data-parallel training on ``torch.distributed``: the per-rank session and the torchrun launcher.

This layer sits beside the CLI, above the loader (``cli -> distributed -> loader``): it reads
torchrun's environment (the one place below the CLI that does, as the CLI reads argv) and hands the
loader explicit knobs (:meth:`DistributedContext.loader_options`).  The loader itself plans its share
of each epoch without a collective (``sampling._plan``, ``loader._ranks``).
"""

from ._launch import launch
from ._session import DistributedContext, init_distributed

__all__ = ["DistributedContext", "init_distributed", "launch"]
