"""Profiling a loader setup from outside a loader: ``oa.profile`` (``_api``) and the ``outre profile``
verb (``_cli``).  The room sits above the loader: it builds the loader's own :class:`LoaderSetup` and
runs the loader's profiling (``loader/_profiling``, which ``OutreLoader(profile="auto")`` needs while
it is built, so it cannot live up here); the plan itself (counts, costs, knapsack, files) is ``plan/``."""

from ._api import profile

__all__ = ["profile"]
