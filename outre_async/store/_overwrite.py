"""``overwrite`` replaces only what we wrote (git refuses to clone into a non-empty folder).

An existing output may be replaced only when it is

* an empty folder, or
* an outre folder of the kind being written (a dataset: ``manifest.json`` parses; a partition
  folder: ``meta.json`` is ours) holding nothing but the entries that outre wrote there (the files
  its manifest or meta names, a dataset's ``partitions/`` and ``profile/``, our temp folders),

and never when it holds the input being converted.  Anything else, a file, a symlink, a project
folder, raises :class:`OverwriteRefusedError` naming the reason, before any work and again right
before the install, and nothing is changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..errors import DatasetError, OverwriteRefusedError
from ._manifest import MANIFEST_NAME, read_manifest
from ._safe_read import read_json
from ._tempdir import parse_temp_name
from ._type_manifest import type_files

DATASET_SUBFOLDERS = ("partitions", "profile")  # written by outre into a dataset folder
OwnedNames = Callable[[Path], Iterable[str]]


def check_overwrite(out: Path, *, owned: OwnedNames, what: str, inputs: Sequence[Path] = ()) -> None:
    """Raise :class:`OverwriteRefusedError` unless replacing ``out`` would destroy only what outre
    wrote (module docstring).  ``owned(out)`` returns the entry names outre wrote in a valid folder
    of kind ``what`` and raises :class:`OverwriteRefusedError` when it is not one."""
    if not os.path.lexists(out):
        return
    if out.is_symlink():
        raise _refuse(out, what, "is a symbolic link; outre replaces only folders it wrote")
    if not out.is_dir():
        raise _refuse(out, what, f"is a file, not a {what} folder")
    for src in inputs:
        if _inside(src, out):
            raise _refuse(out, what, f"contains the input {src}; write the {what} somewhere else")
    present = set(os.listdir(out))
    if not present:
        return
    ours = set(owned(out))
    foreign = sorted(n for n in present - ours if parse_temp_name(n) is None)
    if foreign:
        shown = ", ".join(repr(n) for n in foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise _refuse(out, what, f"holds {shown}, which outre did not write; move them away or choose "
                                 f"another output")


def refuse_not_ours(out: Path, what: str, why: str) -> OverwriteRefusedError:
    """The error ``owned`` raises for a folder that is not a valid one of ``what``."""
    return _refuse(out, what, f"is not empty and is not an outre {what} ({why}); --overwrite replaces only "
                              f"an outre {what} or an empty folder")


def meta_folder_names(path: Path, what: str, meta_name: str, format_name: str) -> set[str]:
    """The ``owned`` rule of a folder described by a JSON meta (partitions, profiles): the meta, of
    ``format_name``, and every file its ``files`` entries name; anything else is :func:`refuse_not_ours`."""
    try:  # bounded, regular-file-only JSON (``_safe_read``): a FIFO or huge meta is "not ours", never a hang
        meta = read_json(path / meta_name, error=OverwriteRefusedError, fix=f"it is not an outre {what}")
    except FileNotFoundError as exc:
        raise refuse_not_ours(path, what, f"no {meta_name}") from exc
    except OverwriteRefusedError as exc:
        raise refuse_not_ours(path, what, f"{meta_name} unreadable: {exc}") from exc
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != format_name or not isinstance(files, dict):
        raise refuse_not_ours(path, what, f"{meta_name} is not an outre {what.split()[0]} meta")
    names = {meta_name}
    for entry in files.values():
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise refuse_not_ours(path, what, f"{meta_name} has a malformed 'files' entry")
        names.add(entry["file"])
    return names


def dataset_names(out: Path) -> set[str]:
    """The ``owned`` rule of a dataset folder: manifest, the files it names, partitions/, profile/."""
    try:
        m = read_manifest(out)
    except DatasetError as exc:  # ManifestError, and whatever else the parser refuses
        raise refuse_not_ours(out, "dataset", str(exc)) from exc
    except FileNotFoundError as exc:
        raise refuse_not_ours(out, "dataset", f"no {MANIFEST_NAME}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise refuse_not_ours(out, "dataset", f"{MANIFEST_NAME} unreadable: {exc}") from exc
    entries = [m.indptr, m.indices, m.features, m.labels, *m.splits.values(), m.original_ids, m.new_ids,
               *m.edge_splits.values(), *([] if m.features is None else m.features.param_files)]
    typed = [] if m.types is None else [name for _, name, _ in type_files(m.types)]
    return {MANIFEST_NAME, *DATASET_SUBFOLDERS, *(e.file for e in entries if e is not None), *typed}


def _inside(src: Path, out: Path) -> bool:
    src_real, out_real = os.path.realpath(src), os.path.realpath(out)
    return os.path.commonpath([src_real, out_real]) == out_real


def _refuse(out: Path, what: str, why: str) -> OverwriteRefusedError:
    return OverwriteRefusedError(f"refusing to overwrite {out}: it {why}")
