"""Each memory part reports its own bytes (``planned_bytes`` and kin, next to the code that allocates
it), and ``loader._budget`` only adds and fits them: every owner's figure equals what its object
really holds, and the plan imports functions and types from other modules, never their constants."""

from __future__ import annotations

import ast
import inspect

import numpy as np
from conftest import random_graph

from outre_async.features import FeatureBuffer
from outre_async.features import _buffer_kernels as K
from outre_async.features._bounce import BouncePool
from outre_async.features._staging import StagingPool, aligned_span, arena_bytes, least_arena_bytes
from outre_async.loader import _budget
from outre_async.loader._batch_memory import BatchMemory
from outre_async.loader._foresight import compact_ids, held_id_bytes
from outre_async.sampling._sampler import NeighborSampler, SampledSubgraph


def test_the_feature_buffer_s_parts_are_what_it_allocates() -> None:
    buf = FeatureBuffer(1000, 64, 8)
    slots = buf.num_slots
    assert buf._rec[:slots].nbytes + buf._reader.nbytes == slots * K.slot_bytes()  # per slot besides its row
    assert buf._nodes.nbytes == K.table_bytes(1000)
    nu = FeatureBuffer(1000, 64, 8, policy="next-use")
    assert nu._head.nbytes == K.next_use_bytes(1000, 0)
    assert nu._occ[:5].nbytes == K.next_use_bytes(0, 5)  # one use record per queued row


def test_a_subgraph_and_the_sampler_s_scratch_report_what_they_hold() -> None:
    indptr, indices = random_graph(np.random.default_rng(1), 300, 9)
    sampler = NeighborSampler((indptr, indices), [4, 3], seed=0)
    sub = sampler.sample(np.arange(10))
    assert sub.e_id is not None
    held = sub.n_id.nbytes + sub.edge_index.nbytes + sub.e_id.nbytes
    assert SampledSubgraph.planned_bytes(sub.num_nodes, sub.num_edges) == held
    assert NeighborSampler.relabel_bytes(300, 300) == sampler._take_scratch(300).nbytes == 300 * 4  # the array
    table = sampler._take_scratch(1)  # reaches 1 + 4 + 12 nodes: a 64-bucket hash table is smaller
    assert NeighborSampler.relabel_bytes(300, 17) == sum(a.nbytes for a in table) == 64 * 8  # int32 keys
    assert NeighborSampler.scratch_bytes(300, 5, 7) == 16 * 8 + 3 * SampledSubgraph.planned_bytes(5, 7)


def test_staging_bounce_and_foresight_size_their_own_memory() -> None:
    assert StagingPool.planned_bytes(3, 1 << 20) == 6 << 20  # two chunks in flight per extractor
    assert StagingPool.planned_bytes(3, 1 << 20, 8 << 20) == 8 << 20  # or the configured pool, if larger
    assert aligned_span(4096) == 4096 and aligned_span(4100) == 8192
    assert least_arena_bytes(1 << 16, 100_000) == arena_bytes(100_000 + 8192)
    pool = BouncePool(BouncePool.planned_bytes(4) // (32 << 10))
    try:
        assert pool.memory.nbytes == BouncePool.planned_bytes(4)  # the default pool for 4 reads in flight
    finally:
        pool.close()
    assert BouncePool.planned_bytes(4, cap=(32 << 10) * 3 + 5) == (32 << 10) * 3  # whole pages within a cap
    assert BouncePool.planned_bytes(4, cap=100) == 0
    for n in (1000, 2**31 - 1, 2**31):
        assert held_id_bytes(n) == compact_ids(np.arange(3), n).itemsize
    assert BatchMemory.row_bookkeeping_bytes() == _budget.LEASE_BYTES


def test_the_plan_imports_no_other_module_s_constants() -> None:
    tree = ast.parse(inspect.getsource(_budget))
    # the config is the plan's input (its defaults included); every other name is a part's owner's
    imported = [a.asname or a.name for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.level and node.module != "_config" for a in node.names]
    constants = [name for name in imported if not callable(getattr(_budget, name))]
    assert imported and not constants, f"_budget reads {constants} from their owners' insides"
