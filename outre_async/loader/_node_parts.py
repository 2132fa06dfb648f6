"""The memory plan's parts that grow with the graph's node count: the feature buffer's node -> slot map
and the samplers' relabel scratch (each the direct array or, where smaller, a hash table sized by what
it holds: ``sampling._id_map_kernels``), and the ids foresight holds.  ``_budget`` fits them with the
other parts; ``node_bytes`` says each one's bytes per node (``stats()["memory"]["per_node"]``)."""

from __future__ import annotations

from ..features._buffer_kernels import map_bytes, next_use_bytes, table_bytes
from ..sampling._sampler import NeighborSampler
from ._config import LoaderConfig
from ._plan_sizes import Sizes


def foresight_rows(depth: int, sizes: Sizes) -> int:
    """The ids foresight of ``depth`` batches may hold at once (``foresight_bytes``' first term, in ids)."""
    return depth * sizes.expected_rows


def slot_map_entries(cfg: LoaderConfig, sizes: Sizes, rows: int, depth: int) -> int | None:
    """The most nodes the feature buffer's map holds at once (``FeatureBuffer(map_entries=)``): every
    slot's node, every row the pinned batches count (those in the extract queue, the extractors' and
    one per sampler waiting to send, at most ``R`` rows each) and with foresight of ``depth`` batches its ids (``foresight_rows`` plus
    one largest batch).  None for ``buffer_policy="next-use"``, whose kernels index the direct array."""
    if cfg.buffer_policy == "next-use":
        return None
    pinned = sizes.max_rows * (cfg.extract_capacity + cfg.num_extractors + cfg.num_samplers)
    foreseen = foresight_rows(depth, sizes) + sizes.max_rows if depth else 0
    return rows + pinned + foreseen


def node_bytes(cfg: LoaderConfig, sizes: Sizes, parts: dict[str, int]) -> dict[str, int]:
    """Bytes per node of the graph of the parts this plan sizes that are O(N) arrays: the buffer's map and
    the samplers' relabel scratch where ``parts`` chose the direct array (0 where a hash table: sized by
    what it holds), the next-use chains' heads.  Parts other owners size (the history's, the static
    cache's and the neighbour cache's tables, partition mode's arrays) say theirs in docs/design/memory.md."""
    n = sizes.num_nodes
    out = {"slot table": table_bytes(1) if parts["slot table"] == table_bytes(n) and n else 0,
           "sampler relabel": 0}
    array = NeighborSampler.relabel_bytes(n, None)
    if n and cfg.num_samplers and parts["sampler relabel"] == cfg.num_samplers * array:
        out["sampler relabel"] = cfg.num_samplers * (array // n)
    if cfg.buffer_policy == "next-use":
        out["next-use chains"] = next_use_bytes(1, 0)
    return out


def slot_map_bytes(cfg: LoaderConfig, sizes: Sizes, rows: int, depth: int) -> int:
    """The buffer's node -> slot map: the direct array (8 bytes a node) or, where smaller, a hash table
    of :func:`slot_map_entries` (``_buffer_kernels.map_bytes``)."""
    return map_bytes(sizes.num_nodes, slot_map_entries(cfg, sizes, rows, depth))
