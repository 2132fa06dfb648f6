"""Importers and the external edge sort against a plain numpy reference CSC, and every bad input."""

from __future__ import annotations

import gzip
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import outre_async as oa
from outre_async.ingest import _arrays, _convert, _text_parsing
from outre_async.ingest._convert_kernels import (
    parse_int_column,
    parse_int_pairs,
    scatter_by_bucket,
    sort_segments,
)
from outre_async.ingest._csc_builder import CSCBuilder, plan_buckets

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


# -- reference -------------------------------------------------------------------------------------


def reference_csc(
    src: np.ndarray,
    dst: np.ndarray,
    n: int,
    *,
    undirected: bool = False,
    drop_self_loops: bool = False,
    dedupe: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The CSC the importers must produce, built in memory with lexsort."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if drop_self_loops:
        src, dst = src[src != dst], dst[src != dst]
    if undirected:
        loops = src == dst
        src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    if dedupe and len(src):
        keep = np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
        src, dst = src[keep], dst[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(dst, minlength=n))
    return indptr, src


def assert_topology(
    path: Path, src: np.ndarray, dst: np.ndarray, n: int, **opts: bool
) -> oa.Dataset:
    ds = oa.open_dataset(path)
    indptr, indices = reference_csc(src, dst, n, **opts)
    assert ds.num_nodes == n
    np.testing.assert_array_equal(ds.indptr, indptr)
    np.testing.assert_array_equal(ds.indices, indices)
    ds.verify()
    return ds


def random_edges(n: int = 60, e: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dst = np.minimum((n * rng.random(e) ** 2).astype(np.int64), n - 1)  # skewed in-degrees
    return rng.integers(0, n, e), dst


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def pyg_data(**attrs: object) -> object:
    """A PyG ``Data`` (importing torch_geometric in a test trips a torch.jit DeprecationWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from torch_geometric.data import Data
    return Data(**attrs)


def write_text(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


# -- in-memory arrays and PyG ----------------------------------------------------------------------


@pytest.mark.parametrize("as_torch", [False, True])
def test_write_dataset_round_trip(tmp_path: Path, as_torch: bool) -> None:
    src, dst = random_edges()
    n = 60
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 13)).astype(np.float32)
    y = rng.integers(-1, 4, n)
    splits = {
        "train_idx": np.arange(0, 30),
        "val_idx": np.arange(30, 45),
        "test_idx": np.arange(45, 60),
    }
    arrays = {"edge_index": np.stack([src, dst]), "x": x, "y": y, **splits}
    if as_torch:
        import torch

        arrays = {k: torch.from_numpy(v) for k, v in arrays.items()}
    out = oa.write_dataset(tmp_path / "ds", **arrays, num_classes=5, name="toy", meta={"seed": 1})
    ds = assert_topology(out, src, dst, n)
    np.testing.assert_array_equal(ds.features, x)
    np.testing.assert_array_equal(ds.labels, y)
    for name in ("train", "val", "test"):
        np.testing.assert_array_equal(ds.split(name), splits[f"{name}_idx"])
    assert ds.num_classes == 5
    assert ds.manifest.meta["name"] == "toy" and ds.manifest.meta["seed"] == 1
    assert listing(tmp_path) == ["ds"]


def test_write_dataset_num_nodes_beyond_max_id_and_float_nan_labels(tmp_path: Path) -> None:
    y = np.array([0.0, np.nan, 2.0, 1.0, np.nan])
    out = oa.write_dataset(tmp_path / "ds", edge_index=np.array([[0, 1], [1, 2]]), num_nodes=5, y=y)
    ds = assert_topology(out, np.array([0, 1]), np.array([1, 2]), 5)
    np.testing.assert_array_equal(ds.labels, [0, -1, 2, 1, -1])
    assert ds.num_classes == 3


def test_from_pyg_masks_and_idx(tmp_path: Path) -> None:
    import torch

    src, dst = random_edges(40, 200)
    mask = torch.zeros(40, dtype=torch.bool)
    mask[:10] = True
    data = pyg_data(
        edge_index=torch.from_numpy(np.stack([src, dst])),
        x=torch.randn(40, 7),
        y=torch.arange(40).unsqueeze(1) % 3,
        train_mask=mask,
        val_idx=torch.arange(10, 20),
        test_mask=torch.arange(40) >= 30,
    )
    ds = assert_topology(oa.from_pyg(data, tmp_path / "ds", feature_dtype="float16"), src, dst, 40)
    np.testing.assert_array_equal(ds.features, data.x.numpy().astype(np.float16))
    np.testing.assert_array_equal(ds.labels, np.arange(40) % 3)
    np.testing.assert_array_equal(ds.split("train"), np.arange(10))
    np.testing.assert_array_equal(ds.split("val"), np.arange(10, 20))
    np.testing.assert_array_equal(ds.split("test"), np.arange(30, 40))


def test_from_pyg_explicit_num_nodes_keeps_isolated_tail(tmp_path: Path) -> None:
    import torch

    data = pyg_data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=6)
    ds = oa.open_dataset(oa.from_pyg(data, tmp_path / "ds"))
    assert ds.num_nodes == 6 and ds.feature_dim == 0 and ds.labels is None


def test_convert_torch_saved_data(tmp_path: Path) -> None:
    import torch

    src, dst = random_edges(30, 90)
    torch.save(
        pyg_data(edge_index=torch.from_numpy(np.stack([src, dst])), num_nodes=30), tmp_path / "g.pt"
    )
    assert_topology(oa.convert(tmp_path / "g.pt", tmp_path / "ds"), src, dst, 30)
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(oa.errors.InputFormatError, match="expected a torch_geometric.data.Data"):
        oa.convert(tmp_path / "list.pt", tmp_path / "bad")


# -- npz -------------------------------------------------------------------------------------------


def _csr(dense: np.ndarray) -> dict[str, np.ndarray]:
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return {
        "x_indptr": indptr,
        "x_indices": cols,
        "x_data": dense[rows, cols],
        "x_shape": np.array(dense.shape),
    }


@pytest.mark.parametrize("sparse", [False, True])
def test_from_npz_dense_and_csr(
    tmp_path: Path, sparse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_arrays, "FEATURE_BLOCK", 4 * 9 * 7)  # 7 rows per block: many blocks
    src, dst = random_edges(50, 300)
    rng = np.random.default_rng(2)
    x = (rng.random((50, 9)) < 0.3).astype(np.float32) * rng.integers(1, 5, (50, 9))
    feats = _csr(x) if sparse else {"x": x}
    np.savez(
        tmp_path / "g.npz",
        num_nodes=np.int64(50),
        edge_index=np.stack([src, dst]),
        **feats,
        y=np.arange(50) % 4,
        train_idx=np.arange(5),
        val_idx=np.arange(5, 10),
        test_idx=np.arange(10, 20),
    )
    ds = assert_topology(oa.convert(tmp_path / "g.npz", tmp_path / "ds"), src, dst, 50)
    np.testing.assert_array_equal(ds.features, x)
    np.testing.assert_array_equal(ds.split("test"), np.arange(10, 20))


def test_csr_duplicate_entries_are_summed() -> None:
    csr = _arrays.CSRFeatures(
        np.array([0, 3, 3]), np.array([1, 1, 0]), np.array([1.0, 2.0, 5.0]), (2, 3)
    )
    np.testing.assert_array_equal(csr[0:2], [[5, 3, 0], [0, 0, 0]])


@pytest.mark.parametrize("name", ["cora", "facebook_pagepage"])
def test_real_npz_files(tmp_path: Path, name: str) -> None:
    path = DATA / f"{name}.npz"
    if not path.exists():
        pytest.skip("shared data not present")
    z = np.load(path)
    n = int(z["num_nodes"])
    ds = assert_topology(
        oa.convert(path, tmp_path / name), z["edge_index"][0], z["edge_index"][1], n
    )
    if "x" in z:
        np.testing.assert_array_equal(ds.features, z["x"])
    else:
        indptr, indices, data = z["x_indptr"], z["x_indices"], z["x_data"]
        for start in range(0, n, 4096):  # densify the reference block by block too
            stop = min(n, start + 4096)
            ref = np.zeros((stop - start, int(z["x_shape"][1])), dtype=np.float32)
            rows = np.repeat(np.arange(stop - start), np.diff(indptr[start : stop + 1]))
            ref[rows, indices[indptr[start] : indptr[stop]]] = data[indptr[start] : indptr[stop]]
            np.testing.assert_array_equal(ds.features[start:stop], ref)
    np.testing.assert_array_equal(ds.labels, z["y"])
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(ds.split(split), z[f"{split}_idx"])


# -- OGB -------------------------------------------------------------------------------------------


def make_ogb(
    root: Path,
    *,
    gz: bool,
    n: int = 40,
    dim: int = 5,
    schemes: tuple[str, ...] = ("time",),
    node_list: bool = True,
) -> dict[str, np.ndarray]:
    """An ogbn-style folder: edge.csv, node-feat.csv, node-label.csv (NaN = unlabelled), splits."""
    ext = ".csv.gz" if gz else ".csv"
    raw = root / "raw"
    raw.mkdir(parents=True)
    src, dst = random_edges(n, 150, seed=3)
    x = np.random.default_rng(4).standard_normal((n, dim)).astype(np.float32)
    y = np.arange(n) % 3
    y[::7] = -1
    write_text(raw / f"edge{ext}", "".join(f"{a},{b}\n" for a, b in zip(src, dst, strict=True)))
    write_text(
        raw / f"node-feat{ext}", "".join(",".join(repr(float(v)) for v in row) + "\n" for row in x)
    )
    write_text(raw / f"node-label{ext}", "".join(("nan" if v < 0 else f"{v}") + "\n" for v in y))
    if node_list:
        write_text(raw / f"num-node-list{ext}", f"{n}\n")
    perm = np.random.default_rng(5).permutation(n)
    parts = {"train": perm[:20], "valid": perm[20:30], "test": perm[30:]}
    for scheme in schemes:
        (root / "split" / scheme).mkdir(parents=True)
        for part, ids in parts.items():
            write_text(root / "split" / scheme / f"{part}{ext}", "".join(f"{i}\n" for i in ids))
    return {"src": src, "dst": dst, "x": x, "y": y, **parts}


@pytest.mark.parametrize("gz", [False, True])
def test_from_ogb_folder(tmp_path: Path, gz: bool) -> None:
    ref = make_ogb(tmp_path / "ogbn_toy", gz=gz)
    ds = assert_topology(
        oa.convert(tmp_path / "ogbn_toy", tmp_path / "ds"), ref["src"], ref["dst"], 40
    )
    np.testing.assert_array_equal(ds.features, ref["x"])
    np.testing.assert_array_equal(ds.labels, ref["y"])
    np.testing.assert_array_equal(ds.split("train"), ref["train"])
    np.testing.assert_array_equal(ds.split("val"), ref["valid"])
    np.testing.assert_array_equal(ds.split("test"), ref["test"])
    assert ds.manifest.meta["format"] == "ogb"


def test_ogb_num_nodes_from_feature_rows_and_split_schemes(tmp_path: Path) -> None:
    ref = make_ogb(tmp_path / "o", gz=False, schemes=("a", "b"), node_list=False)
    (tmp_path / "o" / "raw" / "node-label.csv").unlink()
    with pytest.raises(oa.ConfigError, match="several split schemes"):
        oa.from_ogb(tmp_path / "o", tmp_path / "ds")
    ds = oa.open_dataset(
        oa.from_ogb(tmp_path / "o", tmp_path / "ds", split_scheme="b", undirected=True)
    )
    assert ds.num_nodes == 40 and ds.labels is None
    assert_topology(ds.path, ref["src"], ref["dst"], 40, undirected=True)
    with pytest.raises(oa.ConfigError, match="'c' not found"):
        oa.from_ogb(tmp_path / "o", tmp_path / "ds2", split_scheme="c")


def test_outre_convert_picks_an_ogb_split_scheme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two split schemes used to end in "pass split_scheme=", which the CLI had no flag for."""
    from outre_async.cli import main

    ref = make_ogb(tmp_path / "o", gz=False, schemes=("a", "b"))
    assert main(["convert", str(tmp_path / "o"), str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert "holds several split schemes ['a', 'b']; pick one: split_scheme='a' (outre convert --split-scheme a)" in err
    assert main(["convert", str(tmp_path / "o"), str(tmp_path / "ds"), "--split-scheme", "b"]) == 0
    np.testing.assert_array_equal(oa.open_dataset(tmp_path / "ds").split("val"), ref["valid"])
    assert main(["convert", str(tmp_path / "o"), str(tmp_path / "ds2"), "--split-scheme", "c"]) == 2
    assert "split scheme 'c' not found" in capsys.readouterr().err
    (tmp_path / "e.txt").write_text("0 1\n")
    assert main(["convert", str(tmp_path / "e.txt"), str(tmp_path / "ds3"), "--split-scheme", "a"]) == 2
    assert "--split-scheme picks split/NAME/ of an OGB folder" in capsys.readouterr().err
    assert not (tmp_path / "ds2").exists() and not (tmp_path / "ds3").exists()


# -- edge lists ------------------------------------------------------------------------------------


EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 1], [1, 2], [2, 2], [4, 0]])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "snap.txt",
            "# Directed graph\n# FromNodeId\tToNodeId\n" + "".join(f"{a}\t{b}\n" for a, b in EDGES),
        ),
        ("e.csv", "".join(f"{a},{b}\n" for a, b in EDGES)),
        (
            "e.tsv.gz",
            "% matrix-market style comment\n" + "".join(f"{a}\t{b}\t0.5\n" for a, b in EDGES),
        ),
        (
            "e.edges",
            "\n".join(f"  {a} , {b}\r" for a, b in EDGES),
        ),  # CRLF, blanks, no final newline
        (
            "e.el",
            "\n\n".join(f"{a} {b} 1700000000" for a, b in EDGES) + "\n",
        ),  # blank lines, extra column
    ],
)
def test_text_edge_lists(tmp_path: Path, name: str, text: str) -> None:
    path = write_text(tmp_path / name, text)
    out = oa.convert(path, tmp_path / "ds", progress=True)
    assert_topology(out, EDGES[:, 0], EDGES[:, 1], 5)
    assert oa.open_dataset(out).manifest.meta["format"] == "edgelist"


