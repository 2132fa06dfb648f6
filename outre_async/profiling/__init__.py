"""Profiling a loader setup from outside a loader: ``oa.profile`` (``_api``) and the ``outre profile``
verb (``_cli``).  The room sits above the loader: it builds the loader's own :class:`LoaderSetup` and
runs the loader's profiling (``loader/_profiling``, which ``CacheOptions(profile="auto")`` needs while
it is built, so it cannot live up here); the plan itself (counts, costs, knapsack, files) is ``plan/``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _lazy_attribute

if TYPE_CHECKING:
    from ._api import profile

__all__ = ["profile"]


def __getattr__(name: str) -> Any:
    """``profile`` on first use: the CLI's ``outre profile`` and ``outre probe`` parsers live in this
    room and must not load the loader (torch, numba) before a verb runs."""
    return _lazy_attribute(__name__, {"profile": "._api"}, name)
