"""Start N ranks of a script (or module) through ``torch.distributed.run`` (torchrun), on this host.

    launch("train.py", ["--epochs", "3"], nproc=2)    # = torchrun --standalone --nproc-per-node 2 train.py ...

torchrun's agent watches the ranks: when one exits with an error it stops the others and exits
non-zero, which :func:`launch` reports as :class:`DistributedError`.  The ranks run in a session of
their own; a ``timeout``, a KeyboardInterrupt or any other exit of the waiting caller stops the whole
session (SIGTERM, then SIGKILL after ``grace`` seconds) before the error propagates, so no rank
outlives the call.  ``outre train --nproc N`` is ``launch("outre_async.cli", ["train", ...],
nproc=N, module=True)``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from ..errors import ConfigError, DistributedError
from ..loader._config import check_count


def launch(target: str, args: Sequence[str] = (), *, nproc: int, module: bool = False,
           timeout: float | None = None, grace: float = 10.0, monitor_interval: float = 0.5) -> None:
    """Run ``target`` (a script path, or a module with ``module=True``) as ``nproc`` ranks; return when
    all succeeded, else raise :class:`DistributedError` (see the module for the cleanup rule)."""
    check_count("nproc", nproc)
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"{timeout=} must be > 0 seconds (or None: no limit)")
    if not module and not os.path.isfile(target):
        raise ConfigError(f"script {target!r} not found; pass a path to a Python file (or module=True)")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "--max-restarts=0", f"--monitor-interval={monitor_interval}", *(["-m"] if module else []),
           target, *args]
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _stop(proc, grace)
        raise DistributedError(f"{nproc} ranks of {target} still running after {timeout} s; stopped them "
                               "(raise timeout, or look for a rank stuck outside a collective)") from exc
    except BaseException:
        _stop(proc, grace)
        raise
    if status != 0:
        raise DistributedError(f"{nproc} ranks of {target}: torchrun exited with status {status}; a rank failed "
                               "(its traceback and torchrun's 'Root Cause' summary are printed above)")


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the launched session (torchrun stops its ranks), SIGKILL whatever is left of it after
    ``grace`` s, and reap torchrun."""
    _signal_session(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _signal_session(proc, signal.SIGKILL)
    proc.wait()


def _signal_session(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # the session launch() started (start_new_session: its id is torchrun's pid)
    except ProcessLookupError:
        pass
