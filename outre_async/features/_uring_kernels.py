"""numba kernels of the io_uring source: fill SQEs for a whole burst of reads, drain CQEs into arrays.

Why: the Python binding costs several µs of user CPU per read (an ``Iovec`` object, a ``get_sqe`` /
``prep`` / ``set_data`` call each, a ``Cqe`` attribute lookup per completion).  The shared library of
the ``liburing`` wheel is built from liburing's ``ffi`` variant, so the helpers that are ``static
inline`` in ``liburing.h`` (``io_uring_get_sqe``, ``io_uring_prep_read``, ``io_uring_sqe_set_data64``,
``io_uring_peek_batch_cqe``, ``io_uring_cq_advance``, ``io_uring_submit``) are real exported
functions.  The library is loaded into LLVM's symbol table once (``load_library_permanently``) and
the kernels call the helpers as :class:`numba.types.ExternalFunction`: resolved by name when the
(cached) machine code is linked, so ``cache=True`` works, unlike ctypes function pointers whose
addresses would be baked into the cache.

The ring itself (``struct io_uring``) lives in a numpy array owned by the source (:func:`new_ring`),
so its address is stable and the kernels take it as an integer.  Memory addresses are integers too
(``uintp``): the caller guarantees that every ``[addr, addr + length)`` lies in memory it keeps
alive until the read completes.  CQE fields are read at their kernel-ABI offsets (``user_data`` at 0,
``res`` at 8; ``struct io_uring_cqe`` is fixed by the kernel, not by liburing's version).

Under ``NUMBA_DISABLE_JIT=1`` the same kernels run as Python over ctypes bindings of the same
functions (slow, but the same code path for tests).

Cold calls (``queue_init``, ``register_eventfd``, ``queue_exit``…) go through ctypes from
:mod:`._uring_source`: once per ring, not per read.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

import numpy as np
from numba import config, njit, types
from numba.extending import intrinsic

RING_BYTES = 4096  # room for ``struct io_uring`` (about 216 bytes in liburing 2.x), generously


@functools.cache
def library_path() -> Path:
    """The shared library of the ``liburing`` wheel (ImportError where the binding is missing)."""
    import liburing

    return Path(liburing.__file__).with_name("liburing.so")


@functools.cache
def clib() -> ctypes.CDLL:
    """ctypes handle on the library, with the prototypes the source and the no-JIT path use."""
    lib = ctypes.CDLL(str(library_path()))
    u, i, p = ctypes.c_uint, ctypes.c_int, ctypes.c_size_t  # pointers as integers (uintp)
    protos = {
        "io_uring_queue_init": (i, [u, p, u]), "io_uring_queue_exit": (None, [p]),
        "io_uring_register_eventfd": (i, [p, i]), "io_uring_unregister_eventfd": (i, [p]),
        "io_uring_get_sqe": (p, [p]), "io_uring_prep_read": (None, [p, i, p, u, ctypes.c_uint64]),
        "io_uring_prep_readv": (None, [p, i, p, u, ctypes.c_uint64]),
        "io_uring_sqe_set_data64": (None, [p, ctypes.c_uint64]), "io_uring_submit": (i, [p]),
        "io_uring_submit_and_wait": (i, [p, u]),
        "io_uring_peek_batch_cqe": (u, [p, p, u]), "io_uring_cq_advance": (None, [p, u]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def new_ring() -> np.ndarray:
    """Zeroed, 64-byte aligned memory for one ``struct io_uring`` (pass ``ring.ctypes.data``)."""
    raw = np.zeros(RING_BYTES + 64, dtype=np.uint8)
    shift = -raw.ctypes.data % 64
    return raw[shift : shift + RING_BYTES]


_get_sqe: Any
_prep_read: Any
_set_data64: Any
_prep_readv: Any
_submit: Any
_submit_and_wait: Any
_peek_batch: Any
_cq_advance: Any
_load_u64: Any
_load_i32: Any

if config.DISABLE_JIT:  # type: ignore[attr-defined]  # pragma: no cover - the no-JIT test run
    _lib = clib()
    _get_sqe, _prep_read = _lib.io_uring_get_sqe, _lib.io_uring_prep_read
    _prep_readv = _lib.io_uring_prep_readv
    _set_data64, _submit = _lib.io_uring_sqe_set_data64, _lib.io_uring_submit
    _submit_and_wait = _lib.io_uring_submit_and_wait
    _peek_batch, _cq_advance = _lib.io_uring_peek_batch_cqe, _lib.io_uring_cq_advance

    def _load_u64(addr: int) -> int:
        return ctypes.c_uint64.from_address(int(addr)).value

    def _load_i32(addr: int) -> int:
        return ctypes.c_int32.from_address(int(addr)).value
else:
    import llvmlite.binding as llvm

    llvm.load_library_permanently(str(library_path()))
    _ptr = types.uintp
    _get_sqe = types.ExternalFunction("io_uring_get_sqe", _ptr(_ptr))
    _prep_read = types.ExternalFunction(
        "io_uring_prep_read", types.void(_ptr, types.int32, _ptr, types.uint32, types.uint64))
    _prep_readv = types.ExternalFunction(
        "io_uring_prep_readv", types.void(_ptr, types.int32, _ptr, types.uint32, types.uint64))
    _set_data64 = types.ExternalFunction("io_uring_sqe_set_data64", types.void(_ptr, types.uint64))
    _submit = types.ExternalFunction("io_uring_submit", types.int32(_ptr))
    _submit_and_wait = types.ExternalFunction("io_uring_submit_and_wait", types.int32(_ptr, types.uint32))
    _peek_batch = types.ExternalFunction("io_uring_peek_batch_cqe", types.uint32(_ptr, _ptr, types.uint32))
    _cq_advance = types.ExternalFunction("io_uring_cq_advance", types.void(_ptr, types.uint32))

    def _loader(ty: types.Type):  # noqa: ANN202 - an intrinsic factory
        @intrinsic
        def load(typingctx, addr):  # noqa: ANN001, ANN202
            def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202
                lty = context.get_value_type(ty)
                ptr = builder.inttoptr(args[0], lty.as_pointer())
                return builder.load(ptr)

            return ty(types.uintp), codegen

        return load

    _load_u64 = _loader(types.uint64)
    _load_i32 = _loader(types.int32)


@njit(cache=True, nogil=True)
def prep_reads(ring: int, fd: int, addrs: np.ndarray, lengths: np.ndarray, offsets: np.ndarray,
               tags: np.ndarray, start: int, stop: int) -> int:
    """Fill one SQE per read ``k`` in ``[start, stop)``: ``lengths[k]`` bytes at file offset
    ``offsets[k]`` into memory at ``addrs[k]``, user data ``tags[k]``.  Returns how many were
    prepared (fewer only if the submission queue is full).  Nothing is submitted: see :func:`submit`."""
    n = 0
    for k in range(start, stop):
        sqe = _get_sqe(ring)
        if sqe == 0:
            break
        _prep_read(sqe, fd, addrs[k], lengths[k], offsets[k])
        _set_data64(sqe, tags[k])
        n += 1
    return n


@njit(cache=True, nogil=True)
def submit(ring: int) -> int:
    """One ``io_uring_enter`` for every prepared SQE: the count submitted, or ``-errno``."""
    return _submit(ring)


@njit(cache=True, nogil=True)
def reap(ring: int, cqe_ptrs: np.ndarray, tags: np.ndarray, results: np.ndarray) -> int:
    """Move up to ``len(cqe_ptrs)`` completions into ``tags``/``results`` (user data, ``res``) and
    mark them seen with one ``io_uring_cq_advance``; returns how many."""
    n = _peek_batch(ring, cqe_ptrs.ctypes.data, len(cqe_ptrs))
    for i in range(n):
        cqe = cqe_ptrs[i]
        tags[i] = _load_u64(cqe)
        results[i] = _load_i32(cqe + 8)
    if n:
        _cq_advance(ring, n)
    return n


@njit(cache=True, nogil=True)
def settle(tags: np.ndarray, results: np.ndarray, n: int, token: int, needs: np.ndarray,
           done: np.ndarray, bad: np.ndarray) -> tuple[int, int, int, int]:
    """Account the completions among the first ``n`` whose tag carries ``token`` (one job's reads).

    A read ``k`` is complete when ``done[k] + res >= needs[k]``; the others (errors, short reads)
    go to ``bad`` as ``(k, res)`` rows for the caller to retry or fail.  Returns ``(matched,
    complete, bytes, nbad)``; ``matched < n`` means other jobs' completions are in the slice too.
    """
    matched = complete = nbytes = nbad = 0
    mask = np.uint64(0xFFFFFFFF)
    for i in range(n):
        tag = tags[i]
        if (tag >> np.uint64(32)) != token:
            continue
        matched += 1
        k = int(tag & mask)
        res = int(results[i])
        if res > 0:
            nbytes += res
        if res >= 0 and done[k] + res >= needs[k]:
            complete += 1
        else:
            bad[nbad, 0] = k
            bad[nbad, 1] = res
            nbad += 1
    return matched, complete, nbytes, nbad


@njit(cache=True, nogil=True)
def prep_readvs(ring: int, fd: int, iov_addrs: np.ndarray, iov_counts: np.ndarray, offsets: np.ndarray,
                tags: np.ndarray, start: int, stop: int) -> int:
    """Like :func:`prep_reads` for vectored reads: read ``k`` fills the ``iov_counts[k]`` segments of
    the ``struct iovec`` array at ``iov_addrs[k]`` from file offset ``offsets[k]``."""
    n = 0
    for k in range(start, stop):
        sqe = _get_sqe(ring)
        if sqe == 0:
            break
        _prep_readv(sqe, fd, iov_addrs[k], iov_counts[k], offsets[k])
        _set_data64(sqe, tags[k])
        n += 1
    return n


@njit(cache=True, nogil=True)
def slot_iovecs(lo: np.ndarray, span: int, slot_addrs: np.ndarray, offsets: np.ndarray,
                lengths: np.ndarray, sink: int, iov: np.ndarray, first: np.ndarray,
                count: np.ndarray) -> int:
    """Segments of reads that land rows straight in their slots: read ``k`` covers the sorted rows
    whose aligned file spans ``[lo, lo + span)`` lie in ``[offsets[k], offsets[k] + lengths[k])``;
    each row's span goes to its slot (``slot_addrs``), each hole between two rows to ``sink`` (bytes
    nobody reads; holes are at most the plan's ``max_gap``).  Fills ``iov`` (``[addr, len]`` rows,
    at most ``2 * len(lo)``), ``first[k]``/``count[k]`` (read ``k``'s segments) and returns the
    number of segments used."""
    r = 0
    n = 0
    for k in range(len(offsets)):
        first[k] = n
        pos = offsets[k]
        end = offsets[k] + lengths[k]
        while r < len(lo) and lo[r] < end:
            if lo[r] > pos:
                iov[n, 0] = sink
                iov[n, 1] = lo[r] - pos
                n += 1
            iov[n, 0] = slot_addrs[r]
            iov[n, 1] = span
            n += 1
            pos = lo[r] + span
            r += 1
        count[k] = n - first[k]
    return n
