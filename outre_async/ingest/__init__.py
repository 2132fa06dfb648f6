"""Getting graphs into the store: importers (PyG, npz, OGB, edge lists larger than RAM), the external-memory
CSC builder and the synthetic DC-SBM generator.

Names are imported on first use (PEP 562): the CLI's parsers read the registries (``_formats.FORMATS``)
without loading numba's kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _lazy_attribute

if TYPE_CHECKING:  # the names as mypy and editors see them; at run time each is imported on first use
    from ._arrays import write_dataset
    from ._convert import convert
    from ._edge_list import from_edge_list
    from ._gen_config import PRESETS, GeneratorConfig
    from ._generate import generate
    from ._npz import from_npz
    from ._ogb import from_ogb
    from ._pyg import from_pyg
    from ._recast import recast
    from ._split_edges import split_edges

_LAZY = {
    "write_dataset": "._arrays",
    "convert": "._convert",
    "from_edge_list": "._edge_list",
    "PRESETS": "._gen_config",
    "GeneratorConfig": "._gen_config",
    "generate": "._generate",
    "split_edges": "._split_edges",
    "from_npz": "._npz",
    "from_ogb": "._ogb",
    "from_pyg": "._pyg",
    "recast": "._recast",
}

__all__ = ["PRESETS", "GeneratorConfig", "convert", "from_edge_list", "from_npz", "from_ogb", "from_pyg", "generate", "recast",
           "split_edges", "write_dataset"]


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
