"""What this machine has: the training devices (``_device``: ``auto``/``cpu``/``cuda[:N]`` resolved, a
missing one refused with :class:`~outre_async.errors.DeviceNotFoundError` listing those present) and the
cores a process may use (``_cores``: the loader's thread counts sized from ``sched_getaffinity``) and
its C allocator (``_allocator``: glibc's mmap threshold held under a memory budget).
Below the loader, features and the CLI; imports nothing of the package but the errors."""
