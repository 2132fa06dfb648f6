"""What a tier whose rows live on the training device hands back for a batch (:class:`DeviceRows`):
where its hits and the host's misses go in the batch matrix, and the assembly on that device
(:func:`assemble_x`, called where the batch reaches the loader's device).  Apart from the GPU tier so
that the tier contract (``_tier``) can name its result without importing a tier."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError
from ._decode import RowDecoder, as_tensor, as_words


@dataclass(frozen=True, slots=True)
class DeviceRows:
    """A batch's rows held by the GPU tier: assembled with the copied misses by :meth:`assemble`."""

    rows: torch.Tensor       # the tier's device rows
    num_rows: int            # rows of the batch
    miss_pos: np.ndarray     # int64: positions of the misses (the host matrix's prefix, in order)
    hit_pos: np.ndarray      # int64: positions served by the tier
    hit_slots: np.ndarray    # int64: their slots in ``rows``

    def assemble(self, misses: torch.Tensor) -> torch.Tensor:
        """The batch matrix on the tier's device: ``x[miss_pos] = misses``, ``x[hit_pos] = rows[hit_slots]``.
        On a CPU device the same two copies run in numpy (:meth:`assemble_host`): torch's CPU index
        kernels split even a small batch over their intra-op threads, and on a loaded machine with few
        cores that made one assembly take far longer in torch than in numpy (the GPU tier's loader
        tests, ``tests/loader/test_gpu_tier.py``, run this path on the CPU)."""
        if misses.shape != (len(self.miss_pos), self.rows.shape[1]):
            raise ConfigError(f"the misses must be [{len(self.miss_pos)}, {self.rows.shape[1]}], got "
                              f"{tuple(misses.shape)}")
        if self.rows.device.type == "cpu":
            return self.assemble_host(misses)
        return self.assemble_device(misses)

    def assemble_device(self, misses: torch.Tensor) -> torch.Tensor:
        """Torch on the rows' device: one index copy to the device, two device-side copies (the path
        of every accelerator; the CPU tests run it on CPU tensors too)."""
        device = self.rows.device
        m, h = len(self.miss_pos), len(self.hit_pos)
        index = torch.from_numpy(np.concatenate([self.miss_pos, self.hit_pos, self.hit_slots])).to(device)
        x = torch.empty((self.num_rows, self.rows.shape[1]), dtype=self.rows.dtype, device=device)
        x.index_copy_(0, index[:m], misses.to(device, non_blocking=True))
        x.index_copy_(0, index[m : m + h], self.rows.index_select(0, index[m + h :]))
        return x

    def assemble_host(self, misses: torch.Tensor) -> torch.Tensor:
        """The same on CPU tensors, in numpy (single-threaded gathers)."""
        misses_words, rows_words = as_words(misses.cpu()), as_words(self.rows)
        x = np.empty((self.num_rows, self.rows.shape[1]), dtype=rows_words.dtype)
        x[self.miss_pos] = misses_words
        x[self.hit_pos] = rows_words[self.hit_slots]
        return as_tensor(x)


def assemble_x(x: torch.Tensor, device_rows: DeviceRows | None, decoder: RowDecoder | None = None, *,
               held: np.ndarray | None = None) -> torch.Tensor:
    """The delivered batch matrix, called where the batch reaches the loader's device: ``x`` (held
    words), or (GPU tier) ``x`` = the misses assembled with the tier's rows on its device, then decoded
    by ``decoder`` (``features._decode``; None: delivered as held).  ``held``: the host matrix ``x``
    wraps, where the batch stayed on the host: decoded in place in its map (``RowDecoder.decode_matrix``)."""
    if device_rows is not None:
        x = device_rows.assemble(x)
    elif held is not None and decoder is not None and x.device.type == "cpu":
        return as_tensor(decoder.decode_matrix(held))
    return x if decoder is None else decoder.decode(x)
