"""``memory_budget=None`` is the default budget (issue 40 "memory that surprises"): what the dataset can use,
at most a quarter of the memory available, never below the loader's floor; explicit budgets plan as before."""

from __future__ import annotations

import math

import pytest
from conftest import labelled_store

import outre_async as oa
from outre_async.loader._auto_budget import AUTO_SHARE, PLAN_SHARES, auto_budget

MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("auto") / "ds")


def test_a_dataset_that_fits_gets_what_it_can_use() -> None:
    """Facebook Page-Page's figures, rounded: a 460 MiB floor, 405 MiB of features, 550 MiB more batches."""
    auto = auto_budget(floor=460 * MiB, features=400 * MiB, batches=550 * MiB, available=20 * GiB)
    assert auto.bytes == math.ceil(1410 * MiB / (1 - PLAN_SHARES)) == 1_572_864_000
    assert auto.describe().startswith("auto (1.5 GiB: what the dataset can use") and "1/4 of the 20.0 GiB" in auto.why


def test_a_small_machine_caps_it_at_a_quarter_of_what_is_available() -> None:
    auto = auto_budget(floor=460 * MiB, features=400 * MiB, batches=550 * MiB, available=4 * GiB)
    assert auto.bytes == int(AUTO_SHARE * 4 * GiB) == GiB
    assert auto.why == "1/4 of the 4.0 GiB available (1.0 GiB); the dataset could use 1.5 GiB"


def test_ranks_on_one_host_split_the_machine_share() -> None:
    auto = auto_budget(floor=10 * MiB, features=4 * GiB, batches=0, available=16 * GiB, ranks=4)
    assert auto.bytes == GiB and "over 4 ranks" in auto.why


def test_never_below_the_floor() -> None:
    auto = auto_budget(floor=2 * GiB, features=GiB, batches=0, available=4 * GiB)
    assert auto.bytes == 2 * GiB and auto.why.startswith("the loader's minimum")


def test_what_the_plan_spent_past_the_floor_is_added() -> None:
    base = auto_budget(floor=100 * MiB, features=100 * MiB, batches=0, available=64 * GiB)
    assert auto_budget(floor=100 * MiB, features=100 * MiB, batches=0, available=64 * GiB, over=7).bytes == base.bytes + 7


def test_repr_and_stats_say_auto_and_why(dataset: oa.Dataset) -> None:
    loader = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16)
    assert loader.auto_budget is not None
    assert f"memory_budget=auto ({loader.auto_budget.describe()[6:]}" in repr(loader)
    assert "what the dataset can use" in repr(loader)
    memory = loader.stats()["memory"]
    assert memory["budget"] == loader.auto_budget.bytes >= loader.memory.total
    assert memory["budget_auto"] == loader.auto_budget.describe()


def test_the_default_buffer_holds_every_row_where_the_machine_allows(dataset: oa.Dataset) -> None:
    loader = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, io=oa.IOOptions(backend="pread"))
    assert loader.memory.buffer_rows == dataset.num_nodes


def test_the_machine_share_bounds_the_default(dataset: oa.Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with little memory left: the default budget is a quarter of it, and the plan fits in it."""
    roomy = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, io=oa.IOOptions(backend="pread")).auto_budget
    assert roomy is not None
    share = roomy.bytes - 100_000  # above the floor (2.8 MB), below what the dataset can use (3.0 MB)
    monkeypatch.setattr("outre_async.loader._loader.available_memory", lambda: 4 * share)
    loader = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, io=oa.IOOptions(backend="pread"))
    assert loader.auto_budget is not None and loader.auto_budget.bytes == share
    assert loader.auto_budget.why.startswith("1/4 of the") and loader.memory.total <= share


@pytest.mark.parametrize("budget", ["6MiB", "64MiB"])
def test_an_explicit_budget_is_not_the_auto_rule(dataset: oa.Dataset, budget: str) -> None:
    loader = oa.OutreLoader(dataset, fanouts=[3, 2], batch_size=16, memory_budget=budget)
    assert loader.auto_budget is None and loader.stats()["memory"]["budget_auto"] is None
    assert f"memory_budget={budget[:-3]}.0 MiB" in repr(loader)
