"""Layer-wise inference keeps a chunk inside ``memory_budget`` (issue 40: 3.9 GB on Facebook Page-Page):
wide layers get smaller chunks, the result is the same."""

from __future__ import annotations

import torch
from conftest import labelled_store

import outre_async as oa
from outre_async.layerwise import _layerwise
from outre_async.layerwise._chunk_budget import chunk_limits, layer_width


def test_a_wide_layer_gets_chunks_that_fit_the_budget() -> None:
    """Facebook's first layer, 4,714 floats wide, in a 1.5 GiB budget: 14,224 edges a chunk (2.4 GB was ~125 k)."""
    assert chunk_limits(4714, 1536 << 20, 8192, 1 << 20) == (8192, 14224)
    nodes, edges = chunk_limits(4714, 1536 << 20, 8192, 1 << 20)
    assert (nodes + edges) * (12 * 4714 + 48) <= 1536 << 20
    assert chunk_limits(16, 1536 << 20, 8192, 1 << 20) == (8192, 1 << 20)  # narrow: the caller's sizes
    assert chunk_limits(4714, 1000, 8192, 1 << 20) == (1, 1)  # never below one


def test_layer_width_is_the_wider_of_input_and_output() -> None:
    assert layer_width(torch.nn.Linear(3, 5), 3) == 3  # no out_channels: the input's
    conv = oa.GAT(8, 16, 2, 4, heads=4).convs[0]
    assert layer_width(conv, 8) == 16  # 4 heads x 4 channels, concatenated


def test_a_small_budget_cuts_more_chunks_and_gives_the_same_output(tmp_path, monkeypatch) -> None:
    ds = labelled_store(tmp_path / "ds")
    torch.manual_seed(0)
    model = oa.GraphSAGE(ds.feature_dim, 16, 2, ds.num_classes)
    whole = oa.inference(model, ds, backend="pread")
    seen: list[tuple[int, int]] = []
    real = _layerwise.chunk_bounds

    def counted(indptr, nodes, edges):
        seen.append((nodes, edges))
        return real(indptr, nodes, edges)

    monkeypatch.setattr(_layerwise, "chunk_bounds", counted)
    tight = oa.inference(model, ds, backend="pread", memory_budget=40_000)
    assert seen[0][0] < 8192 and seen[0] == chunk_limits(ds.feature_dim, 40_000, 8192, 1 << 20)
    assert torch.allclose(whole, tight, atol=1e-5)