def test_text_blocks_split_lines_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_text_parsing, "TEXT_BLOCK", 7)  # blocks cut through lines
    src, dst = random_edges(500, 300)
    path = write_text(
        tmp_path / "e.txt", "# c\n" + "".join(f"{a} {b}\n" for a, b in zip(src, dst, strict=True))
    )
    assert_topology(oa.convert(path, tmp_path / "ds"), src, dst, int(max(src.max(), dst.max())) + 1)
    bad = write_text(
        tmp_path / "bad.txt", "".join(f"{a} {b}\n" for a, b in zip(src, dst, strict=True)) + "7 z\n"
    )
    with pytest.raises(oa.errors.InputFormatError) as info:
        oa.convert(bad, tmp_path / "bad")
    assert info.value.line == 301 and "'7 z'" in str(info.value)


@pytest.mark.parametrize(
    ("name", "dtype", "kw"),
    [
        ("e.i32", np.int32, {}),
        ("e.i64", np.int64, {}),
        ("e.bin", np.int64, {"binary_dtype": "int64"}),
        ("e.dat", np.int32, {"format": "binary", "binary_dtype": "int32"}),
    ],
)
def test_binary_edge_lists(tmp_path: Path, name: str, dtype: type, kw: dict) -> None:
    src, dst = random_edges(70, 500)
    np.stack([src, dst], axis=1).astype(dtype).tofile(tmp_path / name)
    out = oa.convert(tmp_path / name, tmp_path / "ds", num_nodes=80, **kw)
    assert_topology(out, src, dst, 80)


