"""A factory of damaged datasets, partition folders and ``.npz`` inputs (issue 11's hostile user).

:func:`make_base` writes one small healthy dataset with a partition folder ``p4``; every
:class:`Damage` then damages a fresh copy of it (:func:`materialize`).  One function per damage class
returns its variants; :func:`all_damage` is every variant of every class.  A damage that rewrites an
array recomputes the checksum the manifest or meta records, so that the deeper checks (ranges,
monotonicity, products) are what must catch it, not the checksum; the ``*-stale-crc`` variants keep the
old checksum on purpose.

What each damage targets decides which operations must refuse it (``VERBS``): a dataset is opened by
``outre info --verify``, ``outre partition`` and a loader epoch; a partition folder (or a partition
*name*) by ``outre stats redundancy --partitions`` and a partition-mode loader epoch; an ``.npz`` by
``outre convert``.  ``escape`` marks damages that point outside the folder: an ``outside/`` folder
next to the dataset holds valid copies of its files, so following such a path would *work*, and only
confinement refuses it.

Kept free of pytest: ``benchmarks/reliability_sweep.py`` imports it too.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PART = "p4"  # the base dataset's partition folder
VERBS = {"dataset": ("info", "partition", "loader"), "partition": ("stats", "loader-part"),
         "name": ("stats", "loader-part"), "npz": ("convert",)}

Doc = dict[str, Any]


@dataclass(frozen=True)
class Damage:
    """One damaged input: ``apply(work)`` damages ``work/ds`` (a fresh copy of the base) or writes
    ``work/ds/in.npz``; for target ``name`` it returns the partition name to ask for."""

    kind: str
    name: str
    target: str  # "dataset", "partition", "name" or "npz"
    apply: Callable[[Path], str | None]
    escape: bool = False
    unread_by: tuple[str, ...] = ()  # verbs that never read the damaged bytes (exit 0 is right for them)

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"


def make_base(root: Path) -> Path:
    """A small healthy dataset at ``root/base`` with partitions ``p4``, and ``root/outside``."""
    from outre_async.partition import partition

    import outre_async as oa

    path = oa.generate(root / "base", "tiny", seed=3, feature_dim=8, num_nodes=600)
    partition(oa.open_dataset(path), 4, name=PART)
    return Path(path)


def materialize(base: Path, damage: Damage, work: Path) -> tuple[Path, str | None]:
    """Copy ``base`` to ``work/ds`` (and its files to ``work/outside``), apply ``damage``; returns
    ``(input path, partition name)``: the dataset (or ``work/ds/in.npz``) and the name to open."""
    if damage.target == "npz":
        (work / "ds").mkdir(parents=True)
        damage.apply(work)
        return work / "ds" / "in.npz", None
    shutil.copytree(base, work / "ds", symlinks=True)
    outside = work / "outside"
    outside.mkdir()
    for f in base.iterdir():
        if f.is_file():
            shutil.copy(f, outside / f.name)
    shutil.copytree(base / "partitions" / PART, outside / PART)
    name = damage.apply(work)
    return work / "ds", name if damage.target == "name" else PART


# -- helpers -------------------------------------------------------------------------------------


def _edit_json(path: Path, edit: Callable[[Doc], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _manifest(edit: Callable[[Doc], None]) -> Callable[[Path], None]:
    return lambda w: _edit_json(w / "ds" / "manifest.json", edit)


def _meta(edit: Callable[[Doc], None]) -> Callable[[Path], None]:
    return lambda w: _edit_json(w / "ds" / "partitions" / PART / "meta.json", edit)


def _entry_of(doc: Doc, key: str) -> Doc:
    if key.startswith("split_"):
        return doc["splits"][key[len("split_"):]]
    return doc["files"][key] if "files" in doc else doc[key]


def _array(key: str, mutate: Callable[[np.ndarray], np.ndarray], *, fix_crc: bool = True,
           partition: bool = False) -> Callable[[Path], None]:
    """Rewrite the array ``key`` of the dataset (or of ``p4``) through ``mutate``; the manifest/meta
    entry follows its new shape, size and (unless ``fix_crc`` is False) checksum."""
    def apply(w: Path) -> None:
        folder = w / "ds" / "partitions" / PART if partition else w / "ds"
        doc_path = folder / ("meta.json" if partition else "manifest.json")
        doc = json.loads(doc_path.read_text())
        e = _entry_of(doc, key)
        arr = mutate(np.fromfile(folder / e["file"], dtype=e["dtype"]).copy())
        arr = np.ascontiguousarray(arr, dtype=e["dtype"])
        (folder / e["file"]).write_bytes(arr.tobytes())
        e["shape"], e["nbytes"] = [len(arr)], arr.nbytes
        if fix_crc and e.get("crc32") is not None:
            e["crc32"] = zlib.crc32(arr.tobytes())
        if not partition and key == "indices":
            doc["num_edges"] = len(arr)
        doc_path.write_text(json.dumps(doc))
    return apply


def _set(i: int, value: int) -> Callable[[np.ndarray], np.ndarray]:
    def mutate(a: np.ndarray) -> np.ndarray:
        a[i] = value
        return a
    return mutate


def _swap(i: int, j: int) -> Callable[[np.ndarray], np.ndarray]:
    def mutate(a: np.ndarray) -> np.ndarray:
        a[[i, j]] = a[[j, i]]
        return a
    return mutate


def _n(w: Path) -> int:
    return int(json.loads((w / "ds" / "manifest.json").read_text())["num_nodes"])


# -- damage classes ------------------------------------------------------------------------------


def manifest_sizes() -> list[Damage]:
    """The manifest's products and sizes lie: a 12-line manifest asking for terabytes, or less."""
    def both(key: str, shape: int, itemsize: int) -> Callable[[Doc], None]:
        def edit(d: Doc) -> None:
            e = _entry_of(d, key)
            e["shape"], e["nbytes"] = [shape], shape * itemsize
        return edit

    def put(path: tuple[str, ...], value: Any) -> Callable[[Doc], None]:
        def edit(d: Doc) -> None:
            for k in path[:-1]:
                d = d[k]
            d[path[-1]] = value
        return edit

    def counts(nodes: int, edges: int) -> Callable[[Doc], None]:
        def edit(d: Doc) -> None:
            d["num_nodes"], d["num_edges"] = nodes, edges
            both("indptr", nodes + 1, 8)(d)
            both("indices", edges, 4)(d)
        return edit

    edits: dict[str, Callable[[Doc], None]] = {
        "indptr.nbytes-x2": lambda d: d["indptr"].update(nbytes=d["indptr"]["nbytes"] * 2),
        "indices.nbytes-minus-4": lambda d: d["indices"].update(nbytes=d["indices"]["nbytes"] - 4),
        "indices.shape-x1000": both("indices", 19_000_000, 4),
        "num_nodes+1": lambda d: d.update(num_nodes=d["num_nodes"] + 1),
        "num_nodes-1": lambda d: d.update(num_nodes=d["num_nodes"] - 1),
        "num_nodes-1e12-consistent": counts(10**12, 10),
        "num_edges-2^40-consistent": lambda d: (d.update(num_edges=2**40), both("indices", 2**40, 4)(d)),
        "labels.shape-x2": both("labels", 1200, 8),
        "labels.shape-1e12": both("labels", 10**12, 8),
        "split.train-1e12": both("split_train", 10**12, 8),
        "split.train-2d": put(("splits", "train", "shape"), [10, 10]),
        "features.stride-3": put(("features", "stride"), 3),
        "features.dim-1e9": put(("features", "dim"), 10**9),
        "features.nbytes-x2": lambda d: d["features"].update(nbytes=d["features"]["nbytes"] * 2),
        "features.row_bytes-0": put(("features", "row_bytes"), 0),
        "features.layout-odd": put(("features", "layout"), "zigzag"),
        "indptr.shape-negative": put(("indptr", "shape"), [-5]),
        "indptr.nbytes-string": put(("indptr", "nbytes"), "16008"),
        "num_nodes-float": lambda d: d.update(num_nodes=float(d["num_nodes"])),
        "num_classes-0": put(("num_classes",), 0),
        "num_classes-true": put(("num_classes",), True),
        "splits-list": put(("splits",), []),
        "split-name-odd": lambda d: d["splits"].update({"../evil": d["splits"]["train"]}),
        "meta-list": put(("meta",), [1, 2]),
    }
    return [Damage("manifest-sizes", k, "dataset", _manifest(v)) for k, v in edits.items()]


