"""Where a feature row lives in ``features.bin``, and how many 512-byte sectors reading it costs.

O_DIRECT reads whole 512-byte sectors at 512-byte aligned offsets.  A row of ``row_bytes`` stored at
``v * stride`` costs the sectors of its *covering span* ``[floor(off/512)*512, ceil(end/512)*512)``.

Two layouts:

* ``padded``: ``stride = ceil(row_bytes / 512) * 512``.  Every row starts on a sector and costs the
  minimum ``ceil(row_bytes / 512)`` sectors, at the price of ``stride - row_bytes`` wasted bytes per row
  on disk (and in the page cache of an mmap reader).
* ``packed``: ``stride = row_bytes``.  No waste on disk, but a row straddles one more sector whenever
  it does not fit in the sectors it starts in, so the mean cost is higher.

``auto`` (the default) pads exactly when the fraction of read sectors it saves is at least the fraction
of disk bytes it wastes: 100 float32 (400 B) pads to 512 B (saves 43 % of sectors, wastes 22 %);
129 float32 (516 B) stays packed (padding to 1024 B would save no sector, every packed row already
spans 2, for 50 % waste);
602 float32 (2408 B) pads to 2560 B (saves 12 %, wastes 6 %); 128 float32 is already aligned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError

SECTOR = 512
RowLayoutName = Literal["auto", "padded", "packed"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RowLayout:
    """The byte layout of the feature file: row ``v`` occupies ``[v*stride, v*stride + row_bytes)``."""

    row_bytes: int
    stride: int
    layout: Literal["padded", "packed"]

    def __post_init__(self) -> None:
        if self.row_bytes <= 0 or self.stride < self.row_bytes:
            raise ConfigError(f"invalid row layout: {self.row_bytes=} {self.stride=}")

    def span(self, row: int) -> tuple[int, int]:
        """Sector-aligned ``(offset, length)`` covering ``row``: what an O_DIRECT read must fetch."""
        start = row * self.stride
        lo = start - start % SECTOR
        hi = -(-(start + self.row_bytes) // SECTOR) * SECTOR
        return lo, hi - lo


def mean_sectors(row_bytes: int, stride: int) -> float:
    """Exact mean covering-span sectors over the row start offsets modulo one sector."""
    step = math.gcd(stride, SECTOR)
    starts = range(0, SECTOR, step)
    return sum(-(-(r + row_bytes) // SECTOR) for r in starts) / len(starts)


def choose_row_layout(row_bytes: int, layout: RowLayoutName = "auto") -> RowLayout:
    """Pick the stride for rows of ``row_bytes`` following the policy in the module docstring."""
    if row_bytes <= 0:
        raise ConfigError(f"row_bytes must be positive, got {row_bytes=}")
    padded = -(-row_bytes // SECTOR) * SECTOR
    if layout == "padded" or padded == row_bytes:
        return RowLayout(row_bytes=row_bytes, stride=padded, layout="padded")
    if layout == "packed":
        return RowLayout(row_bytes=row_bytes, stride=row_bytes, layout="packed")
    if layout != "auto":
        raise ConfigError(f"row layout must be 'auto', 'padded' or 'packed', got {layout=}")
    packed_cost = mean_sectors(row_bytes, row_bytes)
    sector_saving = (packed_cost - padded / SECTOR) / packed_cost
    space_waste = (padded - row_bytes) / padded
    if sector_saving >= space_waste:
        return RowLayout(row_bytes=row_bytes, stride=padded, layout="padded")
    return RowLayout(row_bytes=row_bytes, stride=row_bytes, layout="packed")