# -- the external sort -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opts", [{}, {"undirected": True, "dedupe": True}, {"drop_self_loops": True}]
)
def test_external_sort_matches_in_memory(tmp_path: Path, opts: dict) -> None:
    src, dst = random_edges(300, 5000, seed=7)
    src[:50] = dst[:50]  # self loops
    edges = np.stack([src, dst])
    small = oa.write_dataset(tmp_path / "small", edge_index=edges, memory_budget=1024, **opts)
    big = oa.write_dataset(tmp_path / "big", edge_index=edges, **opts)
    a, b = oa.open_dataset(small), oa.open_dataset(big)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert_topology(small, src, dst, 300, **opts)
    assert listing(tmp_path) == ["big", "small"]


def test_builder_spills_into_many_buckets_and_cleans_up(tmp_path: Path) -> None:
    src, dst = random_edges(200, 3000, seed=8)
    with CSCBuilder(memory_budget=1024, tmp_dir=tmp_path / "spill") as builder:
        for start in range(0, 3000, 250):
            builder.add(src[start : start + 250], dst[start : start + 250])
        assert builder.spilled and len(listing(tmp_path / "spill")) == 1
        with oa.DatasetWriter(tmp_path / "ds", num_nodes=builder.num_nodes) as writer:
            builder.write_to(writer)
        assert builder.num_buckets > 20
    assert listing(tmp_path / "spill") == []
    assert_topology(tmp_path / "ds", src, dst, 200)


