"""The on-disk dataset: manifest, row layout, memory-mapped reader, atomic writer and directory
install (design §3).

Everything above the store (ingest, sampling, features, partition, cache, loader) reads graphs through
:class:`Dataset`; nothing here imports torch or numba.
"""

from ._dataset import Dataset, open_dataset
from ._layout import RowLayout, choose_row_layout
from ._writer import DatasetWriter

__all__ = ["Dataset", "DatasetWriter", "RowLayout", "choose_row_layout", "open_dataset"]
