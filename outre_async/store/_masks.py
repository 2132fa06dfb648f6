"""A 0/1 integer mask passed where node ids are expected (a uint8 ``train_mask``, say) would otherwise
be refused as "node ids more than once", which says nothing of the cause
(``tests/store/test_split_masks.py``).  Read as ids, such an array names nodes 0 and 1 over and over;
read as a mask it would be a guess (``[0, 1]`` on two nodes is both), so it stays refused, with the
cause and the fix in the message."""

from __future__ import annotations

import numpy as np

__all__ = ["mask_hint"]


def mask_hint(ids: np.ndarray, num_nodes: int | None) -> str:
    """``"; it looks like ..."`` when ``ids`` (already refused for repeats) is an integer 0/1 array
    with one entry per node, else ``""``."""
    if num_nodes is None or ids.shape != (num_nodes,) or not np.issubdtype(ids.dtype, np.integer):
        return ""
    if not np.isin(ids, (0, 1)).all():
        return ""
    return (f"; it looks like a 0/1 mask ({ids.dtype}, one entry per node), not node ids: pass mask.astype(bool) "
            "for a boolean mask, or its node ids np.flatnonzero(mask)")
