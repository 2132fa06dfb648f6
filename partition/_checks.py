"""What a partition folder must satisfy before a numba kernel indexes with it (numba does no bounds
checks: a bad id is a segfault or a silently wrong batch).

Checked once, vectorised, at :func:`~._reader.open_partitions` (O(N) over arrays already in RAM):
``part_ptr``, ``train_ptr``, ``adj_ptr`` monotone from 0 to their totals; ``assignment`` in
``[0, K)``; ``part_nodes`` a permutation of the nodes grouped as ``part_ptr`` says (so the sampler's
``slot_of_node[v] - part_ptr[assignment[v]]`` is inside v's partition); ``train_nodes`` in range
and in the partition ``train_ptr`` puts them in; every list of the partition adjacency as long as
the node's in-degree in the dataset (the sampler reads ``indptr``'s degree from it); ``cross`` in
``[0, in-degree]``.  ``adj_indices`` (O(E), never loaded whole) is range-checked block by block as
:meth:`~._reader.PartitionSet.read_adjacency` reads it: :func:`check_block`.

Every error is a :class:`PartitionCorruptError` naming the file and the position in it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from outre_async.errors import PartitionCorruptError

# dtypes the writer produces; a meta naming anything else is refused before a byte is read
ALLOWED_DTYPES = {
    "assignment": ("int32",), "part_ptr": ("int64",), "part_nodes": ("int64",), "train_ptr": ("int64",),
    "train_nodes": ("int64",), "adj_ptr": ("int64",), "cross": ("int32",),
    "adj_indices": ("int32", "int64"),  # and equal to the dataset's indices dtype
}


def check_arrays(path: Path, indptr: np.ndarray, k: int, a: dict[str, np.ndarray], files: dict[str, str]) -> None:
    """Raise :class:`PartitionCorruptError` unless the loaded arrays satisfy the module's invariants."""
    n = len(indptr) - 1
    _ptr(path, files["part_ptr"], a["part_ptr"], n)
    _ptr(path, files["train_ptr"], a["train_ptr"], len(a["train_nodes"]))
    _ptr(path, files["adj_ptr"], a["adj_ptr"], int(indptr[-1]))
    _in_range(path, files["assignment"], a["assignment"], 0, k)
    _in_range(path, files["part_nodes"], a["part_nodes"], 0, n)
    _in_range(path, files["train_nodes"], a["train_nodes"], 0, n)
    seen = np.bincount(a["part_nodes"], minlength=n)
    if n and seen.max() > 1:
        v = int(np.argmax(seen > 1))
        raise _corrupt(path, files["part_nodes"], int(np.flatnonzero(a["part_nodes"] == v)[1]),
                       f"lists node {v} a second time (it must be a permutation of the nodes)")
    _grouped(path, files["part_nodes"], a["assignment"], a["part_nodes"], a["part_ptr"])
    _grouped(path, files["train_nodes"], a["assignment"], a["train_nodes"], a["train_ptr"])
    deg = np.diff(indptr)
    lens = np.diff(a["adj_ptr"])
    wrong = lens != deg[a["part_nodes"]]
    if wrong.any():
        i = int(np.argmax(wrong))
        raise _corrupt(path, files["adj_ptr"], i, f"gives node {int(a['part_nodes'][i])} a list of {int(lens[i])} "
                       f"ids, the dataset's in-degree is {int(deg[a['part_nodes'][i]])}")
    cross = a["cross"]
    bad = (cross < 0) | (cross > deg)
    if bad.any():
        i = int(np.argmax(bad))
        raise _corrupt(path, files["cross"], i, f"= {int(cross[i])} is outside [0, in-degree {int(deg[i])}]")


def check_block(file: Path, ids: np.ndarray, num_nodes: int, file_pos: np.ndarray, block_pos: np.ndarray) -> None:
    """Range-check ``ids``, a block read from ``file`` (``adj_indices``) in runs: run ``r`` starts at item
    ``block_pos[r]`` of the block and item ``file_pos[r]`` of the file (for the error's position)."""
    if not len(ids):
        return
    lo, hi = ids.min(), ids.max()
    if lo >= 0 and hi < num_nodes:
        return
    j = int(np.argmax((ids < 0) | (ids >= num_nodes)))
    r = int(np.searchsorted(block_pos, j, side="right")) - 1
    at = int(file_pos[r]) + j - int(block_pos[r])
    raise _corrupt(file.parent, file.name, at, f"= {int(ids[j])} is not a node id in [0, {num_nodes})")


def _ptr(path: Path, file: str, ptr: np.ndarray, total: int) -> None:
    if ptr[0] != 0 or ptr[-1] != total:
        raise _corrupt(path, file, 0 if ptr[0] != 0 else len(ptr) - 1,
                       f"must run from 0 to {total}, runs {int(ptr[0])}..{int(ptr[-1])}")
    down = np.diff(ptr) < 0
    if down.any():
        i = int(np.argmax(down)) + 1
        raise _corrupt(path, file, i, f"= {int(ptr[i])} is below the entry before it (offsets must not decrease)")


def _in_range(path: Path, file: str, arr: np.ndarray, lo: int, hi: int) -> None:
    if len(arr) and (arr.min() < lo or arr.max() >= hi):
        i = int(np.argmax((arr < lo) | (arr >= hi)))
        raise _corrupt(path, file, i, f"= {int(arr[i])} is outside [{lo}, {hi})")


def _grouped(path: Path, file: str, assignment: np.ndarray, nodes: np.ndarray, ptr: np.ndarray) -> None:
    """``nodes[ptr[p]:ptr[p+1]]`` are all assigned to partition ``p``."""
    want = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    wrong = assignment[nodes] != want
    if wrong.any():
        i = int(np.argmax(wrong))
        raise _corrupt(path, file, i, f"places node {int(nodes[i])} in partition {int(want[i])}, "
                       f"the assignment says {int(assignment[nodes[i]])}")


def _corrupt(path: Path, file: str, index: int, what: str) -> PartitionCorruptError:
    return PartitionCorruptError(f"{path / file}: item {index} {what}; re-partition")
