"""What ``LinkNeighborLoader`` users pass (``edge_label_index``, ``edge_label``, ``neg_sampling``),
checked once into a :class:`LinkInput` the loader plans edge batches from (``_edge_items``).

``edge_label_index`` is a ``[2, E]`` integer array or tensor of node pairs, or the name of an edge
split of the dataset (``oa.split_edges``): ``"train"``, or ``"val"`` / ``"test"``, which bring their
stored negatives (``val_neg``, ``test_neg``) as pairs labelled 0 (positives 1) when no
``neg_sampling`` is given.  ``neg_sampling`` is PyG's ``NegativeSampling``, a mode string or a
``{"mode", "amount", "sampler", "degree_fraction"}`` dict (the sampler, ``uniform`` as PyG,
``degree`` or ``resident``: ``sampling._negatives``); ``neg_sampling_ratio`` (PyG's older name) is binary sampling of that
amount.  As PyG's ``LinkLoader``, 0-based labels are shifted by one in binary mode (0 = negative)
and a triplet mode with an ``edge_label`` is refused; an all-pairs candidate set is an
:class:`AllPairsError` pointing to ``oa.evaluate_links``.  What this version does not offer
(partitions, history, a profile, a partition-ordered copy, weighted negatives) is a
:class:`NotSupportedError` naming it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import AllPairsError, ConfigError, NotSupportedError
from ..sampling._negatives import SAMPLERS, NegativeSpec
from ..store._dataset import Dataset
from ._config import LoaderConfig

_MODES = ("binary", "triplet")


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkInput:
    """The supervision pairs (``[2, E]`` int64), their labels (or None) and the negatives (or None)."""

    pairs: np.ndarray
    labels: np.ndarray | None
    negatives: NegativeSpec | None
    name: str | None = None  # the edge split's name, when one was named


def link_input(ds: Dataset, cfg: LoaderConfig, edge_label_index: Any, edge_label: Any,
               neg_sampling: Any, neg_sampling_ratio: Any) -> LinkInput | None:
    """The checked link input, or None when none of the link keywords was given (then the loader's
    modes edge batches do not have yet are refused: ``check_link_config``)."""
    links = _link_input(ds, edge_label_index, edge_label, neg_sampling, neg_sampling_ratio)
    if links is not None:
        check_link_config(cfg, other_copy=cfg.layout not in ("auto", "original"))
    return links


def _link_input(ds: Dataset, edge_label_index: Any, edge_label: Any, neg_sampling: Any,
                neg_sampling_ratio: Any) -> LinkInput | None:
    if neg_sampling_ratio is not None and neg_sampling_ratio != 0.0:
        if neg_sampling is not None:
            raise ConfigError("pass neg_sampling= or neg_sampling_ratio= (PyG's older name for binary sampling), not both")
        neg_sampling = {"mode": "binary", "amount": neg_sampling_ratio}
    if edge_label_index is None:
        if edge_label is not None or neg_sampling is not None:
            raise ConfigError("edge_label= and neg_sampling= go with edge_label_index= (the pairs to supervise, "
                              "or an edge split name such as 'train')")
        return None
    negatives = _negatives(neg_sampling)
    name = edge_label_index if isinstance(edge_label_index, str) else None
    if name is not None:
        pairs, stored = _named_pairs(ds, name, negatives is None and edge_label is None)
        if stored is not None:
            return LinkInput(pairs=pairs, labels=stored, negatives=None, name=name)
    else:
        pairs = _pairs(edge_label_index, ds.num_nodes)
        check_not_all_pairs(pairs, ds.num_nodes, ds.num_edges)
    labels = None if edge_label is None else _labels(edge_label, pairs.shape[1])
    if negatives is not None and negatives.mode == "triplet" and labels is not None:
        raise ConfigError("edge_label must be None with neg_sampling='triplet' (as in PyG): a batch's "
                          "src_index, dst_pos_index and dst_neg_index tell positives from negatives")
    if negatives is not None and negatives.mode == "binary" and labels is not None and labels.size and labels.min() == 0:
        labels = labels + 1  # as PyG's LinkLoader: 0 now means "negative"
    return LinkInput(pairs=pairs, labels=labels, negatives=negatives, name=name)


def check_link_config(cfg: LoaderConfig, *, other_copy: bool) -> None:
    """Refuse the loader modes edge batches do not have yet (this first version: plain batches)."""
    for knob, given in (("partitions", cfg.partitions is not None), ("history", cfg.history is not None),
                        ("profile", cfg.profile is not None), ("layout", other_copy)):
        if given:
            raise NotSupportedError(f"edge batches (edge_label_index=) with {knob}= are not supported yet: they "
                                    f"run in plain mode only; leave {knob}= out for link prediction")


def _negatives(neg_sampling: Any) -> NegativeSpec | None:
    if neg_sampling is None:
        return None
    if isinstance(neg_sampling, str):
        mode, amount = neg_sampling, 1
        sampler, fraction = "uniform", 0.0
    elif isinstance(neg_sampling, dict):
        unknown = set(neg_sampling) - {"mode", "amount", "sampler", "degree_fraction"}
        if unknown or "mode" not in neg_sampling:
            raise ConfigError(f"neg_sampling as a dict takes 'mode', 'amount', 'sampler' and 'degree_fraction', got "
                              f"keys {sorted(neg_sampling)}")
        mode, amount = neg_sampling["mode"], neg_sampling.get("amount", 1)
        sampler, fraction = neg_sampling.get("sampler", "uniform"), neg_sampling.get("degree_fraction", 0.0)
    elif hasattr(neg_sampling, "mode") and hasattr(neg_sampling, "amount"):  # PyG's NegativeSampling
        if getattr(neg_sampling, "src_weight", None) is not None or getattr(neg_sampling, "dst_weight", None) is not None:
            raise NotSupportedError("weighted negatives (NegativeSampling src_weight/dst_weight) are not supported yet: "
                                    "negatives are drawn uniformly; leave the weights out")
        mode, amount = getattr(neg_sampling.mode, "value", neg_sampling.mode), neg_sampling.amount
        sampler, fraction = "uniform", 0.0
    else:
        raise ConfigError(f"neg_sampling must be a NegativeSampling, 'binary', 'triplet' or a dict, "
                          f"got {type(neg_sampling).__name__}")
    if mode not in _MODES:
        raise ConfigError(f"neg_sampling mode must be one of {_MODES}, got {mode!r}")
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real) or not math.isfinite(amount) or amount <= 0:
        raise ConfigError(f"neg_sampling amount={amount!r} must be a positive number (negatives per positive pair)")
    if mode == "triplet" and amount != math.ceil(amount):
        raise ConfigError(f"neg_sampling amount={amount!r} must be an integer for 'triplet' (negative "
                          "destinations per positive pair)")
    if sampler not in SAMPLERS:
        raise ConfigError(f"neg_sampling sampler must be one of {SAMPLERS}, got {sampler!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 <= fraction <= 1:
        raise ConfigError(f"neg_sampling degree_fraction={fraction!r} must be a number in [0, 1] (the share of "
                          "negatives drawn by degree)")
    if sampler == "degree" and fraction:
        raise ConfigError(f"neg_sampling degree_fraction={fraction!r} goes with sampler 'uniform' or 'resident'; "
                          "sampler 'degree' draws every negative by degree")
    return NegativeSpec(mode=mode, amount=int(amount) if mode == "triplet" else float(amount), sampler=sampler,
                        degree_fraction=float(fraction))


def _named_pairs(ds: Dataset, name: str, with_stored: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """An edge split's pairs; for val/test with stored negatives (and nothing else asked), the pairs
    with the negatives appended and their 1/0 labels."""
    pairs = ds.edge_split(name)
    neg = f"{name}_neg"
    if not with_stored or neg not in ds.edge_split_names:
        return pairs, None
    negs = ds.edge_split(neg)
    labels = np.concatenate([np.ones(pairs.shape[1], np.float32), np.zeros(negs.shape[1], np.float32)])
    return np.concatenate([pairs, negs], axis=1), labels


def _as_array(value: Any) -> np.ndarray:
    detach = getattr(value, "detach", None)
    if callable(detach):
        value = detach().cpu().numpy()
    return np.asarray(value)


def _pairs(value: Any, num_nodes: int) -> np.ndarray:
    pairs = _as_array(value)
    if pairs.ndim != 2 or pairs.shape[0] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise ConfigError(f"edge_label_index must be integer node pairs of shape [2, E], got {pairs.dtype} "
                          f"{list(pairs.shape)}; pass e.g. torch.stack([src, dst]) or an edge split name")
    if pairs.shape[1] == 0:
        raise ConfigError("edge_label_index holds no pairs; pass at least one [2, E] pair")
    pairs = pairs.astype(np.int64)
    if pairs.min() < 0 or pairs.max() >= num_nodes:
        bad = int(pairs.min()) if pairs.min() < 0 else int(pairs.max())
        raise ConfigError(f"edge_label_index holds node {bad}, outside [0, {num_nodes}); pass node ids of this dataset")
    return pairs


ALL_PAIRS_FACTOR = 16   # more supervision pairs than this many times max(edges, nodes): a candidate set
CARTESIAN_MIN = 1024    # a full cartesian product of at least this many pairs: a candidate set


def check_not_all_pairs(pairs: np.ndarray, num_nodes: int, num_edges: int) -> None:
    """Refuse an all-pairs candidate set (:class:`AllPairsError`): more than ``ALL_PAIRS_FACTOR`` x
    ``max(edges, nodes)`` pairs, or every (source, destination) of two sets of at least two nodes each.
    Counting the distinct endpoints is O(pairs + nodes) (bincount); the distinct pairs are only counted
    when the endpoint counts allow a product."""
    p, limit = pairs.shape[1], ALL_PAIRS_FACTOR * max(num_edges, num_nodes)
    fix = "rank candidates with oa.evaluate_links(model, ds, split=..., candidates=100 | 'all') instead of a loader"
    if p > limit:
        raise AllPairsError(f"edge_label_index holds {p:,} pairs, more than {ALL_PAIRS_FACTOR} x the graph's "
                            f"{max(num_edges, num_nodes):,} edges or nodes: an all-pairs candidate set; {fix}")
    if p < CARTESIAN_MIN:
        return
    a = int(np.count_nonzero(np.bincount(pairs[0], minlength=num_nodes)))
    b = int(np.count_nonzero(np.bincount(pairs[1], minlength=num_nodes)))
    if a > 1 and b > 1 and a * b <= p and len(np.unique(pairs[0] * num_nodes + pairs[1])) == a * b:
        raise AllPairsError(f"edge_label_index holds all {a * b:,} pairs of {a:,} sources x {b:,} destinations: an "
                            f"all-pairs candidate set; {fix}")


def _labels(value: Any, num_pairs: int) -> np.ndarray:
    labels = _as_array(value)
    if labels.ndim < 1 or labels.shape[0] != num_pairs:
        raise ConfigError(f"edge_label has {labels.shape[0] if labels.ndim else 'no'} entries for {num_pairs} pairs "
                          "in edge_label_index; pass one label per pair")
    if labels.dtype == np.bool_ or not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.floating)):
        raise ConfigError(f"edge_label must be numbers (int or float), got {labels.dtype}")
    return labels
