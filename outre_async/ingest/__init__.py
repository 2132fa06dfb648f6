"""Getting graphs into the store: importers (PyG, npz, OGB, edge lists larger than RAM), the external-memory
CSC builder and the synthetic DC-SBM generator."""

from ._arrays import write_dataset
from ._convert import convert
from ._edge_list import from_edge_list
from ._gen_config import PRESETS, GeneratorConfig
from ._generate import generate
from ._npz import from_npz
from ._ogb import from_ogb
from ._pyg import from_pyg

__all__ = ["PRESETS", "GeneratorConfig", "convert", "from_edge_list", "from_npz", "from_ogb", "from_pyg", "generate", "write_dataset"]
