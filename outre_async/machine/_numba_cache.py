"""Whether numba will compile the loader's kernels in this process: ``outre train`` and ``outre
quickstart`` then say "compiling kernels (first run only, about a minute)" once on stderr, so the first
run on a machine, which pays the compile inside its first epoch, does not look like a hang.

The kernels are ``@njit(cache=True)``: numba writes each function's compiled code beside its module
(``__pycache__/<module>.<function>-<line>.pyXY.nbi`` and ``.nbc``), or under ``NUMBA_CACHE_DIR`` when set,
and a later process loads it.  The check asks each representative kernel's own numba cache for its
index, as numba itself reads it when it loads: missing, or stale (the source changed since: its stamp
differs), means a compile.  It reads a few small files and compiles nothing.  Where numba keeps no
disk cache for a kernel (``NUMBA_DISABLE_JIT=1``, a numba whose cache is laid out otherwise) it claims
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NOTE = "compiling kernels (first run only, about a minute)"


def kernels_to_compile(kernels: Iterable[Any]) -> bool:
    """True when one of ``kernels`` (numba dispatchers: the CLI passes the sampler's and the feature
    buffer's, ``_cli_checks.say_if_compiling``) has no compiled code in numba's disk cache yet."""
    return any(_uncached(kernel) for kernel in kernels)


def _uncached(kernel: Any) -> bool:
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    load_index = getattr(cache_file, "_load_index", None)
    if load_index is None:  # no disk cache here (jit disabled, cache=False, another numba): claim nothing
        return False
    return not load_index()  # {} when the index is missing or stale: numba compiles on the first call
