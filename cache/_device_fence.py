"""Stream order for the history rows on a GPU: the only lines of the device table that need one.

A device table's rows are written and read on two threads' CUDA streams: the loader's loop thread
gathers a batch's pulled rows and scatters the pushed ones on its current stream (the device's
default one, which the copy engine's batches are also waited on), while the trainer computes h^(L-1)
and reads the pulled rows on *its* current stream, which may be another.  So each hand-over between
the two records an event where the tensor was made (:func:`mark`) and the other side's stream waits
for it before using the tensor (:func:`after`, no host synchronisation), marking the tensor used on
that stream (``record_stream``) so the caching allocator does not hand its memory out meanwhile.
On one stream both are no-ops in effect; on the CPU (``mark`` returns None) they do nothing, which is
how CI runs every other line of the device table.
"""

from __future__ import annotations

import torch


def mark(device: torch.device) -> torch.cuda.Event | None:
    """An event recorded on ``device``'s current stream now (None off CUDA: the work is done already)."""
    if device.type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    return event


def after(event: torch.cuda.Event | None, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, once the current stream of its device waits on ``event`` (made by :func:`mark`)."""
    if event is not None and tensor.device.type == "cuda":
        stream = torch.cuda.current_stream(tensor.device)
        stream.wait_event(event)
        tensor.record_stream(stream)
    return tensor