def path_escapes() -> list[Damage]:
    """Files named by absolute paths, ``..``, separators or symlinks out of the folder; the partition
    folder, its files, ``partitions/`` itself, and partition names given as paths."""
    out: list[Damage] = []
    for key in ("indptr", "indices", "features", "labels", "split_train"):
        for style in ("absolute", "dotdot", "subdir", "symlink", "symlink-abs-dir"):
            out.append(Damage("path-escape", f"{key}-{style}", "dataset", _dataset_escape(key, style), escape=True))
    for stem in ("adj_indices", "part_nodes", "adj_ptr", "assignment"):
        for style in ("absolute", "dotdot", "symlink"):
            out.append(Damage("path-escape", f"part.{stem}-{style}", "partition", _part_escape(stem, style),
                              escape=True))
    out.append(Damage("path-escape", "partitions-dir-symlink", "partition", _partitions_symlink, escape=True))
    out.append(Damage("path-escape", "part-folder-symlink", "partition", _part_folder_symlink, escape=True))
    for label, make in {"name-absolute": lambda w: str(w / "outside"), "name-dotdot": lambda w: "../../outside",
                        "name-etc": lambda w: "/etc", "name-dot": lambda w: ".", "name-trailing-slash": lambda w: f"{PART}/"}.items():
        out.append(Damage("path-escape", label, "name", make, escape=True))
    return out


