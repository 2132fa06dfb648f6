"""``outre train``: the training run (loader, layer-wise evaluation, checkpoints, metrics, plot).
Sits on top: ``trainer -> layerwise, loader, nn``.

The names are imported on first access (PEP 562): ``outre``'s parser imports ``trainer._cli`` for
``train``'s arguments, which must not pay for torch and PyG (~3 s) before the verb runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _lazy_attribute

if TYPE_CHECKING:  # the names as mypy and editors see them; at run time each is imported on first use
    from ._config import TrainConfig
    from ._run import build_model, run_train

_LAZY = {"TrainConfig": "._config", "build_model": "._run", "run_train": "._run"}

__all__ = ["TrainConfig", "build_model", "run_train"]


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
