"""Which copy of the features a loader reads: the dataset itself or its
partition-ordered copy (``outre reorder``, ``outre partition --reorder``).

Partition batches read each macro batch's rows from a few partitions.  In the original numbering a
partition's rows are spread over the whole file, so each missed row is one read; in the copy each
partition is a contiguous id range, so a batch's missed rows lie close together and merged reads
(``_staging.merge_gap_bytes``) fetch many per I/O.  So with ``partitions=`` the loader reads the copy
by default when one made from this very dataset (same identity, same partitions) is found:

* ``layout="auto"`` (default): the copy at ``<dataset>-ordered-<partitions>`` beside the dataset
  (the name ``outre bench``'s ``outre-part-ordered`` writes; give ``outre reorder`` / ``outre
  partition --reorder`` that path) when it is current, else the original;
* ``layout="original"``: the original, always;
* ``layout="ordered"``: that copy, or a :class:`ConfigError` saying how to write it;
* ``layout=PATH``: the copy at ``PATH`` (checked to be reordered from this dataset by these partitions).

The mapping stays inside the loader: the copy's batches are the original's renumbered (same seeds,
same samples, ``tests/partition/test_reorder.py``), so the loader samples and reads in the copy's
ids and hands out ``n_id`` mapped back to the original's (``Dataset.original_ids``); ``y`` comes from
the copy's labels, which the reorderer permuted with the nodes, so it equals the original's for those
ids; seeds given as node ids are mapped in (``ids_of_original``), a split name names the copy's own
split (the same seeds renumbered, in the same order, so ``input_id`` is the same).  ``e_id`` is mapped
back too (:meth:`Layout.edges_to_original`): the copy keeps each node's in-edge list in the original's
order, so an edge at offset ``k`` of the copy's list of node ``t`` is at offset ``k`` of the original's
list of node ``original_ids[t]``; no edge mapping needs storing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, OutreError
from ..store._dataset import Dataset, open_dataset
from ..store._identity import dataset_identity

LAYOUTS = ("auto", "original", "ordered")


@dataclass(frozen=True, slots=True)
class Layout:
    """The dataset the loader reads (``read``) and the one its user named (``original``)."""

    original: Dataset
    read: Dataset
    layout: str  # "original" or "ordered"

    @property
    def ordered(self) -> bool:
        return self.layout == "ordered"

    def to_original(self, ids: np.ndarray) -> np.ndarray:
        """Node ids of the read copy as ids of the original (the same array when reading the original)."""
        return self.read.original_ids(ids) if self.ordered else ids

    def edges_to_original(self, e_id: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """CSC positions of the read copy as the original's: ``e_id[i]`` is an in-edge of the copy's node
        ``targets[i]`` (the same array when reading the original).  Lists keep their order in the copy
        (``partition/_reorder``), so only the list's start moves."""
        if not self.ordered:
            return e_id
        t = np.asarray(targets, dtype=np.int64)
        return (np.asarray(e_id, dtype=np.int64) - self.read.indptr[t]
                + self.original.indptr[self.read.original_ids(t)])

    def split(self, split: Any) -> Any:
        """The split in the read copy's ids: a name as is (the copy has the same splits renumbered),
        node ids mapped in order, a node mask permuted."""
        if not self.ordered or split is None or isinstance(split, str):
            return split
        arr = np.asarray(split.numpy() if hasattr(split, "numpy") else split)
        if arr.dtype == np.bool_:
            if arr.shape != (self.original.num_nodes,):
                return split  # the seed check names the wrong shape
            return arr[self.read.original_ids(np.arange(self.read.num_nodes))]
        return self.read.ids_of_original(arr)

    def stats(self) -> dict[str, str]:
        return {"layout": self.layout, "path": str(self.read.path)}


def check_layout(layout: object) -> None:
    if isinstance(layout, str) and layout:
        return
    if isinstance(layout, Path):
        return
    raise ConfigError(f"layout={layout!r} must be one of {LAYOUTS} or the path of a partition-ordered copy")


def ordered_copy_path(ds: Dataset, partitions: str) -> Path:
    """Where ``layout="auto"`` looks for the copy: ``<dataset>-ordered-<partitions>`` beside it."""
    return ds.path.with_name(f"{ds.path.name}-ordered-{partitions}")


def choose_layout(ds: Dataset, layout: str | Path, partitions: str | None) -> Layout:
    """The :class:`Layout` for ``layout`` (see the module docstring)."""
    if layout == "original" or (layout == "auto" and partitions is None):
        return Layout(ds, ds, "original")
    if ds.reordered:  # already a copy: read it as given
        return Layout(ds, ds, "original")
    if partitions is None:
        raise ConfigError(f"layout={layout!r} needs partitions= (the copy is ordered by partitions); "
                          "pass partitions=NAME or layout='original'")
    path = ordered_copy_path(ds, partitions) if layout in ("auto", "ordered") else Path(layout)
    copy, why = _current_copy(ds, path, partitions)
    if copy is not None:
        return Layout(ds, copy, "ordered")
    if layout == "auto":
        return Layout(ds, ds, "original")
    raise ConfigError(f"layout={str(layout)!r}: {path} {why}; write it with `outre reorder {ds.path} {path} "
                      f"--partitions {partitions}` or pass layout='original'")


def _current_copy(ds: Dataset, path: Path, partitions: str) -> tuple[Dataset | None, str]:
    """The copy at ``path`` if it is one reordered from ``ds`` as it is now, by ``partitions``."""
    if not (path / "manifest.json").exists():
        return None, "does not exist"
    try:
        copy = open_dataset(path)
    except OutreError as exc:
        return None, f"is not a readable dataset ({exc})"
    record = copy.manifest.meta.get("reordered", {})
    if not copy.reordered or record.get("partitions") != partitions:
        return None, f"is not a copy reordered by the partitions {partitions!r}"
    if record.get("source") != dataset_identity(ds):
        return None, f"was reordered from another dataset or another version of {ds.path}"
    if copy.num_nodes != ds.num_nodes or copy.feature_dim != ds.feature_dim:
        return None, "has other node or feature counts"
    return copy, ""
