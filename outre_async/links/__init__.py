"""Link prediction evaluation: :func:`evaluate_links` ranks held-out pairs against candidates with
embeddings from layer-wise inference and streaming, chunked scoring.
Sits beside the trainer: ``links -> layerwise, store``."""

from ._evaluate import dot, evaluate_links

__all__ = ["dot", "evaluate_links"]
