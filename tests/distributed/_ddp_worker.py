"""One rank of the spawned data-parallel tests (run by torchrun or started by hand; not collected).

    python _ddp_worker.py MODE DATASET OUT

``train``: DDP GraphSAGE (no dropout, SGD) for ``STEPS`` steps over two epochs of its loader; writes
``OUT/rank{r}.npz`` with each epoch's seeds and batch counts, and rank 0 the trained parameters.
``fail``: rank 1 raises after one step; the others keep stepping (they must end in DistributedError).
Every rank writes ``OUT/pid{r}`` first, so the test can check that no rank outlives the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import outre_async as oa
from outre_async.distributed import init_distributed
from outre_async.nn import seed_logits, seed_targets

STEPS = 6
FANOUTS, BATCH = [4, 3], 96


def make_model(ds: oa.Dataset) -> torch.nn.Module:
    torch.manual_seed(0)
    return oa.GraphSAGE(ds.feature_dim, 16, 2, ds.num_classes, dropout=0.0)


def step_loss(model: torch.nn.Module, batch) -> torch.Tensor:  # type: ignore[no-untyped-def]
    return F.cross_entropy(seed_logits(model, batch), seed_targets(batch))


def main(mode: str, path: str, out: str) -> None:
    ds = oa.open_dataset(path)
    with init_distributed(timeout=60.0) as ctx:  # also the rendezvous wait for a slow-starting peer
        Path(out, f"pid{ctx.rank}").write_text(str(os.getpid()))
        # no rank/world_size given: the loader takes them from the process group
        loader = oa.OutreLoader(ds, fanouts=FANOUTS, batch_size=BATCH, seed=7, ordered=True,
                                memory_budget="64MiB", io=oa.IOOptions(backend="pread"), ranks=oa.RankOptions(local_world_size=ctx.local_world_size))
        model = ctx.wrap(make_model(ds))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        seeds, counts, steps = [], [], 0
        with loader:
            for _epoch in range(2):
                epoch_seeds = []
                for batch in loader:
                    epoch_seeds.append(batch.n_id[: batch.batch_size].numpy().copy())
                    if steps < STEPS:
                        opt.zero_grad()
                        step_loss(model, batch).backward()
                        opt.step()
                        steps += 1
                    if mode == "fail" and ctx.rank == 1:
                        raise ValueError("rank 1 fails on purpose")
                seeds.append(np.concatenate(epoch_seeds))
                counts.append(len(epoch_seeds))
        params = {f"p{i}": p.detach().numpy() for i, p in enumerate(model.module.parameters())}
        np.savez(Path(out, f"rank{ctx.rank}.npz"), seeds0=seeds[0], seeds1=seeds[1], counts=np.array(counts),
                 ranks=np.array([loader.stats()["ranks"]["rank"], loader.stats()["ranks"]["world_size"]]),
                 budget=np.array(loader.stats()["memory"]["budget"]), **params)


if __name__ == "__main__":
    main(*sys.argv[1:4])