def _dataset_escape(key: str, style: str) -> Callable[[Path], None]:
    def apply(w: Path) -> None:
        doc = json.loads((w / "ds" / "manifest.json").read_text())
        e = doc["splits"]["train"] if key == "split_train" else doc[key]
        target = w / "outside" / e["file"]
        if style == "absolute":
            e["file"] = str(target)
        elif style == "dotdot":
            e["file"] = f"../outside/{e['file']}"
        elif style == "subdir":
            (w / "ds" / "sub").mkdir()
            shutil.move(w / "ds" / e["file"], w / "ds" / "sub" / e["file"])
            e["file"] = f"sub/{e['file']}"
        elif style == "symlink":
            (w / "ds" / e["file"]).unlink()
            (w / "ds" / e["file"]).symlink_to(target)
        else:  # a relative-looking name whose symlinked parent leaves the folder
            (w / "ds" / e["file"]).unlink()
            (w / "ds" / "link").symlink_to(w / "outside", target_is_directory=True)
            e["file"] = f"link/{e['file']}"
        (w / "ds" / "manifest.json").write_text(json.dumps(doc))
    return apply


def _part_escape(stem: str, style: str) -> Callable[[Path], None]:
    def apply(w: Path) -> None:
        folder = w / "ds" / "partitions" / PART
        doc = json.loads((folder / "meta.json").read_text())
        e = doc["files"][stem]
        target = w / "outside" / PART / e["file"]
        if style == "absolute":
            e["file"] = str(target)
        elif style == "dotdot":
            e["file"] = f"../../../outside/{PART}/{e['file']}"
        else:
            (folder / e["file"]).unlink()
            (folder / e["file"]).symlink_to(target)
        (folder / "meta.json").write_text(json.dumps(doc))
    return apply


def _partitions_symlink(w: Path) -> None:
    shutil.rmtree(w / "ds" / "partitions")
    (w / "outside" / "partitions").mkdir()
    shutil.move(w / "outside" / PART, w / "outside" / "partitions" / PART)
    (w / "ds" / "partitions").symlink_to(w / "outside" / "partitions", target_is_directory=True)


def _part_folder_symlink(w: Path) -> None:
    shutil.rmtree(w / "ds" / "partitions" / PART)
    (w / "ds" / "partitions" / PART).symlink_to(w / "outside" / PART, target_is_directory=True)