def test_builder_widens_spilled_ids_to_int64(tmp_path: Path) -> None:
    src, dst = random_edges(100, 2000, seed=9)
    with CSCBuilder(memory_budget=1024, tmp_dir=tmp_path, dedupe=True) as builder:
        builder.add(src[:1000], dst[:1000])
        builder._widen()  # what ids >= 2**31 trigger; cheap to exercise directly
        builder.add(src[1000:], dst[1000:])
        with oa.DatasetWriter(tmp_path / "ds", num_nodes=100) as writer:
            builder.write_to(writer)
    assert_topology(tmp_path / "ds", src, dst, 100, dedupe=True)
    assert listing(tmp_path) == ["ds"]


@pytest.mark.parametrize(("budget", "edge_bytes", "node_bytes"), [(5, 1, 0), (40, 3, 2), (7, 1, 1)])
def test_plan_buckets_respects_the_budget(budget: int, edge_bytes: int, node_bytes: int) -> None:
    counts = np.array([3, 0, 5, 1, 1, 9, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0])
    bounds = plan_buckets(counts, budget, edge_bytes, node_bytes)
    assert bounds[0] == 0 and bounds[-1] == len(counts) and (np.diff(bounds) > 0).all()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        cost = counts[a:b].sum() * edge_bytes + (b - a) * node_bytes
        assert cost <= budget or b - a == 1
        if b < len(counts):  # greedy: the next node would not have fitted
            assert cost + counts[b] * edge_bytes + node_bytes > budget
    assert plan_buckets(counts, 1000, 3).tolist() == [0, len(counts)]


