"""Out-of-core layer-wise inference (:func:`inference`): full-neighbourhood outputs for every node,
one layer at a time, each layer's h spilled to a temporary feature file read back through the same
sources.  Sits beside the loader: ``layerwise -> loader (loop thread), features, store``."""

from ._layerwise import inference

__all__ = ["inference"]
