"""``outre train``: the training run (loader, layer-wise evaluation, checkpoints, metrics, plot).
Sits on top: ``trainer -> layerwise, loader, nn``."""

from ._config import TrainConfig
from ._run import build_model, run_train

__all__ = ["TrainConfig", "build_model", "run_train"]
