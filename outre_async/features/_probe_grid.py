"""The disk probe's default grid (queue depths x read sizes, seconds per cell), apart from the probe so
that ``outre probe --help`` names its defaults without loading the io_uring kernels."""

from __future__ import annotations

DEPTHS = (1, 4, 16, 64, 256)
SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20)
SECONDS = 0.4  # per cell: the default grid (25 cells) takes about 10 s
