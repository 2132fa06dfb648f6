"""The input formats ``outre convert`` reads, by name (the registry ``--format`` offers), apart from the
importers so that naming them loads none of them."""

from __future__ import annotations

FORMATS = ("ogb", "npz", "pyg", "edgelist", "binary")
