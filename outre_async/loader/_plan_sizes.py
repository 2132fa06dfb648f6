"""The memory plan's input and output: :class:`Sizes` (what the plan needs to know about the dataset
and the batches) and :class:`MemoryPlan` (every part in bytes, the buffer rows and the staging arena).

Apart from ``_budget``, which sizes the parts (its docstring draws them), so that the sizing rules
read on their own; the loader, its setup and the profiler pass these two between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..features._buffer_kernels import slot_bytes
from ..store._row_format import RowFormat

SLOT_BYTES = slot_bytes()  # per buffer slot besides its row (its owner's count, like every part's)


@dataclass(frozen=True, kw_only=True, slots=True)
class Sizes:
    """What the plan needs to know about the dataset and the batches."""

    num_nodes: int
    format: RowFormat   # one feature row: its stored, held and delivered bytes
    stride: int         # bytes between stored rows (the layout's)
    max_rows: int       # R
    max_edges: int      # E
    batch_rows: int | None = None  # r, the rows one batch is expected to need (None: R)
    partition_bytes: int = 0  # partition mode: the partition set's arrays, slots and grouped seeds (P)
    macro_block_bytes: int = 0  # partition mode: the largest macro batch's adjacency block (M)
    macro_top_bytes: tuple[int, ...] = ()  # partition mode: item j, the most j blocks of one epoch take (T(j))
    interleave: int = 0  # partition mode: macro batches interleaved (i)
    rows_into_slots: bool = False  # the disk source reads the buffer's rows into its slots (no staging)

    @property
    def dim(self) -> int:
        return self.format.dim

    @property
    def row_bytes(self) -> int:
        """Bytes of one stored row (dim x itemsize), without the layout's padding."""
        return self.format.stored_row_bytes

    @property
    def slot_bytes(self) -> int:
        """Bytes of one feature buffer slot: its held row and its bookkeeping."""
        return self.format.held_row_bytes + SLOT_BYTES

    @property
    def expected_rows(self) -> int:
        return self.max_rows if self.batch_rows is None else min(self.batch_rows, self.max_rows)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryPlan:
    """The loader's parts in bytes (``parts``), the buffer rows and the staging arena they imply."""

    buffer_rows: int
    stage_bytes: int            # S (0 when the source is not a disk source the loader opens)
    parts: dict[str, int]
    extract_queue: int = 0      # the extract queue's depth the parts count (``extract_depth``)
    foresight: int = 0          # batches foreseen beyond the queue (``foresight_depth``; 0: off)
    map_entries: int | None = None  # the most nodes the buffer's map holds at once (``slot_map_entries``)
    per_node: dict[str, int] = field(default_factory=dict)  # the parts' bytes per node of the graph (``node_bytes``)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def batch_bytes(self) -> int:
        """The byte pool of batch matrices in flight (``_batch_memory``)."""
        return self.parts["batches"]

    @property
    def out_of_turn_bytes(self) -> int:
        """Ordered mode: the budget of batches sent out of turn (``_out_of_turn``); 0 otherwise."""
        return self.parts.get("reorder buffer", 0)

    def source_options(self) -> dict[str, int]:
        """Staging and bounce sizes for the disk source the loader opens (empty when it opens none)."""
        if not self.stage_bytes:
            return {}
        out = {"max_stage_bytes": self.stage_bytes, "max_staging_bytes": self.parts["staging"]}
        if "read bounce" in self.parts:
            out["bounce_bytes"] = self.parts["read bounce"]
        return out