@pytest.mark.parametrize(
    "opts",
    [
        {"undirected": True},
        {"drop_self_loops": True},
        {"dedupe": True},
        {"undirected": True, "drop_self_loops": True, "dedupe": True},
    ],
)
def test_edge_options(tmp_path: Path, opts: dict) -> None:
    path = write_text(tmp_path / "e.txt", "".join(f"{a} {b}\n" for a, b in EDGES))
    out = oa.convert(path, tmp_path / "ds", **opts)
    ds = assert_topology(out, EDGES[:, 0], EDGES[:, 1], 5, **opts)
    assert ds.manifest.meta["dedupe"] == opts.get("dedupe", False)


def test_options_change_counts_as_expected(tmp_path: Path) -> None:
    path = write_text(tmp_path / "e.txt", "0 1\n0 1\n1 0\n2 2\n")
    count = lambda name, **o: oa.open_dataset(oa.convert(path, tmp_path / name, **o)).num_edges  # noqa: E731
    assert count("plain") == 4
    assert count("und", undirected=True) == 7  # the self loop is not doubled
    assert count("dd", undirected=True, dedupe=True) == 3
    assert count("nl", drop_self_loops=True) == 3


def test_overwrite_and_tmp_dir(tmp_path: Path) -> None:
    path = write_text(tmp_path / "e.txt", "".join(f"{i} {i + 1}\n" for i in range(200)))
    oa.convert(path, tmp_path / "ds")
    with pytest.raises(oa.errors.DatasetExistsError):
        oa.convert(path, tmp_path / "ds")
    oa.convert(
        path,
        tmp_path / "ds",
        overwrite=True,
        undirected=True,
        memory_budget="1KiB",
        tmp_dir=tmp_path / "scratch",
    )  # 400 edges do not fit 1 KiB: spills into scratch/
    assert oa.open_dataset(tmp_path / "ds").num_edges == 400
    assert listing(tmp_path) == ["ds", "e.txt", "scratch"] and listing(tmp_path / "scratch") == []


