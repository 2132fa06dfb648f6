"""Per-edge inputs the store cannot keep yet: refused by name instead of dropped without a word.

A dataset stores topology (CSC), node features, labels and node splits.  Edge features and weights
(``edge_attr``, ``edge_weight``, ``edge_type``) would need an array per edge carried in CSC order
through the external edge sort, and merged under ``--dedupe`` / ``--undirected``; link-prediction
targets (``edge_label``, ``edge_label_index``) need an edge sampler.  Neither exists yet, so an input
that has them is a :class:`NotSupportedError` unless the caller asks to drop them
(``drop_edge_features=True``, ``outre convert --drop-edge-features``): then the drop is explicit.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import NotSupportedError

EDGE_KEYS = ("edge_attr", "edge_weight", "edge_type", "edge_label", "edge_label_index")
LINK_KEYS = ("edge_label", "edge_label_index")


def check_edge_features(keys: Iterable[str], description: str, *, drop: bool) -> None:
    """Refuse (unless ``drop``) an input whose ``keys`` name per-edge data other than ``edge_index``."""
    found = sorted(set(keys) - {"edge_index"})
    if not found or drop:
        return
    if set(found) <= set(LINK_KEYS):
        raise NotSupportedError(f"{description} holds link-prediction targets {found}: link prediction is not "
                                "supported yet; pass drop_edge_features=True (--drop-edge-features) to convert the graph without them")
    raise NotSupportedError(f"{description} holds per-edge data {found}, which outre-async does not store yet; pass "
                            "drop_edge_features=True (--drop-edge-features) to convert the topology without it")
