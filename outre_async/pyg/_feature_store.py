"""PyG's ``FeatureStore`` over an on-disk dataset: ``x`` read through our feature sources, ``y`` from RAM.

``multi_get_tensor`` (what ``NodeLoader`` calls once per batch) reads every requested ``x`` index
concurrently through the same source the loader uses (``open_source``: io_uring where the kernel
allows it, else pread; ``backend="memory"`` loads the matrix), on the store's own loop thread (see
``_row_reader``).  Node ids are range-checked by the source before any read.  The store is read-only:
``put_tensor`` / ``remove_tensor`` are refused (write datasets with ``outre convert`` or
:func:`outre_async.from_pyg`).  Only homogeneous graphs: a ``group_name`` other than ``None`` is a
:class:`NotSupportedError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore, TensorAttr

from ..errors import ConfigError, NotSupportedError
from ..features._backends import Backend, open_source
from ..features._row_reader import RowReader
from ..store._dataset import Dataset

__all__ = ["OutreFeatureStore"]


class OutreFeatureStore(FeatureStore):
    """``x`` (features, float32) and ``y`` (labels, int64, -1 unlabelled) of ``dataset`` for PyG.

    ``backend`` and ``io`` (``IOConfig`` fields) choose how rows are read, as for ``OutreLoader``.
    Close it (or use ``with``) to stop its loop thread; a garbage-collected store closes itself.
    """

    def __init__(self, dataset: Dataset, *, backend: Backend = "auto", **io: Any) -> None:
        super().__init__()
        dataset.require_homogeneous("single `x` for a FeatureStore")
        if dataset.manifest.features is None:
            raise ConfigError(f"dataset {dataset.path} has no features; a FeatureStore needs `x`")
        self.dataset = dataset
        self._reader = RowReader(lambda: open_source(dataset, backend, **io), name="outre-feature-store")

    @property
    def backend(self) -> str:
        return self._reader.source.backend

    # -- reads -----------------------------------------------------------------------------------
    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        return self._multi_get_tensor([attr])[0]

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor | None]:
        ids = [self._ids(attr) for attr in attrs]
        reads = [i for i, attr in enumerate(attrs) if attr.attr_name == "x"]
        rows = self._reader.read_many([ids[i] for i in reads])
        out: list[torch.Tensor | None] = [None] * len(attrs)
        for i, r in zip(reads, rows, strict=True):
            out[i] = torch.from_numpy(r)
        for i, attr in enumerate(attrs):
            if attr.attr_name == "y":
                out[i] = torch.from_numpy(self._labels()[ids[i]])
        return out

    def _ids(self, attr: TensorAttr) -> np.ndarray:
        """The attribute's index as int64 node ids, checked: homogeneous, known name, ids in range."""
        self._check_attr(attr)
        n = self.dataset.num_nodes
        index = attr.index
        if index is None:
            return np.arange(n, dtype=np.int64)
        if isinstance(index, slice):
            return np.arange(n, dtype=np.int64)[index]
        arr = index.cpu().numpy() if isinstance(index, torch.Tensor) else np.asarray(index)
        if arr.dtype == np.bool_:
            if arr.shape != (n,):
                raise ConfigError(f"a boolean index must have one entry per node ({n}), got shape {arr.shape}")
            return np.flatnonzero(arr)
        arr = arr.reshape(-1)
        if arr.size and arr.dtype.kind not in "iu":
            raise ConfigError(f"index must hold integer node ids, got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= n):
            raise ConfigError(f"node ids must lie in [0, {n}), got min {int(arr.min())} max {int(arr.max())}")
        return arr

    def _check_attr(self, attr: TensorAttr) -> None:
        if attr.group_name is not None:
            raise NotSupportedError(f"heterogeneous graphs are not supported yet (group_name={attr.group_name!r}); "
                                    "use group_name=None on a homogeneous dataset")
        if attr.attr_name not in self._names():
            raise ConfigError(f"this dataset stores {self._names()}, not {attr.attr_name!r}")

    def _names(self) -> list[str]:
        return ["x"] + (["y"] if self.dataset.labels is not None else [])

    def _labels(self) -> np.ndarray:
        labels = self.dataset.labels
        assert labels is not None  # _check_attr admitted "y" only when there are labels
        return labels

    # -- metadata --------------------------------------------------------------------------------
    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        self._check_attr(attr)
        n = self.dataset.num_nodes
        return (n, self.dataset.feature_dim) if attr.attr_name == "x" else (n,)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=None, attr_name=name) for name in self._names()]

    # -- read-only ---------------------------------------------------------------------------------
    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise ConfigError("OutreFeatureStore is read-only; write a dataset with `outre convert` or oa.from_pyg")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise ConfigError("OutreFeatureStore is read-only; write a dataset with `outre convert` or oa.from_pyg")

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the feature source and join the store's loop thread (idempotent)."""
        self._reader.close()

    def __enter__(self) -> OutreFeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"OutreFeatureStore({str(self.dataset.path)!r}, num_nodes={self.dataset.num_nodes}, "
                f"dim={self.dataset.feature_dim}, backend={self.backend!r})")
