"""Batch items: the plain plan's items carry their ``input_id``, and no module outside
``outre_async/sampling/`` tells what a planned batch is by its type or its attributes (a source scan, like
the public-surface pin): every stage reads ``item.seeds``, ``item.targets`` and ``item.macro``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import outre_async as oa
from outre_async.sampling import BatchItem, NodeTargets, SeedItems, plan_epoch

ROOT = Path(__file__).resolve().parents[2]
ITEM_TYPES = {"BatchItem", "MacroRef", "NodeTargets", "MicroBatch", "SeedItems"}
ITEM_FIELDS = {"seeds", "targets", "macro", "input_id", "parts"}


def item_guesses(root: Path) -> list[str]:
    """``path:line`` of every ``isinstance``/``issubclass`` against a batch item's type and every
    ``getattr``/``hasattr`` of a batch item's field by name, in the package's modules outside
    ``outre_async/sampling/`` (``partition/`` and ``cache/`` are installed inside the package)."""
    files = [p for folder in ("outre_async", "partition", "cache") for p in sorted((root / folder).rglob("*.py"))]
    found = []
    for path in files:
        if path.is_relative_to(root / "outre_async" / "sampling"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2):
                continue
            what = node.args[1]
            if node.func.id in ("isinstance", "issubclass"):
                names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(what)
                         if isinstance(n, ast.Name | ast.Attribute)}
                guessed = bool(names & ITEM_TYPES)
            elif node.func.id in ("getattr", "hasattr"):
                guessed = isinstance(what, ast.Constant) and what.value in ITEM_FIELDS
            else:
                continue
            if guessed:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_outside_sampling_guesses_a_batch_item_s_kind() -> None:
    assert item_guesses(ROOT) == []


def test_the_scan_finds_a_guess(tmp_path: Path) -> None:
    module = tmp_path / "outre_async" / "loader" / "_guess.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f(item, MicroBatch):\n    s = getattr(item, 'seeds', item)\n"
                      "    return isinstance(item, MicroBatch), s\n")
    (tmp_path / "outre_async" / "sampling").mkdir()
    (tmp_path / "outre_async" / "sampling" / "_ok.py").write_text("def g(x):\n    return getattr(x, 'seeds', x)\n")
    assert item_guesses(tmp_path) == ["outre_async/loader/_guess.py:2", "outre_async/loader/_guess.py:3"]


@pytest.mark.parametrize("world", [1, 3])
@pytest.mark.parametrize(("shuffle", "drop_last"), [(True, False), (False, True)])
def test_seed_items_are_plan_epoch_s_batches_with_their_positions(world: int, shuffle: bool, drop_last: bool) -> None:
    seeds = np.random.default_rng(1).permutation(1000)[:777].astype(np.int64)  # unsorted ids
    for rank in range(world):
        items = SeedItems(seeds=seeds, batch_size=50, shuffle=shuffle, seed=4, drop_last=drop_last, rank=rank,
                          world_size=world)
        want = plan_epoch(seeds, 50, shuffle=shuffle, seed=4, epoch=3, drop_last=drop_last, rank=rank, world_size=world)
        got = items.plan(3)
        assert len(got) == len(want) == items.num_batches(3) and items.max_seeds == 50
        for item, batch in zip(got, want, strict=True):
            np.testing.assert_array_equal(item.seeds, batch)
            np.testing.assert_array_equal(seeds[item.targets.input_id], item.seeds)
            assert item.macro is None and len(item) == len(batch)


def test_items_are_frozen() -> None:
    item = BatchItem(seeds=np.arange(3), targets=NodeTargets(input_id=np.arange(3)))
    with pytest.raises(AttributeError):
        item.seeds = np.arange(2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        BatchItem(np.arange(3), NodeTargets(input_id=np.arange(3)))  # type: ignore[misc]  # keywords only


def test_shard_refuses_an_already_sharded_item() -> None:
    from outre_async.partition._batches import shard_partition_plan

    plain = BatchItem(seeds=np.arange(3), targets=NodeTargets(input_id=np.arange(3)))
    with pytest.raises(oa.ConfigError, match="got an item of plain seeds"):
        shard_partition_plan([plain], rank=0, world_size=2, drop_last=False)
