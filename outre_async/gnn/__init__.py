"""PyG's ``BasicGNN`` models as they are, with our history and layer-wise inference.

``_history_hook`` (``with_history``: hooks on PyG's own ``BasicGNN.forward`` that exchange h^(L-1)
with the historical embedding cache) and ``_basic_gnn`` (a BasicGNN's layer ``i`` from its ``convs``,
activation, norms and dropout: the protocol ``oa.inference`` applies layer by layer).  Nothing here
imports the loader or the store: ``nn`` and ``layerwise`` use it."""
