"""Decoding held feature rows to the delivered dtype: the one place it happens.

Rows travel from the disk to a batch matrix in their stored words (``RowFormat.held``): the buffer's
slots, the static cache, the GPU tier, staging and the host-to-device copy all move the disk's bytes.
A batch's ``x`` is decoded once, by :class:`RowDecoder`, on its way to the trainer:

* on a GPU, right after the copy, with torch on the device and on the copy engine's stream
  (:meth:`RowDecoder.decode`, ``loader._device_copy``: the batch's completion event then covers the
  decode), so the copy moves half (float16, bfloat16) or a quarter (int8) of float32's bytes; a batch
  with GPU-tier rows is decoded once assembled (``_device_rows.assemble_x``); int8's ``scale`` and
  ``zero`` are copied to each device once;
* on the host, with numpy, *in place* in the batch matrix's own map where the pool gave it room
  (``loader._batch_memory``: a matrix is mapped at the larger of its held and delivered bytes), so a
  decoded batch costs no second matrix; elsewhere into a new array.

The formulas (``RowFormat.encoding``): ``float16`` and ``float32`` are cast; ``bfloat16`` words ``w``
are the float32 ``(w << 16)``; ``int8`` words ``q`` are ``scale[c] * (q - zero[c])`` in float32.  A
delivered ``float16`` or ``bfloat16`` is the float32 value rounded to nearest even (torch's cast; numpy
has no bfloat16, so that one delivery is cast by torch on the host too).  torch and numpy compute the
same float32 operations in the same order, so both paths give the same bits.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import ConfigError
from ..store._row_format import BF16_WORDS, FLOAT16, FLOAT32, INT8, RowFormat

DECODE_CHUNK_BYTES = 1 << 20  # host decode in place: delivered bytes per chunk (the most a temporary takes)
# numpy words -> the torch dtype that holds them (bfloat16's words are viewed as torch's bfloat16)
TORCH_OF = {FLOAT32: torch.float32, FLOAT16: torch.float16, BF16_WORDS: torch.bfloat16, INT8: torch.int8}


def torch_dtype(words: np.dtype) -> torch.dtype:
    """The torch dtype of held or delivered ``words`` (``uint16`` words are bfloat16)."""
    try:
        return TORCH_OF[np.dtype(words)]
    except KeyError:
        raise ConfigError(f"feature words of {words} have no torch dtype here; hold or deliver one of "
                          f"{[str(d) for d in TORCH_OF]}") from None


def as_tensor(rows: np.ndarray) -> torch.Tensor:
    """``rows`` (held or delivered words) as a torch tensor sharing their memory, bfloat16 words as bfloat16."""
    t = torch.from_numpy(rows)
    return t.view(torch.bfloat16) if rows.dtype == BF16_WORDS else t


def as_words(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor's numpy words (the inverse of :func:`as_tensor`)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16_WORDS)
    return t.numpy()


class RowDecoder:
    """Held rows of ``fmt`` to its delivered dtype (see the module); ``identity`` when they are the same."""

    def __init__(self, fmt: RowFormat) -> None:
        self.fmt = fmt
        self.identity = not fmt.decodes
        self.delivered = torch_dtype(fmt.delivered)
        self._scales: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    # -- torch, on any device ------------------------------------------------------------------------
    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (held, on its device, as :func:`as_tensor` makes it) decoded on that device."""
        if self.identity:
            return x
        return self._to_delivered(self._float32(x))

    def _float32(self, x: torch.Tensor) -> torch.Tensor:
        if self.fmt.encoding != "int8":
            return x.to(torch.float32)
        scale, zero = self._device_scales(x.device)
        return (x.to(torch.float32) - zero) * scale

    def _to_delivered(self, x32: torch.Tensor) -> torch.Tensor:
        return x32 if self.delivered == torch.float32 else x32.to(self.delivered)

    def _device_scales(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """int8's ``scale`` and ``zero`` on ``device``, copied there once."""
        if device not in self._scales:
            scale, zero = np.asarray(self.fmt.scale), np.asarray(self.fmt.zero)  # RowFormat checked them for int8
            self._scales[device] = (torch.from_numpy(scale).to(device), torch.from_numpy(zero).to(device))
        return self._scales[device]

    # -- numpy, on the host --------------------------------------------------------------------------
    def decode_host(self, held: np.ndarray, out: np.ndarray) -> None:
        """``out[...] = decode(held)`` (``out``: delivered words, same shape)."""
        fmt = self.fmt
        if fmt.delivered == BF16_WORDS:  # numpy has no bfloat16: torch rounds on the host
            out[...] = as_words(self.decode(as_tensor(np.ascontiguousarray(held))))
            return
        if fmt.encoding in ("float32", "float16"):
            np.copyto(out, held, casting="unsafe")
            return
        if fmt.encoding == "bfloat16":
            x32 = (held.astype(np.uint32) << 16).view(FLOAT32)
        else:  # int8
            x32 = held.astype(FLOAT32)
            x32 -= fmt.zero
            x32 *= fmt.scale
        np.copyto(out, x32, casting="unsafe")

    def decode_matrix(self, held: np.ndarray) -> np.ndarray:
        """The delivered matrix of ``held`` ([rows, dim]): decoded in place in its map where the map
        has room for the delivered bytes (:func:`room_of`), else into a new array."""
        if self.identity:
            return held
        rows, dim = held.shape
        room = room_of(held, rows * dim * self.fmt.delivered.itemsize)
        if room is None:
            out = np.empty((rows, dim), self.fmt.delivered)
            self.decode_host(held, out)
            return out
        out = room[: rows * dim * self.fmt.delivered.itemsize].view(self.fmt.delivered).reshape(rows, dim)
        step = max(1, DECODE_CHUNK_BYTES // max(1, dim * self.fmt.delivered.itemsize))
        starts = range(0, rows, step)
        # wider words go last row first: a chunk's delivered bytes then cover only rows already decoded
        # and its own held rows, which numpy's assignment buffers where they overlap (only the first
        # chunks: row s's delivered bytes start past every held byte once s >= rows' held/delivered
        # share); narrower or equal, first row first
        for s in (reversed(starts) if self.fmt.delivered.itemsize > held.itemsize else starts):
            e = min(rows, s + step)
            self.decode_host(held[s:e], out[s:e])
        return out


def room_of(held: np.ndarray, nbytes: int) -> np.ndarray | None:
    """The flat bytes under ``held`` when it is a C-contiguous matrix at the start of a flat ``uint8``
    base of at least ``nbytes`` (a batch matrix from ``BatchMemory.matrix``); None otherwise."""
    base = held.base
    if (not isinstance(base, np.ndarray) or base.dtype != np.uint8 or base.ndim != 1 or not held.flags.c_contiguous
            or not base.flags.writeable or base.nbytes < nbytes or held.ctypes.data != base.ctypes.data):
        return None
    return base