# -- bad inputs ------------------------------------------------------------------------------------


def _npz(tmp_path: Path, **arrays: np.ndarray) -> Path:
    np.savez(tmp_path / "in.npz", **arrays)
    return tmp_path / "in.npz"


def _text(name: str, text: str) -> Callable[[Path], Path]:
    return lambda tmp_path: write_text(tmp_path / name, text)


def _ogb_with(raw_name: str, text: str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        make_ogb(tmp_path / "ogb", gz=False)
        write_text(tmp_path / "ogb" / "raw" / raw_name, text)
        return tmp_path / "ogb"

    return make


def _truncated_gz(tmp_path: Path) -> Path:
    data = gzip.compress(b"".join(b"%d %d\n" % (i, i + 1) for i in range(5000)))
    (tmp_path / "e.txt.gz").write_bytes(data[: len(data) // 2])
    return tmp_path / "e.txt.gz"


EI = np.array([[0, 1, 2], [1, 2, 0]])
BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], dict, type, str]] = {
    "missing file": (lambda p: p / "nope.txt", {}, oa.errors.InputFormatError, "no such file"),
    "truncated binary": (
        lambda p: _bytes(p / "e.i64", 20),
        {},
        oa.errors.InputFormatError,
        "not a whole number",
    ),
    "truncated gzip": (_truncated_gz, {}, oa.errors.InputFormatError, "truncated"),
    "not an npz": (_text("x.npz", "hello"), {}, oa.errors.InputFormatError, "cannot read as .npz"),
    "npz without edge_index": (
        lambda p: _npz(p, num_nodes=np.int64(3)),
        {},
        oa.errors.InputFormatError,
        "edge_index",
    ),
    "edge_index not [2, E]": (
        lambda p: _npz(p, edge_index=EI.T.copy()),
        {},
        oa.errors.InvalidGraphError,
        "transpose",
    ),
    "float edge_index": (
        lambda p: _npz(p, edge_index=EI.astype(float)),
        {},
        oa.errors.InvalidGraphError,
        "integer",
    ),
    "x rows != num_nodes": (
        lambda p: _npz(p, edge_index=EI, num_nodes=np.int64(3), x=np.ones((4, 2))),
        {},
        oa.errors.InvalidGraphError,
        "x has 4 rows",
    ),
    "bad CSR": (
        lambda p: _npz(
            p,
            edge_index=EI,
            x_indptr=np.array([0, 1, 5, 2]),
            x_indices=np.zeros(2, int),
            x_data=np.ones(2),
            x_shape=np.array([3, 2]),
        ),
        {},
        oa.errors.InvalidGraphError,
        "CSR",
    ),
    "edge id >= num_nodes": (
        lambda p: _npz(p, edge_index=EI, num_nodes=np.int64(2)),
        {},
        oa.errors.InvalidGraphError,
        "out of range",
    ),
    "negative edge id": (_text("e.txt", "0 1\n-3 1\n"), {}, oa.errors.InvalidGraphError, "negative"),
    "num_nodes below max id": (
        _text("e.txt", "0 1\n5 1\n"),
        {"num_nodes": 5},
        oa.errors.InvalidGraphError,
        "out of range",
    ),
    "empty graph": (_text("e.txt", "# only comments\n\n"), {}, oa.errors.InvalidGraphError, "empty graph"),
    "only self loops dropped": (
        _text("e.txt", "1 1\n"),
        {"drop_self_loops": True},
        oa.errors.InvalidGraphError,
        "empty graph",
    ),
    "split id out of range": (
        lambda p: _npz(p, edge_index=EI, train_idx=np.array([0, 7])),
        {},
        oa.errors.InvalidGraphError,
        "out of range",
    ),
    "duplicate split ids": (
        lambda p: _npz(p, edge_index=EI, train_idx=np.array([0, 1, 0])),
        {},
        oa.errors.InvalidGraphError,
        "more than once",
    ),
    "label outside class range": (
        lambda p: _npz(p, edge_index=EI, y=np.array([0, 1, 5])),
        {"num_classes": 3},
        oa.errors.InvalidGraphError,
        "outside the class range",
    ),
    "label shape": (
        lambda p: _npz(p, edge_index=EI, num_nodes=np.int64(3), y=np.zeros((3, 2), int)),
        {},
        oa.errors.InvalidGraphError,
        "multi-label",
    ),
    "csv bad line": (_text("e.csv", "0,1\n1,2\n2;0\n"), {}, oa.errors.InputFormatError, "e.csv:3:"),
    "csv header": (_text("e.csv", "src,dst\n0,1\n"), {}, oa.errors.InputFormatError, ":1:"),
    "ogb missing edge file": (
        lambda p: (p / "o" / "raw").mkdir(parents=True) or p / "o",
        {},
        oa.errors.InputFormatError,
        "edge.csv",
    ),
    "ogb feature rows != nodes": (
        _ogb_with("num-node-list.csv", "41\n"),
        {},
        oa.errors.InvalidGraphError,
        "40 feature rows but 41 nodes",
    ),
    "ogb too few feature rows": (
        _ogb_with("node-feat.csv", "1.0,2.0,3.0,4.0,5.0\n"),
        {},
        oa.errors.InvalidGraphError,
        "1 feature rows but 40 nodes",
    ),
    "ogb bad feature line": (
        _ogb_with("node-feat.csv", "1,2,3,4,5\n1,2,x,4,5\n"),
        {},
        oa.errors.InputFormatError,
        "node-feat.csv:2:",
    ),
    "ogb bad label line": (
        _ogb_with("node-label.csv", "1\n2\nthree\n"),
        {},
        oa.errors.InputFormatError,
        "node-label.csv:3:",
    ),
    "ogb split id out of range": (
        lambda p: _ogb_split(p, "99\n"),
        {},
        oa.errors.InvalidGraphError,
        "out of range",
    ),
    "unknown suffix": (
        _text("e.xyz", "0 1\n"),
        {},
        oa.ConfigError,
        "ogb, npz, pyg, edgelist, binary",
    ),
    "unknown format name": (
        _text("e.txt", "0 1\n"),
        {"format": "graphml"},
        oa.ConfigError,
        "edgelist",
    ),
    "unknown option": (_text("e.txt", "0 1\n"), {"undirectd": True}, oa.ConfigError, "undirectd"),
    "option of another format": (
        _text("e.txt", "0 1\n"),
        {"split_scheme": "x"},
        oa.ConfigError,
        "split_scheme",
    ),
    ".bin without dtype": (lambda p: _bytes(p / "e.bin", 16), {}, oa.ConfigError, "binary_dtype"),
    "bad feature dtype": (
        _text("e.txt", "0 1\n"),
        {"feature_dtype": "int4"},
        oa.ConfigError,
        "feature_dtype",
    ),
    "bad budget": (_text("e.txt", "0 1\n"), {"memory_budget": 10}, oa.ConfigError, "memory_budget"),
    "directory without raw/": (
        lambda p: (p / "d").mkdir() or p / "d",
        {},
        oa.errors.InputFormatError,
        "raw/",
    ),
}


