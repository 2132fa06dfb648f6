"""Where this loader stands in a data-parallel run: its rank, the world size, the ranks of its host.

``rank``/``world_size`` come from :class:`LoaderConfig` when given (a reference run, or an evaluation
loader that must not shard: ``rank=0, world_size=1``), else from the initialised ``torch.distributed``
process group, else one process.  Nothing here runs a collective: each rank plans its share of the
epoch alone (``sampling._plan``), so constructing a loader on one rank only never blocks.

Memory: ranks of one host share the on-disk store and the page cache, and each runs its own pipeline
(buffer, staging, sampler scratch, history table).  With ``local_world_size`` given, ``memory_budget``
is the host's and each rank plans within ``memory_budget // local_world_size`` (the launcher's
:func:`outre_async.distributed.init_distributed` passes it from torchrun's ``LOCAL_WORLD_SIZE``);
without it, ``memory_budget`` is this process's own.  The page cache is outside every budget, as in
one process: the kernel shares it among the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from ..errors import ConfigError
from ._config import LoaderConfig


@dataclass(frozen=True, slots=True)
class RankPlace:
    rank: int = 0
    world_size: int = 1
    local_world_size: int | None = None  # None: memory_budget is this process's

    def budget_share(self, budget: int | None) -> int | None:
        """This rank's bytes of a host budget (the whole ``budget`` when the host's ranks are not given)."""
        if budget is None or self.local_world_size is None:
            return budget
        return budget // self.local_world_size


def resolve_place(cfg: LoaderConfig) -> RankPlace:
    """The config's rank and world size, or the process group's; checked against each other."""
    if cfg.rank is not None and cfg.world_size is not None:
        rank, world = cfg.rank, cfg.world_size
    elif dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    local = cfg.local_world_size
    if local is not None and local > world:
        raise ConfigError(f"local_world_size={local} exceeds the world size {world}; pass the ranks on this host")
    return RankPlace(rank, world, local)
