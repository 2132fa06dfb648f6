"""``oa.evaluate_links`` equals a brute-force ranking of the same pairs (MRR, hits@K, AUC), chunked
scoring equals unchunked, and its bad input is a named one-line error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.errors import ConfigError
from outre_async.links._candidates import Candidates


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(5)
    n = 150
    indptr, indices = random_graph(rng, n, 9)
    root = Path(tmp_path_factory.mktemp("links"))
    ds = write_store(root / "g", indptr, indices, features=rng.standard_normal((n, 6)).astype(np.float32))
    return oa.open_dataset(oa.split_edges(ds, root / "s", val=0.1, test=0.2, seed=0, eval_negatives=7,
                                          undirected=False))


@pytest.fixture(scope="module")
def encoder() -> torch.nn.Module:
    torch.manual_seed(0)
    return oa.GraphSAGE(6, 8, 2, 8)


def _brute(pos: torch.Tensor, neg: torch.Tensor, ks: tuple[int, ...] = (1, 10)) -> dict[str, float]:
    """OGB's ranks from the full [Q, c] score matrix, and the AUC of all pairs of (positive, negative)."""
    above = (neg > pos[:, None]).sum(1).double()
    at_least = (neg >= pos[:, None]).sum(1).double()
    rank = 1 + 0.5 * (above + at_least)
    flat = neg.reshape(-1)
    auc = ((pos[:, None] > flat[None, :]).double() + 0.5 * (pos[:, None] == flat[None, :]).double()).mean()
    return {"mrr": float((1 / rank).mean()), "auc": float(auc), **{f"hits@{k}": float((rank <= k).double().mean()) for k in ks}}


METRICS = ("mrr", "hits@1", "hits@10", "auc")


def test_stored_negatives_equal_brute_force(links, encoder) -> None:
    h = oa.inference(encoder, links, backend="memory")
    test, neg = torch.from_numpy(links.edge_split("test")), torch.from_numpy(links.edge_split("test_neg"))
    pos = (h[test[0]] * h[test[1]]).sum(-1)
    negs = (h[neg[0]] * h[neg[1]]).sum(-1).reshape(test.shape[1], 7)[:, :5]  # query i owns pairs 7i .. 7i+6
    got = oa.evaluate_links(encoder, links, candidates=5, metrics=METRICS, backend="memory")
    assert got["negatives"] == "stored" and got["candidates"] == 5 and got["queries"] == test.shape[1]
    for name, want in _brute(pos, negs).items():
        assert got[name] == pytest.approx(want, abs=1e-9), name


def test_all_candidates_equal_brute_force_and_chunks_do_not_matter(links, encoder) -> None:
    h = oa.inference(encoder, links, backend="memory")
    test = torch.from_numpy(links.edge_split("test"))
    scores = h[test[0]] @ h.T                                      # [Q, N]: every node
    keep = torch.ones_like(scores, dtype=torch.bool)
    keep[torch.arange(test.shape[1]), test[1]] = False             # but the true destination
    pos = scores[torch.arange(test.shape[1]), test[1]]
    want = _brute(pos, scores[keep].reshape(test.shape[1], -1))
    for chunk in (1 << 16, 37, 1):                                 # a block of queries, a piece of a row, one pair
        got = oa.evaluate_links(h, links, candidates="all", metrics=METRICS, chunk_pairs=chunk)
        assert got["candidates"] == links.num_nodes - 1
        for name, value in want.items():
            assert got[name] == pytest.approx(value, abs=1e-6), (chunk, name)


def test_uniform_candidates_are_seeded_and_chunk_free(links, encoder) -> None:
    h = oa.inference(encoder, links, backend="memory")
    runs = [oa.evaluate_links(h, links, candidates=30, negatives="uniform", seed=s, chunk_pairs=c)
            for s, c in ((1, 1 << 16), (1, 7), (2, 1 << 16))]
    assert runs[0]["negatives"] == "uniform" and runs[0] == runs[1]
    assert runs[0] != runs[2]
    # "auto" draws uniform candidates when the store holds fewer than asked (7 per pair here)
    assert oa.evaluate_links(h, links, candidates=30, seed=1) == runs[0]
    # the drawn candidates are the query's source against nodes spread over the whole range
    source = Candidates(kind="uniform", per_query=30, queries=links.edge_split("test"), num_nodes=links.num_nodes, seed=1)
    src, dst = source.block(np.arange(4), 0, 30)
    np.testing.assert_array_equal(src, np.repeat(links.edge_split("test")[0, :4, None], 30, axis=1))
    assert dst.min() >= 0 and dst.max() < links.num_nodes and len(np.unique(dst)) > 60
    np.testing.assert_array_equal(source.block(np.arange(2, 4), 10, 30)[1], dst[2:4, 10:30])


def test_a_given_decoder_scores_the_pairs(links) -> None:
    h = torch.randn(links.num_nodes, 4, generator=torch.Generator().manual_seed(0))
    def neg_l2(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return -(a - b).norm(dim=-1)
    test, neg = torch.from_numpy(links.edge_split("val")), torch.from_numpy(links.edge_split("val_neg"))
    want = _brute(neg_l2(h[test[0]], h[test[1]]), neg_l2(h[neg[0]], h[neg[1]]).reshape(test.shape[1], 7))
    got = oa.evaluate_links(h, links, split="val", candidates=7, decoder=neg_l2, negatives="stored")
    assert got["mrr"] == pytest.approx(want["mrr"]) and got["auc"] == pytest.approx(want["auc"])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(metrics=("mrr", "hits@0")), r"metrics must name mrr, auc or hits@K .*'hits@0'"),
    (dict(candidates=0), r"candidates=0 must be an int >= 1 or 'all'"),
    (dict(candidates=8, negatives="stored"), r"needs 8 stored negatives per 'test' pair, test_neg holds .*eval_negatives=8"),
    (dict(candidates="all", negatives="stored"), r"candidates='all' ranks against every node"),
    (dict(chunk_pairs=0), r"chunk_pairs=0 must be an int >= 1"),
    (dict(negatives="hard"), r"negatives must be one of"),
])
def test_bad_input_is_a_named_error(links, kwargs, match) -> None:
    h = torch.zeros(links.num_nodes, 2)
    with pytest.raises(ConfigError, match=match):
        oa.evaluate_links(h, links, **kwargs)


def test_embeddings_of_another_graph_and_a_bad_decoder_are_named(links) -> None:
    with pytest.raises(ConfigError, match=r"embeddings must be a float tensor \[num_nodes=150, D\], got .* \[3, 2\]"):
        oa.evaluate_links(torch.zeros(3, 2), links)
    with pytest.raises(ConfigError, match=r"decoder returned 1 scores for \d+ pairs"):
        oa.evaluate_links(torch.zeros(links.num_nodes, 2), links, decoder=lambda a, b: (a * b).sum())


def test_the_decoder_never_sees_more_than_chunk_pairs(links) -> None:
    """Memory does not grow with the candidates: every decoder call scores at most ``chunk_pairs``
    pairs, whether a block holds many queries (30 candidates) or a piece of one (all 149)."""
    h = torch.randn(links.num_nodes, 4, generator=torch.Generator().manual_seed(1))
    sizes: list[int] = []

    def recording(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        sizes.append(len(a))
        return (a * b).sum(-1)

    for candidates in (30, "all"):
        sizes.clear()
        got = oa.evaluate_links(h, links, candidates=candidates, decoder=recording, negatives="uniform", chunk_pairs=64)
        assert max(sizes) <= 64 and sum(sizes) == got["queries"] * (1 + got["candidates"])
