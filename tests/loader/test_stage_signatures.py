"""The stages' worker signatures, pinned: a sample worker's ten knobs are passed by name (the RNG
stream of a batch is one callable, ``EpochParts.stream``, not two ints that would swap silently by
position), and the extract worker's
flag says what it means: delivery may hold a batch back (plan order or history's window), not only
``ordered=True``.  The tiers' helpers take the dataset and config types, not ``Any``."""

from __future__ import annotations

import inspect
import typing

from outre_async.loader import _tiers
from outre_async.loader._config import LoaderConfig
from outre_async.loader._extract_stage import ExtractStage
from outre_async.loader._sample_stage import SampleStage
from outre_async.store._dataset import Dataset


def test_a_sample_worker_takes_everything_but_its_sampler_by_keyword() -> None:
    params = list(inspect.signature(SampleStage.worker).parameters.values())[1:]  # less self
    assert params[0].name == "sampler" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert len(params) == 10 and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])


def test_the_extract_worker_s_flag_is_named_for_holding_back() -> None:
    params = inspect.signature(ExtractStage.worker).parameters
    assert "holds_back" in params and "ordered" not in params
    assert params["holds_back"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_tiers_take_a_dataset_and_a_config_not_any() -> None:
    for fn in (_tiers.gpu_rows, _tiers.gpu_cache, _tiers.plan_row_counts, _tiers.static_cache, _tiers.tier_caches):
        hints = typing.get_type_hints(fn)
        assert typing.Any not in hints.values(), f"{fn.__name__} takes Any: {hints}"
    assert typing.get_type_hints(_tiers.gpu_rows)["ds"] is Dataset
    assert typing.get_type_hints(_tiers.tier_caches)["run_cfg"] is LoaderConfig
