"""The public surface, pinned: a name added to or dropped from any ``__all__`` must show up here, in
review, as a deliberate change (httpx ``test_all_imports_are_exported``).  Every pinned name resolves,
the top-level ones lazily: importing ``outre_async`` stays cheap, and a name pays its import on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "outre_async": [
        "CacheOptions",
        "ConfigError",
        "Dataset",
        "DatasetError",
        "DatasetWriter",
        "DiskProbe",
        "FeatureSource",
        "GAT",
        "GCN",
        "GeneratorConfig",
        "GraphSAGE",
        "HeteroNeighborSampler",
        "HistoryConfig",
        "HistoryRecord",
        "IOOptions",
        "MLP",
        "NeighborSampler",
        "NotSupportedError",
        "OutreBatch",
        "OutreError",
        "OutreLoader",
        "PRESETS",
        "PartitionOptions",
        "PipelineOptions",
        "RankOptions",
        "RowLayout",
        "SampledSubgraph",
        "SmallBufferWarning",
        "SyncLoader",
        "cached_probe",
        "choose_row_layout",
        "convert",
        "detect_io_uring",
        "errors",
        "evaluate_links",
        "from_edge_list",
        "from_npz",
        "from_ogb",
        "from_pyg",
        "generate",
        "inference",
        "open_dataset",
        "open_source",
        "probe_disk",
        "profile",
        "recast",
        "sample_neighbors",
        "split_edges",
        "with_history",
        "write_dataset",
    ],
    "outre_async.store": [
        "Dataset",
        "DatasetWriter",
        "FeatureFile",
        "FeatureKey",
        "NODE_FEATURES",
        "RowFormat",
        "RowLayout",
        "choose_row_layout",
        "open_dataset",
    ],
    "outre_async.ingest": [
        "GeneratorConfig",
        "PRESETS",
        "convert",
        "from_edge_list",
        "from_npz",
        "from_ogb",
        "from_pyg",
        "generate",
        "recast",
        "split_edges",
        "write_dataset",
    ],
    "outre_async.sampling": [
        "BatchItem",
        "EdgeItems",
        "EdgeTargets",
        "HeteroNeighborSampler",
        "HeteroSampledSubgraph",
        "Items",
        "MacroRef",
        "NegativeSpec",
        "NeighborSampler",
        "NodeTargets",
        "SampledSubgraph",
        "SeedItems",
        "plan_epoch",
        "sample_neighbors",
    ],
    "outre_async.features": [
        "BACKENDS",
        "Backend",
        "BufferTier",
        "DeviceFeatureCache",
        "DeviceRows",
        "DiskProbe",
        "EVICTION_POLICIES",
        "FeatureBuffer",
        "FeatureFile",
        "FeatureSource",
        "FeatureTier",
        "GpuTier",
        "IOConfig",
        "MemorySource",
        "PLANNED_POLICIES",
        "PreadSource",
        "SourceTier",
        "StaticFeatureCache",
        "StaticTier",
        "TIERS",
        "cached_probe",
        "detect_io_uring",
        "in_flight_for",
        "make_tier",
        "open_source",
        "probe_disk",
    ],
    "outre_async.loader": [
        "CacheOptions",
        "HistoryRecord",
        "IOOptions",
        "LoaderConfig",
        "OutreBatch",
        "OutreLoader",
        "PartitionOptions",
        "PipelineOptions",
        "RankOptions",
        "SyncLoader",
        "profile",
    ],
    "outre_async.plan": [
        "ALPHAS",
        "Attribution",
        "Choice",
        "KnapsackInput",
        "MissCosts",
        "alpha_choice",
        "measure_costs",
        "outre_split",
        "saved_us",
        "solve",
    ],
    "outre_async.distributed": [
        "DistributedContext",
        "init_distributed",
        "launch",
    ],
    "outre_async.partition": [
        "AdjacencyBlock",
        "MacroStore",
        "PartitionConfig",
        "PartitionSampler",
        "PartitionSet",
        "SeedGroups",
        "dataset_identity",
        "default_name",
        "group_seeds",
        "list_partitions",
        "open_partitions",
        "partition",
        "plan_partition_epoch",
        "redundancy_ratio",
        "reorder",
    ],
    "outre_async.pyg": [
        "OutreFeatureStore",
        "OutreGraphStore",
        "OutreNodeSampler",
        "to_hetero_batch",
        "to_pyg",
    ],
    "outre_async.layerwise": ["inference"],
    "outre_async.links": ["dot", "evaluate_links"],
    "outre_async.trainer": ["TrainConfig", "build_model", "run_train"],
    "outre_async.cache": [
        "HistoryConfig",
        "HistoryDecision",
        "HistoryTable",
        "NeighborCache",
        "history_bytes",
    ],
    "outre_async.bench": [
        "BENCH_PRESETS",
        "BenchPreset",
        "DEFAULT_SYSTEMS",
        "RunSpec",
        "SYSTEMS",
        "SchemaError",
        "SuiteConfig",
        "System",
        "SystemSkipped",
        "register_system",
        "run_suite",
        "validate_result",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_exactly_the_pinned_list(module: str) -> None:
    exported = importlib.import_module(module).__all__
    assert len(set(exported)) == len(exported), f"{module}.__all__ repeats a name"
    assert sorted(exported) == PUBLIC[module]


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_exported_name_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if getattr(mod, name, None) is None]
    assert missing == []


def test_top_level_names_are_the_sub_packages_objects() -> None:
    import outre_async

    for module, names in PUBLIC.items():
        if module == "outre_async":
            continue
        mod = importlib.import_module(module)
        for name in set(names) & set(outre_async.__all__):
            assert getattr(outre_async, name) is getattr(mod, name), f"outre_async.{name} is not {module}.{name}"


def test_top_level_import_is_cheap_and_lazy_names_import_on_access() -> None:
    """Run in a fresh interpreter (this one has long imported torch): ``import outre_async`` loads
    neither torch nor numba, and each lazy name imports its module when first read."""
    code = (
        "import sys, outre_async as oa\n"
        "assert not {'torch', 'numba'} & set(sys.modules), sorted({'torch', 'numba'} & set(sys.modules))\n"
        "lazy = sorted(oa._LAZY)\n"
        "assert lazy and not set(lazy) & set(vars(oa)), 'lazy names bound at import'\n"
        "for name in lazy:\n"
        "    assert getattr(oa, name) is not None, name\n"
        "assert dir(oa) == sorted(oa.__all__)\n"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=300)


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    import outre_async

    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = outre_async.not_a_name  # type: ignore[attr-defined]


def test_error_classes_moved_to_errors_name_their_new_home() -> None:
    """The top level keeps the base and the few errors a user catches; every other class is in
    ``outre_async.errors``, and the old spelling is a one-line AttributeError that names the new one."""
    import outre_async
    from outre_async import errors

    assert errors.OutreError is outre_async.OutreError
    moved = sorted(set(errors.__all__) - set(outre_async.__all__))
    assert "PipelineClosed" in moved and "DatasetNotFoundError" in moved
    for name in moved:
        with pytest.raises(AttributeError, match=rf"outre_async\.{name} moved: .*outre_async\.errors import {name}"):
            getattr(outre_async, name)