def _bytes(path: Path, size: int) -> Path:
    path.write_bytes(bytes(size))
    return path


def _ogb_split(tmp_path: Path, text: str) -> Path:
    make_ogb(tmp_path / "ogb", gz=False)
    write_text(tmp_path / "ogb" / "split" / "time" / "test.csv", text)
    return tmp_path / "ogb"


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_raise_named_errors_and_leave_nothing(tmp_path: Path, case: str) -> None:
    make, opts, error, fragment = BAD_INPUTS[case]
    work = tmp_path / "work"
    work.mkdir()
    src = make(work)
    before = listing(work)
    with pytest.raises(error) as info:
        oa.convert(src, work / "out", **opts)
    message = str(info.value)
    assert fragment in message and "\n" not in message
    assert isinstance(info.value, oa.OutreError)
    assert listing(work) == before  # no dataset, no temporary directory, no spill files


def test_failure_during_external_sort_removes_spill_files(tmp_path: Path) -> None:
    src, dst = random_edges(100, 3000)
    ei = np.stack([src, dst])
    with pytest.raises(oa.errors.InvalidGraphError, match="more than once"):
        oa.write_dataset(tmp_path / "ds", edge_index=ei, train_idx=[1, 1], memory_budget=1024)
    assert listing(tmp_path) == []


