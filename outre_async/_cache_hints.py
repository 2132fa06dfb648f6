"""Software prefetch for numba kernels: ``prefetch(array, index)`` hints the CPU to start loading the
cache line of ``array[index]`` (a row start for a 2-D array) while the kernel keeps working, and
``prefetch_row(array, index)`` every line of a 2-D array's row.

Why: the loader's bookkeeping kernels (the feature buffer's per-node and per-slot records, the
sampler's ``indptr``) walk batch ids that are random over arrays of N nodes or S slots, far larger
than the CPU caches, so nearly every row visit starts with a cache miss, and each miss decides the
next address (``nodes[v]`` gives the slot ``s``, ``rec[s]`` its neighbours), which the out-of-order
core cannot run ahead of.  The ids themselves are known in advance (``ids[i + d]``), so the kernel
can ask for the record of the row ``d`` positions ahead and have that miss overlap the current
row's work: the misses then cost in parallel instead of one after another.

Safety: a prefetch never faults (the hardware drops a hint to a bad address), but the kernels here
compute the address only for an in-range index anyway: :func:`prefetch` clips ``index`` to
``[0, len(array) - 1]`` (and does nothing on an empty array), so no kernel ever forms an
out-of-range pointer.  It is a hint: results never depend on it.

Built with ``numba.core.extending.intrinsic`` emitting LLVM's ``llvm.prefetch(ptr, rw, locality,
cache_type)``: read (rw 0), locality 3 (keep in all cache levels: the record is read, then written,
within a few rows), data cache (1).  Works with ``cache=True`` (the intrinsic is plain LLVM IR).
Each kernel module keeps its own prefetch distance: numba's on-disk cache is keyed by the kernel's own
source file, so a distance defined here and changed later would leave stale cached kernels; for the
same reason, a change to :func:`prefetch` itself needs those caches cleared.
"""

from __future__ import annotations

from llvmlite import ir
from numba import config, njit, types
from numba.core import cgutils
from numba.core.extending import intrinsic
from numba.np.arrayobj import make_array

_LOCALITY = 3  # keep in every cache level
_LINE = 64  # bytes per cache line (x86-64, and the usual line of arm64)


@intrinsic
def _llvm_prefetch(typingctx, array, index, column):
    """``llvm.prefetch`` of ``&array[index]`` (1-D) or ``&array[index, column]`` (2-D, any layout: the
    address follows the strides), both indices clipped to the array's shape; nothing when empty.
    The pointer is declared ``i8*`` (numba's IR layer prints typed pointers); LLVM 15+ reads it as an
    opaque ``ptr`` and upgrades the unsuffixed name to ``llvm.prefetch.p0``."""
    if not isinstance(array, types.Array) or array.ndim not in (1, 2):
        return None
    if not isinstance(index, types.Integer) or not isinstance(column, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty, idxty, colty = signature.args
        ary = make_array(aryty)(context, builder, args[0])
        wanted = [context.cast(builder, args[1], idxty, types.intp),
                  context.cast(builder, args[2], colty, types.intp)][: aryty.ndim]
        shape = cgutils.unpack_tuple(builder, ary.shape, aryty.ndim)
        zero = ir.Constant(shape[0].type, 0)
        one = ir.Constant(shape[0].type, 1)
        inds, nonempty = [], cgutils.true_bit
        for idx, n in zip(wanted, shape, strict=True):
            idx = builder.select(builder.icmp_signed("<", idx, zero), zero, idx)
            last = builder.sub(n, one)
            inds.append(builder.select(builder.icmp_signed(">", idx, last), last, idx))
            nonempty = builder.and_(nonempty, builder.icmp_signed(">", n, zero))
        with builder.if_then(nonempty, likely=True):
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, inds)
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
            builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), ir.Constant(i32, 0),
                              ir.Constant(i32, _LOCALITY), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index, column), codegen


def _no_prefetch(array, index, column):  # noqa: ARG001
    """Under ``NUMBA_DISABLE_JIT=1`` the kernels run as Python, which cannot prefetch (and cannot
    call an intrinsic): the hint is dropped."""


_prefetch_at = _no_prefetch if config.DISABLE_JIT else _llvm_prefetch  # type: ignore[attr-defined]


@njit(cache=True, nogil=True, inline="always")
def prefetch(array, index):
    """Read-prefetch the cache line of ``array[index]`` (of ``array[index, 0]`` for a 2-D array);
    ``index`` is clipped to the array's first axis, so any integer is safe."""
    _prefetch_at(array, index, 0)


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(array, index):
    """Read-prefetch every cache line of the row ``array[index]`` of a 2-D array with contiguous rows (a row
    copied whole, e.g. a 1 KiB feature row: 16 lines, which the hardware prefetcher would otherwise
    discover only after the first misses); ``index`` is clipped like :func:`prefetch`."""
    step = max(1, _LINE // array.itemsize)
    for j in range(0, array.shape[1], step):
        _prefetch_at(array, index, j)