def bad_ids() -> list[Damage]:
    """Negative or out-of-range ids in what kernels index with, checksums recomputed."""
    big = 2**31 - 1
    out = [Damage("bad-ids", f"indices[{i}]={v}", "dataset", _array("indices", _set(i, v)))
           for i, v in ((0, -1), (5, 600), (-1, big), (100, -(2**31)))]
    out += [Damage("bad-ids", f"split_train[0]={v}", "dataset", _array("split_train", _set(0, v)))
            for v in (-1, 600, 2**40)]
    out += [Damage("bad-ids", "split_train-dup", "dataset", _array("split_train", lambda a: np.r_[a, a[:1]])),
            Damage("bad-ids", "split-overlap", "dataset", _split_overlap),
            Damage("bad-ids", "labels[3]=-2", "dataset", _array("labels", _set(3, -2))),
            Damage("bad-ids", "labels[3]=num_classes", "dataset", _array("labels", _set(3, 10**6)))]
    for stem, values in {"part_nodes": (-1, 600, 0), "adj_indices": (-1, 600, big), "train_nodes": (-1, 600),
                         "assignment": (-1, 4, 99), "cross": (-1, 10**6)}.items():
        for v in values:
            out.append(Damage("bad-ids", f"part.{stem}[7]={v}", "partition",
                              _array(stem, _set(7, v), partition=True), unread_by=_unread(stem)))
    out.append(Damage("bad-ids", "part.adj_indices-stale-crc", "partition",
                      _array("adj_indices", _set(0, -7), partition=True, fix_crc=False), unread_by=_unread("adj_indices")))
    return out


def _unread(stem: str) -> tuple[str, ...]:
    """``adj_indices`` (O(E)) is range-checked as blocks of it are read, never scanned at open: the
    redundancy statistic never reads it, so its damage cannot change that result."""
    return ("stats",) if stem == "adj_indices" else ()


def _split_overlap(w: Path) -> None:
    train = np.fromfile(w / "ds" / "split_train.bin", dtype=np.int64)
    _array("split_test", lambda a: np.r_[a[:-1], train[:1]])(w)


def non_monotone() -> list[Damage]:
    """Offsets that go down or do not run from 0 to their total."""
    out = [Damage("non-monotone", "indptr-swap", "dataset", _array("indptr", _swap(10, 50))),
           Damage("non-monotone", "indptr[0]=1", "dataset", _array("indptr", _set(0, 1))),
           Damage("non-monotone", "indptr-last-short", "dataset", _array("indptr", _set(-1, 5))),
           Damage("non-monotone", "indptr-stale-crc", "dataset", _array("indptr", _swap(10, 50), fix_crc=False))]
    for stem in ("part_ptr", "train_ptr", "adj_ptr"):
        out += [Damage("non-monotone", f"part.{stem}-swap", "partition", _array(stem, _swap(1, 2), partition=True)),
                Damage("non-monotone", f"part.{stem}-last+1", "partition",
                       _array(stem, lambda a: (a.__setitem__(-1, a[-1] + 1), a)[1], partition=True)),
                Damage("non-monotone", f"part.{stem}[1]=-5", "partition", _array(stem, _set(1, -5), partition=True))]
    out.append(Damage("non-monotone", "part.adj_ptr-lengths-shifted", "partition",
                      _array("adj_ptr", lambda a: (a.__setitem__(slice(1, -1), a[2:]), a)[1], partition=True)))
    return out


def bad_dtypes() -> list[Damage]:
    """dtypes outside the allow-lists in the manifest or the partition meta."""
    out: list[Damage] = []
    for key, dtypes in {"indices": ("float32", "int16", "object", "<U4", "uint32"),
                        "indptr": ("int32", "float64"), "labels": ("float64",), "features": ("int8", "object")}.items():
        for dt in dtypes:
            out.append(Damage("bad-dtype", f"{key}={dt}", "dataset", _manifest(_put_dtype(key, dt))))
    for stem, dtypes in {"adj_indices": ("float32", "int64", "object"), "assignment": ("int64", "uint32"),
                         "part_nodes": ("S8", "int32"), "adj_ptr": ("float64",), "cross": ("int16",)}.items():
        for dt in dtypes:
            out.append(Damage("bad-dtype", f"part.{stem}={dt}", "partition", _meta(_put_dtype(stem, dt))))
    out.append(Damage("bad-dtype", "part.adj_indices=list", "partition", _meta(_put_dtype("adj_indices", ["int32"]))))
    return out


