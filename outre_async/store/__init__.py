"""The on-disk dataset: manifest, row layout, memory-mapped reader, atomic writer and directory
install (design §3).

Everything above the store (ingest, sampling, features, partition, cache, loader) reads graphs through
:class:`Dataset`.  Importing the store never imports torch or numba (``_csc_kernels``, the numba
gather that partition and cache share, is imported only by them).
"""

from ._dataset import Dataset, open_dataset
from ._feature_file import NODE_FEATURES, FeatureFile, FeatureKey
from ._layout import RowLayout, choose_row_layout
from ._row_format import RowFormat
from ._writer import DatasetWriter

__all__ = ["NODE_FEATURES", "Dataset", "DatasetWriter", "FeatureFile", "FeatureKey", "RowFormat", "RowLayout",
           "choose_row_layout", "open_dataset"]