def test_detect_format() -> None:
    cases = {
        "a.npz": "npz",
        "a.pt": "pyg",
        "a.i32": "binary",
        "a.bin": "binary",
        "a.txt": "edgelist",
        "a.TSV": "edgelist",
        "a.edges.gz": "edgelist",
        "a.csv.gz": "edgelist",
    }
    for name, fmt in cases.items():
        path = DATA.parent / name
        assert _convert._format_from_name(path) == fmt, name


# -- kernels (also as plain Python, the NUMBA_DISABLE_JIT path) ------------------------------------


def kernel(fn: Callable, jit: bool) -> Callable:
    """The compiled kernel or its Python function (already plain under NUMBA_DISABLE_JIT)."""
    return fn if jit else getattr(fn, "py_func", fn)


@pytest.mark.parametrize("jit", [True, False])
def test_parse_int_pairs_grammar(jit: bool) -> None:
    parse = kernel(parse_int_pairs, jit)
    cases = {
        b"1 2\n": ([[1, 2]], -1),
        b"# c\n\n 3,4\r\n5\t6 7\n": ([[3, 4], [5, 6]], -1),
        b"-1 +2\n": ([[-1, 2]], -1),
        b"1 , 2,9\n%x\n": ([[1, 2]], -1),
        b"1 2x\n": ([], 0),
        b"0 1\n1,,2\n": ([[0, 1]], 1),
        b"12\n": ([], 0),
        b"1 -\n": ([], 0),
        b"1 2\n3\n": ([[1, 2]], 1),
        b"1" + b"0" * 18 + b" 1\n": ([], 0),
    }
    for text, (rows, bad) in cases.items():
        out = np.zeros((len(text) // 4 + 1, 2), dtype=np.int64)
        got, got_bad, _ = parse(np.frombuffer(text, dtype=np.uint8), out)
        assert got_bad == bad, text
        np.testing.assert_array_equal(out[:got], np.array(rows, dtype=np.int64).reshape(-1, 2))
    assert (
        parse(np.frombuffer(b"1 2", dtype=np.uint8), np.zeros((2, 2), np.int64))[1] == -2
    )  # no sentinel


@pytest.mark.parametrize("jit", [True, False])
def test_parse_int_column(jit: bool) -> None:
    parse = kernel(parse_int_column, jit)
    out = np.zeros(10, dtype=np.int64)
    assert parse(np.frombuffer(b"5\n# x\n 7\r\n9,3\n", dtype=np.uint8), out) == (3, -1, 4)
    np.testing.assert_array_equal(out[:3], [5, 7, 9])
    assert parse(np.frombuffer(b"5\nx\n", dtype=np.uint8), out)[1] == 1


@pytest.mark.parametrize("jit", [True, False])
def test_sort_kernels_match_numpy(jit: bool) -> None:
    rng = np.random.default_rng(11)
    values = rng.integers(0, 20, 200).astype(np.int32)
    offsets = np.array([0, 0, 3, 40, 41, 200])
    counts = np.zeros(5, dtype=np.int64)
    out = values.copy()
    total = kernel(sort_segments, jit)(out, offsets, True, counts)
    expected = [np.unique(values[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    np.testing.assert_array_equal(out[:total], np.concatenate(expected))
    np.testing.assert_array_equal(counts, [len(e) for e in expected])
    pairs = rng.integers(0, 50, (300, 2)).astype(np.int64)
    bounds = np.array([0, 10, 11, 30, 50])
    scattered = np.empty_like(pairs)
    offs = kernel(scatter_by_bucket, jit)(pairs, bounds, scattered)
    bucket = np.searchsorted(bounds, pairs[:, 1], side="right") - 1
    np.testing.assert_array_equal(scattered, pairs[np.argsort(bucket, kind="stable")])
    np.testing.assert_array_equal(np.diff(offs), np.bincount(bucket, minlength=4))
