"""Getting graphs into the store: importers (PyG, npz, OGB, edge lists larger than RAM), the external-memory
CSC builder and the synthetic DC-SBM generator."""

from ._convert import convert, from_edge_list, from_npz, from_ogb, from_pyg, write_dataset
from ._generate import PRESETS, GeneratorConfig, generate

__all__ = ["PRESETS", "GeneratorConfig", "convert", "from_edge_list", "from_npz", "from_ogb", "from_pyg", "generate", "write_dataset"]
