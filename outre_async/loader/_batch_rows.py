"""How many rows a batch really needs: a probe of a few planned batches with the real sampler.

The bound ``R = B (1 + f1 + f1 f2 + ...)`` (capped at N) is what one batch *can* sample; real batches
sample far fewer unique nodes (repeats across seeds and hops): on Facebook Page-Page, batch 64 with
fanouts [10, 10] samples 2,460 rows on average and 2,918 at most where R = 7,104, and with fanouts
``[-1, -1]`` R is every node.  The memory plan sizes the feature buffer and the batch-matrix pool by
this probe instead of by R; the pool (``_batch_memory``) enforces the real sizes at run time, so a
batch larger than the probe suggested costs waiting, not memory.

The probe samples ``PROBE_BATCHES`` batches spread over epoch 0's plan (partition mode's micro-batches
sample the same nodes through the full CSC, so a plain :class:`NeighborSampler` gives their sizes)
and returns the largest, capped at R.  No margin: a batch larger than the probe's costs waiting for
room in the pool, and only a pair of batches larger than the whole pool is an error.  It costs a few
milliseconds per batch and one O(N) relabel scratch, freed on return.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..sampling._items import BatchItem
from ..sampling._sampler import NeighborSampler
from ..store._dataset import Dataset

PROBE_BATCHES = 16


def expected_batch_rows(dataset: Dataset, fanouts: Sequence[int], plan: Sequence[BatchItem], *, seed: int,
                        max_rows: int) -> int:
    """The rows one batch is expected to need (see the module): at least 1, at most ``max_rows``."""
    if not plan:
        return max(1, max_rows)
    sampler = NeighborSampler(dataset, list(fanouts), seed=seed)
    picks = np.unique(np.linspace(0, len(plan) - 1, num=min(PROBE_BATCHES, len(plan))).astype(np.int64))
    largest = max(sampler.sample(plan[i].seeds, int(i)).num_nodes for i in picks.tolist())
    return max(1, min(max_rows, largest))
