"""The feature I/O backends by name (the registry the loader's config and the CLI's ``--backend`` read),
apart from ``_backends`` so that naming them loads no source or kernel."""

from __future__ import annotations

from typing import Literal, get_args

Backend = Literal["auto", "io_uring", "pread", "memory"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
