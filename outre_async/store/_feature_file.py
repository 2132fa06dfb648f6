"""A dataset's feature files by key: where each matrix lives, its row format and its row layout.

:class:`FeatureKey` follows GraphBolt's ``(domain, type, name)`` model, so that edge features and
the node types of a heterogeneous graph get keys of their own; a homogeneous dataset has
one key, :data:`NODE_FEATURES`; a typed one a key ``FeatureKey("node", T, "x")`` per node type ``T``
with features.  :class:`FeatureFile` is what every reader of a feature matrix needs
(the disk sources, the memory source, the memory plan): its path, row count, :class:`RowFormat` and
:class:`RowLayout`, built once from the manifest by :class:`~outre_async.store.Dataset`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from ..errors import ConfigError
from ._layout import RowLayout
from ._row_format import RowFormat


class FeatureKey(NamedTuple):
    """Which feature matrix: ``domain`` (``"node"``), the node ``type`` (``None``: homogeneous), ``name``."""

    domain: str
    type: str | None
    name: str


NODE_FEATURES = FeatureKey("node", None, "x")  # the one matrix of a homogeneous dataset


class _HasFeatures(Protocol):
    """What :meth:`FeatureFile.of` reads (a :class:`~outre_async.store.Dataset`; named by its
    property so that this module does not import the dataset's, which imports it)."""

    @property
    def feature_file(self) -> FeatureFile: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class FeatureFile:
    """A feature matrix on disk: ``num_rows`` rows of ``format``, row ``v`` at byte ``v * layout.stride``."""

    path: Path
    num_rows: int
    format: RowFormat
    layout: RowLayout

    def __post_init__(self) -> None:
        if self.layout.row_bytes != self.format.stored_row_bytes:
            raise ConfigError(f"a {self.format.dim}-value {self.format.stored} row is {self.format.stored_row_bytes} "
                              f"bytes, the layout says {self.layout.row_bytes}; build the layout from the format")

    @classmethod
    def of(cls, dataset: _HasFeatures) -> FeatureFile:
        """The node feature file of ``dataset`` (:attr:`Dataset.feature_file`)."""
        return dataset.feature_file

    @classmethod
    def packed(cls, path: Path, num_rows: int, format: RowFormat) -> FeatureFile:
        """A file of unpadded rows (``stride == row_bytes``), e.g. a spill file written chunk by chunk."""
        row = format.stored_row_bytes
        return cls(path=path, num_rows=num_rows, format=format,
                   layout=RowLayout(row_bytes=row, stride=row, layout="packed"))

    @property
    def dim(self) -> int:
        return self.format.dim

    @property
    def dtype(self) -> np.dtype:
        """The stored dtype (what a read moves)."""
        return self.format.stored

    @property
    def stride(self) -> int:
        return self.layout.stride

    @property
    def row_bytes(self) -> int:
        """Bytes of one stored row without padding."""
        return self.layout.row_bytes

    @property
    def nbytes(self) -> int:
        return self.num_rows * self.stride
