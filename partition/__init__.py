"""Out-of-core FENNEL partitioner and partition-based batch inputs (installed as ``outre_async.partition``).

Built by the partitioner issue; see design §6.
"""

__all__: list[str] = []
