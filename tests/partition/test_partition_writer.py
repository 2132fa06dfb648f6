"""The bounded-memory partition writer against the in-memory scatter it replaced: byte-identical
files on a graph with hubs longer than a bucket row, several chunks and rows that overflow, and the
:class:`Buckets` regrouping and the synced :class:`OutFile` on their own."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from outre_async.partition import _output_kernels as K
from outre_async.partition import partition
from outre_async.partition._buckets import MIN_ROW_BYTES, Buckets
from outre_async.partition._outfile import OutFile, file_crc32

import outre_async as oa


def _scatter_reference(ds: oa.Dataset, assign: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """The former writer: group by partition in RAM, then scatter every list to its slot."""
    part_ptr, part_nodes = K.group_by_part(assign, np.arange(ds.num_nodes, dtype=np.int32), k)
    train = ds.split("train")
    train_ptr, train_nodes = K.group_by_part(assign, train.astype(np.int32), k)
    deg = np.diff(ds.indptr)
    adj_ptr = np.zeros(ds.num_nodes + 1, np.int64)
    np.cumsum(deg[part_nodes], out=adj_ptr[1:])
    slot = np.empty(ds.num_nodes, np.int64)
    slot[part_nodes] = np.arange(ds.num_nodes)
    adj = np.empty(ds.num_edges, ds.indices.dtype)
    for v in range(ds.num_nodes):
        adj[adj_ptr[slot[v]] : adj_ptr[slot[v] + 1]] = ds.indices[ds.indptr[v] : ds.indptr[v + 1]]
    src = np.asarray(ds.indices).astype(np.int64)
    dst = np.repeat(np.arange(ds.num_nodes), deg)
    cross = np.bincount(dst[assign[src] != assign[dst]], minlength=ds.num_nodes).astype(np.int32)
    return {"assignment": assign.astype(np.int32), "part_ptr": part_ptr, "part_nodes": part_nodes,
            "train_ptr": train_ptr, "train_nodes": train_nodes, "adj_ptr": adj_ptr, "adj_indices": adj,
            "cross": cross}


@pytest.fixture(scope="module")
def hub_ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    """1500 nodes; nodes 7 and 900 have in-degree 3000 (longer than a 4 KiB row of int32)."""
    rng = np.random.default_rng(5)
    n = 1500
    src = rng.integers(0, n, 12_000)
    dst = rng.integers(0, n, 12_000)
    hub_src = rng.integers(0, n, 6000)
    hub_dst = np.repeat([7, 900], 3000)
    ei = np.stack([np.concatenate([src, hub_src]), np.concatenate([dst, hub_dst])])
    path = oa.write_dataset(tmp_path_factory.mktemp("w") / "hubs", edge_index=ei, num_nodes=n,
                            y=rng.integers(0, 3, n), train_idx=rng.choice(n, 300, replace=False), num_classes=3)
    ds = oa.open_dataset(path)
    assert np.diff(ds.indptr).max() > MIN_ROW_BYTES // 4
    return ds


@pytest.mark.parametrize(("parts", "chunk_edges", "buffer"), [(1, 1 << 20, 64 << 20), (5, 700, 1), (64, 3000, 1)])
def test_writer_files_equal_the_scatter_reference(hub_ds: oa.Dataset, parts: int, chunk_edges: int,
                                                  buffer: int) -> None:
    """``buffer=1``: rows of the 4 KiB minimum, so rows overflow and the hubs are written directly."""
    out = partition(hub_ds, parts, name=f"w{parts}", chunk_edges=chunk_edges, overwrite=True,
                    write_buffer_bytes=buffer)
    ref = _scatter_reference(hub_ds, out.assignment, parts)
    files = out.meta["files"]
    assert sorted(files) == sorted(ref)
    for stem, want in ref.items():
        raw = (out.path / files[stem]["file"]).read_bytes()
        assert files[stem]["dtype"] == str(want.dtype) and files[stem]["shape"] == [len(want)], stem
        assert raw == want.tobytes(), stem
        assert files[stem]["crc32"] == (None if stem == "adj_indices" else zlib.crc32(raw)), stem
    assert json.loads((out.path / "meta.json").read_text())["files"] == files


@pytest.mark.parametrize("page_bytes", [4096, 8, 12])
def test_buckets_regroup_lists_with_tiny_rows(tmp_path: Path, page_bytes: int) -> None:
    """Rows of 3 items: many lists are longer than a row; 8- and 12-byte pages: rows are written
    in aligned parts, their tails kept."""
    rng = np.random.default_rng(0)
    k, lists = 4, 200
    part = rng.integers(0, k, lists).astype(np.int32)
    lens = rng.integers(0, 9, lists)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    buf = rng.integers(0, 1000, int(ptr[-1])).astype(np.int32)
    want = np.concatenate([buf[ptr[i] : ptr[i + 1]] for p in range(k) for i in range(lists) if part[i] == p])
    starts = np.concatenate([[0], np.cumsum(np.bincount(part, weights=lens, minlength=k))[:-1]]).astype(np.int64)
    with OutFile(tmp_path / "b.bin", np.int32, sync_bytes=64) as f:
        b = Buckets(f, starts, row=3, page_bytes=page_bytes)
        half = lists // 2
        b.add(part[:half], ptr[: half + 1], buf)
        b.add(part[half:], ptr[half:] - ptr[half], buf[ptr[half] :])
        b.flush()
        entry = f.close()
    got = np.fromfile(tmp_path / "b.bin", np.int32)
    np.testing.assert_array_equal(got, want)
    assert entry["shape"] == [len(want)] and entry["crc32"] == zlib.crc32(want.tobytes())


def test_outfile_checksum_in_and_out_of_order(tmp_path: Path) -> None:
    data = np.arange(1000, dtype=np.int64)
    with OutFile(tmp_path / "seq.bin", np.int64, sync_bytes=100) as f:
        for i in range(0, 1000, 64):
            f.append(data[i : i + 64])
        seq = f.close()
    with OutFile(tmp_path / "rev.bin", np.int64) as f:
        for i in reversed(range(0, 1000, 64)):
            f.pwrite(data[i : i + 64], i)
        rev = f.close()
    for entry, name in ((seq, "seq.bin"), (rev, "rev.bin")):
        assert (tmp_path / name).read_bytes() == data.tobytes()
        assert entry["nbytes"] == data.nbytes and entry["crc32"] == zlib.crc32(data.tobytes())
    assert file_crc32(tmp_path / "rev.bin") == zlib.crc32(data.tobytes())
