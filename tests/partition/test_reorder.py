"""``outre reorder``: the partition-ordered relabelled dataset (issue 15 item 3).

Every array against an in-memory renumbering (``_reference``); training batches on the reordered
dataset equal the original's, renumbered (random and partition batches, same seeds); the permutation
files are checked on open; an interrupted write (error, Ctrl-C, SIGTERM) leaves nothing; features
larger than the ``memory`` bound reorder correctly; the output never replaces the input.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import generated, random_graph, write_store
from outre_async.partition import _reorder as R
from outre_async.partition import open_partitions, partition, reorder
from outre_async.partition._reorder import memory_floor

import outre_async as oa
from outre_async.cli import main
from outre_async.store._tempdir import parse_temp_name
from outre_async.loader._options import group_knobs


def _reference(ds: oa.Dataset, assign: np.ndarray) -> dict[str, np.ndarray]:
    """The renumbering done in RAM: partition by partition, storage order inside each."""
    new_to_old = np.argsort(assign, kind="stable")
    old_to_new = np.argsort(new_to_old)
    deg = np.diff(ds.indptr)[new_to_old]
    lists = [old_to_new[ds.indices[ds.indptr[v] : ds.indptr[v + 1]]] for v in new_to_old]
    return {"new_to_old": new_to_old, "old_to_new": old_to_new,
            "indptr": np.concatenate([[0], np.cumsum(deg)]),
            "indices": np.concatenate(lists) if lists else np.empty(0, np.int64),
            "features": np.asarray(ds.features)[new_to_old],
            "labels": None if ds.labels is None else ds.labels[new_to_old]}


def _no_litter(*folders: Path) -> None:
    for folder in folders:
        if folder.is_dir():
            assert not [p.name for p in folder.iterdir() if parse_temp_name(p.name) is not None]


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    """900 nodes, hubs, 129-dim rows (packed: rows straddle sectors), labels and three splits."""
    rng = np.random.default_rng(3)
    indptr, indices = random_graph(rng, 900, 30)
    indices[indptr[5] : indptr[6]] = rng.integers(0, 900, indptr[6] - indptr[5])
    perm = rng.permutation(900)
    return write_store(tmp_path_factory.mktemp("odd") / "g", indptr, indices,
                       features=rng.standard_normal((900, 129)).astype(np.float32),
                       labels=rng.integers(-1, 5, 900), num_classes=5,
                       splits={"train": perm[:400], "val": perm[400:500], "test": perm[500:600]})


@pytest.mark.parametrize(("parts", "memory"), [(4, 1 << 20), (16, 256 << 10)])
def test_every_array_is_renumbered_like_the_in_memory_reference(odd: oa.Dataset, tmp_path: Path, parts: int,
                                                                 memory: int) -> None:
    src_parts = partition(odd, parts, name=f"p{parts}", overwrite=True)
    new = reorder(odd, f"p{parts}", tmp_path / "r", memory_bytes=memory)
    ref = _reference(odd, src_parts.assignment)
    assert new.reordered and not odd.reordered
    assert new.manifest.features == odd.manifest.features  # same dtype, dim, stride, layout
    assert np.array_equal(new.original_ids(np.arange(900)), ref["new_to_old"])
    assert np.array_equal(new.ids_of_original(np.arange(900)), ref["old_to_new"])
    assert np.array_equal(new.indptr, ref["indptr"])
    assert np.array_equal(new.indices, ref["indices"])
    assert np.array_equal(np.asarray(new.features), ref["features"])
    assert np.array_equal(new.labels, ref["labels"])
    for name in ("train", "val", "test"):  # renumbered, in the original order
        assert np.array_equal(new.split(name), ref["old_to_new"][odd.split(name)])
    new.verify()
    # the same partitions, each now a contiguous id range, under the same name
    carried = open_partitions(new, f"p{parts}")
    assert np.array_equal(carried.part_ptr, src_parts.part_ptr)
    assert np.array_equal(carried.part_nodes, np.arange(900))
    assert np.array_equal(carried.assignment, src_parts.assignment[ref["new_to_old"]])
    assert np.array_equal(carried.train_nodes_all, ref["old_to_new"][src_parts.train_nodes_all])
    assert np.array_equal(carried.cross, src_parts.cross[ref["new_to_old"]])
    assert carried.meta["quality"]["edges_cut"] == src_parts.meta["quality"]["edges_cut"]
    assert carried.meta["reordered_from"]["partitions"] == f"p{parts}"


def test_features_larger_than_the_memory_bound(tmp_path: Path) -> None:
    """1.5 MiB of 4 KiB rows (float16, padded) through a 64 KiB bound: many chunks, rows longer than
    a bucket row, every byte where the reference puts it."""
    rng = np.random.default_rng(8)
    indptr, indices = random_graph(rng, 768, 12)
    feats = rng.standard_normal((768, 1000)).astype(np.float16)
    ds = write_store(tmp_path / "g", indptr, indices, features=feats, feature_dtype="float16")
    parts = partition(ds, 4, name="p4")
    assert ds.manifest.features.nbytes > 20 * memory_floor(4, ds.row_layout.stride)
    new = reorder(ds, "p4", tmp_path / "r", memory_bytes=memory_floor(4, ds.row_layout.stride))
    order = np.argsort(parts.assignment, kind="stable")
    assert np.array_equal(np.asarray(new.features), feats[order])
    with pytest.raises(oa.ConfigError, match="below the floor"):
        reorder(ds, "p4", tmp_path / "r2", memory_bytes=memory_floor(4, ds.row_layout.stride) - 1)
    assert not (tmp_path / "r2").exists()


def _batches_equal(old_batch, new_batch, old_to_new: np.ndarray) -> None:  # noqa: ANN001 - PyG Data
    assert np.array_equal(new_batch.n_id.numpy(), old_to_new[old_batch.n_id.numpy()])
    assert np.array_equal(new_batch.edge_index.numpy(), old_batch.edge_index.numpy())
    assert np.array_equal(new_batch.x.numpy(), old_batch.x.numpy())
    assert np.array_equal(new_batch.y.numpy(), old_batch.y.numpy())
    assert new_batch.batch_size == old_batch.batch_size


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, oa.Dataset]:
    root = tmp_path_factory.mktemp("pair")
    ds = generated(root / "g", "tiny")
    partition(ds, 8, name="p8")
    return ds, reorder(ds, "p8", root / "r")


def test_random_batches_are_the_originals_renumbered(pair: tuple[oa.Dataset, oa.Dataset]) -> None:
    ds, new = pair
    old_to_new = new.ids_of_original(np.arange(ds.num_nodes))
    kw = {"fanouts": [5, 3], "batch_size": 96, "seed": 11}
    old = list(oa.SyncLoader(ds, split="train", **kw))
    fresh = list(oa.SyncLoader(new, split="train", **kw))
    assert len(old) == len(fresh) > 3
    for a, b in zip(old, fresh, strict=True):
        _batches_equal(a, b, old_to_new)
        assert np.array_equal(new.original_ids(b.n_id), a.n_id.numpy())  # the documented way back


@pytest.mark.parametrize("backend", ["pread", "memory"])
def test_partition_batches_through_the_loader_are_the_originals_renumbered(
        pair: tuple[oa.Dataset, oa.Dataset], backend: str) -> None:
    ds, new = pair
    old_to_new = new.ids_of_original(np.arange(ds.num_nodes))
    kw = {"fanouts": [5, 5], "batch_size": 64, "seed": 4, "partitions": "p8", "parts_per_batch": 2,
          "ordered": True, "backend": backend, "neighbor_cache": 1 << 14}
    for epoch in range(2):
        with oa.OutreLoader(ds, **group_knobs(kw)) as a_loader, oa.OutreLoader(new, **group_knobs(kw)) as b_loader:
            old, fresh = list(a_loader), list(b_loader)
        assert len(old) == len(fresh) > 3, epoch
        for a, b in zip(old, fresh, strict=True):
            _batches_equal(a, b, old_to_new)


def test_original_ids_checks_its_input(pair: tuple[oa.Dataset, oa.Dataset]) -> None:
    ds, new = pair
    assert np.array_equal(ds.original_ids([3, 1]), [3, 1])  # not reordered: the ids themselves
    for bad in ([-1], [new.num_nodes], [0.5]):
        with pytest.raises(oa.ConfigError):
            new.original_ids(bad)
        with pytest.raises(oa.ConfigError):
            new.ids_of_original(bad)


# -- damaged permutation files ---------------------------------------------------------------------


def _copy(src: oa.Dataset, dst: Path) -> Path:
    import shutil

    shutil.copytree(src.path, dst)
    return dst


def _rewrite(path: Path, stem: str, array: np.ndarray) -> None:
    """Replace ``stem``'s file and record its new checksum: damage the checksum cannot see."""
    (path / f"{stem}.bin").write_bytes(array.tobytes())
    doc = json.loads((path / "manifest.json").read_text())
    doc[stem]["crc32"] = zlib.crc32(array.tobytes())
    (path / "manifest.json").write_text(json.dumps(doc))


