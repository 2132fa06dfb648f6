"""The per-rank session and the launcher, in one process where possible: torchrun's environment
checked, backend chosen (gloo on CPU, NCCL only with CUDA), the process group always left, collective
failures named; the launcher's argument checks and its timeout, which stops every rank it started."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import generated

import outre_async as oa
from outre_async.distributed import init_distributed, launch
from outre_async.distributed._session import _context
from outre_async.loader._options import group_knobs


def _env(port: int | None = None) -> dict[str, str]:
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    return {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}


def test_context_needs_torchrun_variables() -> None:
    with pytest.raises(oa.ConfigError, match="RANK.*torchrun"):
        _context({}, None)
    with pytest.raises(oa.ConfigError, match="integers"):
        _context(_env(1) | {"RANK": "x"}, None)


def test_backend_is_gloo_on_cpu_and_nccl_needs_cuda() -> None:
    ctx = _context(_env(1) | {"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4"}, None)
    if torch.cuda.is_available():
        assert ctx.backend == "nccl" and ctx.device.type == "cuda"
    else:
        assert ctx.backend == "gloo" and ctx.device == torch.device("cpu")
        with pytest.raises(oa.ConfigError, match="needs CUDA"):
            _context(_env(1), "nccl")
    assert ctx.loader_options()["ranks"].local_world_size == 2 and ctx.loader_options()["ranks"].world_size == 4
    with pytest.raises(oa.ConfigError, match="gloo"):
        _context(_env(1), "mpi")


@pytest.mark.timeout(60)
def test_session_of_one_rank_feeds_the_loader_and_leaves_the_group(tmp_path: Path) -> None:
    ds = generated(tmp_path / "g", "tiny", seed=2, feature_dim=8)
    with init_distributed(backend="gloo", timeout=30, env=_env()) as ctx:
        loader = oa.OutreLoader(ds, fanouts=[2], batch_size=128, io=oa.IOOptions(backend="memory"))  # ranks from the group
        assert loader.stats()["ranks"]["world_size"] == 1 and ctx.world_size == 1
        model = ctx.wrap(torch.nn.Linear(8, 2))
        assert isinstance(model, torch.nn.parallel.DistributedDataParallel)
        assert sum(len(b.n_id) > 0 for b in loader) == len(loader)
        loader.close()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="mine"), init_distributed(backend="gloo", timeout=30, env=_env()):
        raise ValueError("mine")  # the rank's own error passes through unchanged
    assert not dist.is_initialized()
    with pytest.raises(oa.errors.DistributedError, match="a collective failed") as info, \
            init_distributed(backend="gloo", timeout=30, env=_env()):
        raise RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:1")
    assert isinstance(info.value.__cause__, RuntimeError) and not dist.is_initialized()


def test_session_refuses_a_second_group() -> None:
    with init_distributed(backend="gloo", timeout=30, env=_env()), \
            pytest.raises(oa.ConfigError, match="initialised already"), \
            init_distributed(backend="gloo", timeout=30, env=_env()):
        pass


def test_launch_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(oa.ConfigError, match="nproc"):
        launch(str(tmp_path / "x.py"), nproc=0)
    with pytest.raises(oa.ConfigError, match="not found"):
        launch(str(tmp_path / "missing.py"), nproc=1)
    with pytest.raises(oa.ConfigError, match="timeout"):
        launch(str(tmp_path / "missing.py"), nproc=1, timeout=0)


@pytest.mark.slow  # torchrun ranks, ~20 s
@pytest.mark.timeout(120)
def test_launch_timeout_stops_every_rank(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text("import os, sys, time\n"
                      "open(os.path.join(sys.argv[1], 'pid' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
                      "time.sleep(600)\n")
    start = time.monotonic()
    with pytest.raises(oa.errors.DistributedError, match="still running"):
        launch(str(script), [str(tmp_path)], nproc=2, timeout=15, grace=5)
    assert time.monotonic() - start < 60
    for pid in (int(p.read_text()) for p in tmp_path.glob("pid*")):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_equal_cpu_batches(tmp_path: Path) -> None:
    """The CUDA path (pinned staging, non-blocking copies) delivers the CPU path's batches, per rank."""
    ds = generated(tmp_path / "g", "tiny", seed=5, feature_dim=8)
    common = dict(fanouts=[3, 2], batch_size=64, backend="memory", ordered=True, seed=1, rank=1, world_size=2)
    with oa.OutreLoader(ds, **group_knobs(common)) as cpu, oa.OutreLoader(ds, **group_knobs(dict(device="cuda", **common))) as gpu:
        for a, b in zip(cpu, gpu, strict=True):
            assert b.x.is_cuda and b.edge_index.is_cuda
            torch.cuda.synchronize()
            np.testing.assert_array_equal(a.x.numpy(), b.x.cpu().numpy())
            np.testing.assert_array_equal(a.edge_index.numpy(), b.edge_index.cpu().numpy())
