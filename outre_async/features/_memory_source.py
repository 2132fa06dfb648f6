"""The in-memory feature source: the whole matrix in RAM, exact and simple, the reference every disk
backend is tested against (and the ``memory`` backend for graphs whose features fit in RAM)."""

from __future__ import annotations

import os

import numpy as np

from ..errors import ConfigError
from ..store._dataset import Dataset
from ..store._file_reads import open_data_file
from ..store._row_codec import decode_rows
from ..store._row_format import RowFormat
from ._disk_source import FeatureFile
from ._source import FeatureSource


class MemorySource(FeatureSource):
    """All rows in RAM: exact, simple, the reference for the disk backends."""

    backend = "memory"

    def __init__(self, features: np.ndarray, format: RowFormat | None = None) -> None:
        """``features``: the stored rows; ``format``: how they decode (None: float rows, cast as they are)."""
        if features.ndim != 2:
            raise ConfigError(f"features must be a 2-D array, got shape {features.shape}")
        super().__init__(features.shape[0], features.shape[1], features.dtype)
        if format is not None and (format.stored != features.dtype or format.dim != features.shape[1]):
            raise ConfigError(f"{format.encoding} rows of {format.dim} values are {format.stored} words, "
                              f"got {features.dtype} of shape {features.shape}")
        self.features, self.format = features, format

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> MemorySource:
        """Load the whole feature matrix with one sequential read (``np.fromfile``)."""
        f = FeatureFile.of(dataset)
        with os.fdopen(open_data_file(f.path, f.nbytes), "rb") as file:  # a regular file of the manifest's size
            raw = np.fromfile(file, dtype=f.dtype, count=f.nbytes // f.dtype.itemsize)
        return cls(np.ascontiguousarray(raw.reshape(f.num_rows, -1)[:, : f.dim]), f.format)

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        if out.dtype == self.dtype:
            np.take(self.features, ids, axis=0, out=out)
        elif self.format is not None:
            decode_rows(self.features[ids], self.format, out=out)
        else:
            out[...] = self.features[ids]
        self._counters["unique_rows"] += len(ids)
        self._counters["row_copies"] += len(ids)