def test_damaged_permutation_files_are_named_errors(pair: tuple[oa.Dataset, oa.Dataset], tmp_path: Path) -> None:
    _, new = pair
    n = new.num_nodes
    perm = np.fromfile(new.path / "original_ids.bin", np.int64)
    out_of_range = _copy(new, tmp_path / "range")
    _rewrite(out_of_range, "original_ids", np.where(np.arange(n) == 7, n + 5, perm))
    with pytest.raises(oa.errors.DatasetCorruptError, match="outside"):
        oa.open_dataset(out_of_range)
    flipped = _copy(new, tmp_path / "crc")
    raw = bytearray((flipped / "new_ids.bin").read_bytes())
    raw[9] ^= 1
    (flipped / "new_ids.bin").write_bytes(bytes(raw))
    with pytest.raises(oa.errors.DatasetCorruptError, match="checksum"):
        oa.open_dataset(flipped)
    short = _copy(new, tmp_path / "short")
    (short / "new_ids.bin").write_bytes((short / "new_ids.bin").read_bytes()[:-8])
    with pytest.raises(oa.errors.DatasetCorruptError, match="bytes"):
        oa.open_dataset(short)
    swapped = _copy(new, tmp_path / "swap")  # in range, checksum right, not the inverse any more
    bad = perm.copy()
    bad[[0, 1]] = bad[[1, 0]]
    _rewrite(swapped, "original_ids", bad)
    opened = oa.open_dataset(swapped)
    with pytest.raises(oa.errors.DatasetCorruptError, match="not inverse"):
        opened.original_ids([0])
    half = _copy(new, tmp_path / "half")
    doc = json.loads((half / "manifest.json").read_text())
    del doc["new_ids"]
    (half / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(oa.errors.ManifestError, match="come together"):
        oa.open_dataset(half)


def test_the_writer_refuses_a_non_permutation(tmp_path: Path) -> None:
    with pytest.raises(oa.errors.InvalidGraphError, match="permutation"), oa.DatasetWriter(tmp_path / "g", num_nodes=3) as w:
        w.write_csc(np.array([0, 1, 2, 3]), np.array([1, 2, 0]))
        w.write_node_ids(np.array([0, 0, 2]))
    assert not (tmp_path / "g").exists()


# -- atomicity, overwrite, CLI ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["_write_features", "_write_partitions"])
@pytest.mark.parametrize("exc", [OSError, KeyboardInterrupt])
def test_an_interrupted_reorder_leaves_nothing(pair: tuple[oa.Dataset, oa.Dataset], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, where: str,
                                               exc: type[BaseException]) -> None:
    ds, _ = pair
    real = getattr(R, where)

    def fail_midway(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # the pass is done (its files are in the temp folder), then it fails
        raise exc("injected")

    monkeypatch.setattr(R, where, fail_midway)
    with pytest.raises(exc, match="injected"):
        reorder(ds, "p8", tmp_path / "r")
    assert list(tmp_path.iterdir()) == []
    _no_litter(ds.path / "partitions")


SIGTERM_CHILD = """
import sys
from outre_async.partition import _reorder as R
real = R._write_partitions
def hold(*args, **kwargs):
    print("mid-write", flush=True)
    sys.stdin.read()
    return real(*args, **kwargs)
R._write_partitions = hold
from outre_async.cli import main
sys.exit(main(["reorder", sys.argv[1], sys.argv[2], "--partitions", "p8", "--no-progress"]))
"""


def test_sigterm_mid_reorder_exits_143_and_leaves_nothing(pair: tuple[oa.Dataset, oa.Dataset],
                                                          tmp_path: Path) -> None:
    ds, _ = pair
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, str(ds.path), str(tmp_path / "r")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "mid-write\n"
    assert [p for p in tmp_path.iterdir() if parse_temp_name(p.name)]  # caught mid-write
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_only_an_outre_dataset_and_never_the_input(pair: tuple[oa.Dataset, oa.Dataset],
                                                                      tmp_path: Path) -> None:
    ds, new = pair
    with pytest.raises(oa.ConfigError, match="outside the input"):
        reorder(ds, "p8", ds.path, overwrite=True)
    with pytest.raises(oa.ConfigError, match="outside the input"):
        reorder(ds, "p8", ds.path / "partitions" / "x")
    with pytest.raises(oa.errors.DatasetExistsError):
        reorder(ds, "p8", new.path)
    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(oa.errors.OverwriteRefusedError):
        reorder(ds, "p8", foreign, overwrite=True)
    assert (foreign / "notes.txt").read_text() == "mine"
    again = reorder(ds, "p8", tmp_path / "r")
    replaced = reorder(ds, "p8", again.path, overwrite=True)  # a reordered dataset is ours: replaced
    assert replaced.reordered and np.array_equal(replaced.indices, new.indices)


def test_cli_reorder_and_partition_reorder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = generated(tmp_path / "g", "tiny")
    assert main(["partition", str(ds.path), "--parts", "4", "--reorder", str(tmp_path / "a"), "--no-progress"]) == 0
    assert "renumbered by the 'fennel-4' partitions" in capsys.readouterr().out
    assert main(["reorder", str(ds.path), str(tmp_path / "b"), "--partitions", "fennel-4", "--json",
                 "--memory", "1MiB"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["partitions"] == "fennel-4" and out["memory_bytes"] == 1 << 20
    a, b = oa.open_dataset(tmp_path / "a"), oa.open_dataset(tmp_path / "b")
    assert np.array_equal(a.original_ids(np.arange(a.num_nodes)), b.original_ids(np.arange(b.num_nodes)))
    assert main(["reorder", str(ds.path), str(tmp_path / "c"), "--partitions", "fennel-4", "--memory", "1KiB"]) == 2
    assert "below the reorder's floor" in capsys.readouterr().err
    assert main(["reorder", str(ds.path), str(tmp_path / "c"), "--partitions", "nope"]) == 2
    assert not (tmp_path / "c").exists()
