"""Plans and counts the machine cannot hold are refused at construction (issue 34 "unbounded":
``num_extractors=10**6`` was accepted and planned 135 TB): every count knob has an upper bound, and a
memory plan larger than the host memory available now is a ConfigError naming both figures; a
``partitions=`` name that is a path is refused as a profile name is (issue 34 "foreign")."""

from __future__ import annotations

import pytest
from conftest import labelled_store

import outre_async as oa
from outre_async.loader._budget import MemoryPlan, Sizes, check_fits_machine
from outre_async.loader._config import AT_MOST
from outre_async.store import RowFormat
from outre_async.loader import LoaderConfig


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("bounds") / "ds")


@pytest.mark.parametrize("name", sorted(AT_MOST))
def test_every_count_knob_has_an_upper_bound(name: str) -> None:
    most = AT_MOST[name]
    assert getattr(LoaderConfig(fanouts=[3], batch_size=8, **{name: most}), name) == most
    with pytest.raises(oa.ConfigError, match=rf"^{name}={most + 1} is more than {most}, the most a loader takes") as err:
        LoaderConfig(fanouts=[3], batch_size=8, **{name: most + 1})
    assert "\n" not in str(err.value)


def test_the_issue_repro_is_refused_by_name(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="num_extractors=1000000 is more than 1024"):
        oa.OutreLoader(dataset, fanouts=[3, 3], batch_size=64, pipeline=oa.PipelineOptions(num_extractors=10**6))


def test_a_plan_larger_than_the_available_memory_is_refused_at_construction(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match=r"this loader plans \d+ bytes \(1024\.0 TiB\) of host memory, more than the "
                                             r"\d+ .* available to this process now") as err:
        oa.OutreLoader(dataset, fanouts=[3, 3], batch_size=64, memory_budget=2**50, io=oa.IOOptions(backend="memory"))
    assert "memory_budget" in str(err.value) and "\n" not in str(err.value)


def test_check_fits_machine_compares_the_plan_total_with_what_is_available() -> None:
    plan = MemoryPlan(buffer_rows=10, stage_bytes=0, parts={"feature buffer": 1000, "batches": 500})
    sizes = Sizes(num_nodes=100, format=RowFormat.float32(4), stride=16, max_rows=20, max_edges=30)
    check_fits_machine(plan, sizes, 1500)  # exactly fits
    with pytest.raises(oa.ConfigError, match=r"plans 1500 bytes .* more than the 1499 "):
        check_fits_machine(plan, sizes, 1499)


@pytest.mark.parametrize("name", ["../../etc", "/etc", ".hidden", "a/b", "x\x00y", " pad"])
def test_a_partition_name_that_is_a_path_is_a_named_config_error(dataset: oa.Dataset, name: str) -> None:
    """Issue 34 "foreign": ``partitions="../../etc"`` gave a bare ValueError; the profile name's rule now."""
    with pytest.raises(oa.ConfigError, match=r"partition name .* must be a plain folder name"):
        oa.OutreLoader(dataset, fanouts=[3], batch_size=8, partitions=name, io=oa.IOOptions(backend="memory"))
    with pytest.raises(oa.ConfigError, match=r"partition name .* must be a plain folder name"):
        LoaderConfig(fanouts=[3], batch_size=8, partitions=name)


def test_a_partition_name_of_another_type_is_a_named_config_error() -> None:
    with pytest.raises(oa.ConfigError, match=r"partitions=3 must be the name of a partition folder \(a str\), got int"):
        LoaderConfig(fanouts=[3], batch_size=8, partitions=3)  # type: ignore[arg-type]


def test_a_buffer_below_one_batch_warns_by_name_where_the_loader_is_made(dataset: oa.Dataset) -> None:
    """Issue 34 "cliff": ``buffer_rows=1`` is correct but ~130x slower, and said nothing."""
    with pytest.warns(oa.SmallBufferWarning, match=r"^buffer_rows=1 is below the \d+ rows one batch is expected to read") as seen:
        loader = oa.OutreLoader(dataset, fanouts=[3, 3], batch_size=64, cache=oa.CacheOptions(buffer_rows=1), io=oa.IOOptions(backend="memory"))
    assert len(seen) == 1 and seen[0].filename == __file__  # points at the caller's line
    assert loader.buffer_rows == 1  # a warning, not a floor: the size asked for is kept
    oa.OutreLoader(dataset, fanouts=[3, 3], batch_size=64, cache=oa.CacheOptions(buffer_rows=600), io=oa.IOOptions(backend="memory"))  # no warning (errors here)
    oa.OutreLoader(dataset, fanouts=[3, 3], batch_size=64, io=oa.IOOptions(backend="memory"))
