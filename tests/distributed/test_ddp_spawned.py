"""Two ranks with gloo on the tiny preset, spawned through the launcher (torchrun) with timeouts:
the union of the ranks' seeds per epoch is the training set exactly once, equal batch counts, the DDP
model equals a one-process model trained on the same global batches, a failing rank ends the run
with DistributedError (never a hang), and no rank outlives the run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.distributed import launch

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "_ddp_worker.py")
sys.path.insert(0, str(HERE))
import _ddp_worker as worker  # noqa: E402


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("ddp") / "g", "tiny", seed=11, feature_dim=8)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie is gone, only not yet reaped


def _pids(out: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(out.glob("pid*"))]


@pytest.mark.slow  # torchrun ranks, 30-50 s each
@pytest.mark.timeout(295)
def test_two_ranks_cover_the_split_and_train_like_one_process(ds: oa.Dataset, tmp_path: Path) -> None:
    launch(WORKER, ["train", str(ds.path), str(tmp_path)], nproc=2, timeout=270)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    train = np.sort(ds.split("train"))
    for key in ("seeds0", "seeds1"):  # each epoch: the union is the training set, exactly once
        np.testing.assert_array_equal(np.sort(np.concatenate([r[key] for r in ranks])), train)
    assert ranks[0]["counts"].tolist() == ranks[1]["counts"].tolist()
    assert [r["ranks"].tolist() for r in ranks] == [[0, 2], [1, 2]]  # from the process group
    assert int(ranks[0]["budget"]) == 32 << 20  # 64 MiB per host, 2 ranks on it
    assert not any(_alive(p) for p in _pids(tmp_path))

    # the reference: one process, both ranks' batches (explicit rank/world_size), mean of their losses
    model = worker.make_model(ds)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loaders = [oa.OutreLoader(ds, fanouts=worker.FANOUTS, batch_size=worker.BATCH, seed=7, ordered=True,
                              io=oa.IOOptions(backend="pread"), ranks=oa.RankOptions(rank=r, world_size=2)) for r in range(2)]
    steps = 0
    while steps < worker.STEPS:
        for pair in zip(*loaders, strict=True):
            if steps == worker.STEPS:
                break
            opt.zero_grad()
            (sum(worker.step_loss(model, b) for b in pair) / 2).backward()
            opt.step()
            steps += 1
    for lo in loaders:
        lo.close()
    for i, p in enumerate(model.parameters()):
        np.testing.assert_allclose(ranks[0][f"p{i}"], p.detach().numpy(), atol=1e-5, rtol=0)


@pytest.mark.slow  # torchrun ranks, 30-50 s each
@pytest.mark.timeout(200)
def test_a_failing_rank_ends_the_run_with_a_named_error(ds: oa.Dataset, tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(oa.errors.DistributedError, match="torchrun exited"):
        launch(WORKER, ["fail", str(ds.path), str(tmp_path)], nproc=2, timeout=180)
    assert time.monotonic() - start < 180  # the agent stopped rank 0: not the launcher's timeout
    assert len(_pids(tmp_path)) == 2 and not any(_alive(p) for p in _pids(tmp_path))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # torchrun ranks, 30-50 s each
@pytest.mark.timeout(200)
def test_the_surviving_rank_raises_distributed_error(ds: oa.Dataset, tmp_path: Path) -> None:
    """Without torchrun's agent to stop it, the rank left in an all-reduce gets DistributedError
    (its peer closed the connection), not a hang."""
    port = str(_free_port())
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, WORKER, "fail", str(ds.path), str(tmp_path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert procs[1].returncode != 0 and "rank 1 fails on purpose" in outs[1][1]
    assert procs[0].returncode != 0
    assert "outre_async.errors.DistributedError: rank 0 of 2: a collective failed" in outs[0][1], outs[0][1][-2000:]
