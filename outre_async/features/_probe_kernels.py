"""numba kernel of the disk probe: keep ``depth`` random reads in flight on one io_uring until a list
of offsets is read.

Why a kernel: at queue depth 1 a fast device answers in tens of µs, so a Python step per read
(several µs) would be part of what is measured.  Here the loop prepares SQEs until ``depth`` reads
are outstanding, submits them and waits for at least one completion in one ``io_uring_enter``
(``io_uring_submit_and_wait``), drains every completion there is, and refills: the device sees
``depth`` reads outstanding, as fio's ``--iodepth`` gives it (fio refills the same way).

The helpers are liburing's exported functions, bound in :mod:`._uring_kernels` (same ring layout,
same no-JIT path).  Reads land in a scratch buffer whose contents nobody looks at: read ``k`` uses
slot ``k % nslots``, so two reads in flight may share a slot when the buffer is smaller than
``depth`` slots (the bytes are garbage either way; the kernel only needs the memory to exist).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._uring_kernels import _cq_advance, _get_sqe, _load_i32, _peek_batch, _prep_read, _set_data64, _submit_and_wait

_EINTR = 4
_EAGAIN = 11


@njit(cache=True, nogil=True)
def random_reads(ring: int, fd: int, buf: int, nslots: int, length: int, offsets: np.ndarray, depth: int,
                 cqe_ptrs: np.ndarray, state: np.ndarray) -> tuple[int, int, int]:
    """Read ``length`` bytes at each of ``offsets`` keeping ``depth`` reads in flight; return once all
    are submitted and as many completions were reaped, with reads still in flight (``state[0]``; the
    next call goes on from there, so the device queue never drains between calls; ``state[1]``
    numbers the reads for their buffer slots).  Empty ``offsets``: reap until none is in flight.
    Returns ``(completed, bytes, error)``: ``error`` is the first negative result (``-errno``) of a
    read or of ``io_uring_submit_and_wait``; after one, nothing more is submitted and every read in
    flight is reaped before returning (the buffer must stay alive until then)."""
    n = len(offsets)
    inflight = int(state[0])
    serial = int(state[1])
    issued = completed = nbytes = err = 0
    while True:
        if err == 0:
            if (n == 0 and inflight == 0) or (n > 0 and issued == n and completed >= n):
                break
        elif inflight == 0:
            break
        while err == 0 and inflight < depth and issued < n:
            sqe = _get_sqe(ring)
            if sqe == 0:
                break
            _prep_read(sqe, fd, buf + (serial % nslots) * length, length, offsets[issued])
            _set_data64(sqe, serial)
            serial += 1
            issued += 1
            inflight += 1
        if inflight == 0:
            break
        rc = _submit_and_wait(ring, 1)
        if rc < 0 and rc != -_EINTR and rc != -_EAGAIN and err == 0:
            err = rc
        m = _peek_batch(ring, cqe_ptrs.ctypes.data, len(cqe_ptrs))
        for i in range(m):
            res = _load_i32(cqe_ptrs[i] + 8)
            if res < 0:
                if err == 0:
                    err = res
            else:
                nbytes += res
        if m:
            _cq_advance(ring, m)
        completed += m
        inflight -= m
    state[0] = inflight
    state[1] = serial
    return completed, nbytes, err
