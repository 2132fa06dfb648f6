"""Feature, neighbour and historical-embedding caches and the budget split (installed as ``outre_async.cache``).

Built by the cache issues; see design §7-8.
"""

__all__: list[str] = []
