"""The rule for node and edge type names of a heterogeneous dataset, in one place.

A type name becomes part of a file name (``features__paper.bin``), a key of the manifest and, joined
with ``__``, the name of an edge type (``author__writes__paper``, the npz schema's form).  So a name is
letters, digits, ``_``, ``.`` and ``-``, starts with a letter or digit, has no ``__`` inside and is at
most :data:`MAX_NAME` characters: it can never be a path, an empty key or split ambiguously.

A homogeneous dataset is the one-type case; its type names, :data:`DEFAULT_NODE_TYPE` and
:data:`DEFAULT_EDGE_TYPE`, start with ``_`` (DGL's names), which no user-given name can.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import OutreError

MAX_NAME = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
DEFAULT_NODE_TYPE = "_N"
DEFAULT_EDGE_TYPE = (DEFAULT_NODE_TYPE, "_E", DEFAULT_NODE_TYPE)
EdgeType = tuple[str, str, str]


def type_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a type name (a message part), or None."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if "__" in name:
        return "holds '__' (the separator of edge type names)"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return (f"is not letters, digits, '_', '.' or '-' starting with a letter or digit, "
                f"at most {MAX_NAME} characters (it must name a file)")
    return None


def check_type_name(name: Any, what: str, error: type[OutreError]) -> str:
    """``name`` when it is a valid type name, else ``error`` naming ``what`` (``"node type"``)."""
    problem = type_name_problem(name)
    if problem is not None:
        raise error(f"{what} name {name!r} {problem}; rename the type")
    return str(name)


def edge_type_str(edge_type: EdgeType) -> str:
    """``src__rel__dst``: the npz schema's name of an edge type."""
    return "__".join(edge_type)


def parse_edge_type(key: Any, error: type[OutreError]) -> EdgeType:
    """An edge type given as a ``(src, rel, dst)`` tuple or list, or as ``"src__rel__dst"``."""
    parts = key.split("__") if isinstance(key, str) else key
    if not isinstance(parts, tuple | list) or len(parts) != 3:
        raise error(f"edge type {key!r} is not (src, rel, dst) nor 'src__rel__dst'; name it by its three parts")
    src, rel, dst = (check_type_name(p, what, error) for p, what in zip(parts, ("source node type", "relation",
                                                                                 "destination node type")))
    return (src, rel, dst)