def _put_dtype(key: str, dtype: Any) -> Callable[[Doc], None]:
    return lambda d: _entry_of(d, key).update(dtype=dtype)


def truncated() -> list[Damage]:
    """Files cut short, emptied, missing or replaced by a folder; JSON cut mid-way."""
    out: list[Damage] = []
    for f in ("indptr.bin", "indices.bin", "features.bin", "labels.bin", "split_train.bin", "manifest.json"):
        for how in ("half", "empty", "missing", "dir"):
            out.append(Damage("truncated", f"{f}-{how}", "dataset", _cut(Path(f), how)))
    for stem in ("assignment", "part_ptr", "part_nodes", "adj_ptr", "adj_indices", "cross", "meta"):
        f = Path("partitions") / PART / (f"{stem}.bin" if stem != "meta" else "meta.json")
        for how in ("half", "empty", "missing"):
            out.append(Damage("truncated", f"part.{stem}-{how}", "partition", _cut(f, how)))
    return out


def _cut(rel: Path, how: str) -> Callable[[Path], None]:
    def apply(w: Path) -> None:
        f = w / "ds" / rel
        data = f.read_bytes()
        if how == "half":
            f.write_bytes(data[: len(data) // 2])
        elif how == "empty":
            f.write_bytes(b"")
        else:
            f.unlink()
            if how == "dir":
                f.mkdir()
    return apply


def zip_members() -> list[Damage]:
    """``.npz`` inputs whose members lie about their size or hold what the schema forbids."""
    def npz(**members: Any) -> Callable[[Path], None]:
        def apply(w: Path) -> None:
            with zipfile.ZipFile(w / "ds" / "in.npz", "w", zipfile.ZIP_DEFLATED) as zf:
                for name, value in members.items():
                    zf.writestr(f"{name}.npy", value if isinstance(value, bytes) else _npy(np.asarray(value)))
        return apply

    ei = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    huge = _npy_header((1 << 30, 4), "<f4") + b"\0" * 1024
    variants = {
        "x-header-4GiB": npz(edge_index=ei, x=huge),
        "edge_index-header-huge": npz(edge_index=_npy_header((2, 1 << 40), "<i8") + b"\0" * 64),
        "x-header-short": npz(edge_index=ei, x=_npy_header((4, 3), "<f4") + b"\0" * 8),
        "edge_index-negative": npz(edge_index=np.array([[0, -1], [1, 0]])),
        "edge_index-float": npz(edge_index=ei.astype(np.float64) + 0.5),
        "train_idx-float": npz(edge_index=ei, train_idx=np.array([0.5, 1.7])),
        "train_idx-out-of-range": npz(edge_index=ei, train_idx=np.array([0, 9])),
        "num_nodes-float": npz(edge_index=ei, num_nodes=np.array(4.5)),
        "num_nodes-small": npz(edge_index=ei, num_nodes=np.array(2)),
        "not-a-zip": lambda w: (w / "ds" / "in.npz").write_bytes(b"PK\x03\x04 this is not a zip"),
        "train-test-overlap": npz(edge_index=ei, train_idx=np.array([0, 1]), test_idx=np.array([1, 2])),
    }
    return [Damage("zip-members", k, "npz", v) for k, v in variants.items()]


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npy_header(shape: tuple[int, ...], descr: str) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


CLASSES: dict[str, Callable[[], list[Damage]]] = {
    "manifest-sizes": manifest_sizes, "path-escape": path_escapes, "bad-ids": bad_ids,
    "non-monotone": non_monotone, "bad-dtype": bad_dtypes, "truncated": truncated, "zip-members": zip_members,
}


def all_damage() -> list[Damage]:
    return [d for make in CLASSES.values() for d in make()]


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (not following symlinks): its kind and content checksum or link."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = f"{zlib.crc32(p.read_bytes()):08x}"
    return out
