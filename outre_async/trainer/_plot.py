"""The time-to-accuracy plot (validation and test accuracy over wall-clock seconds), when matplotlib
is installed (``pip install -e '.[bench]'``); without it nothing is drawn and the caller says so."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ._files import write_atomic


def plot_time_to_accuracy(path: Path, epochs: list[dict[str, Any]], title: str, metric: str = "accuracy") -> bool:
    """Write the PNG atomically; False when matplotlib is missing or there is nothing evaluated yet.
    ``metric``: the rows' ``val_<metric>`` and ``test_<metric>`` (``mrr`` for link prediction)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    points = [e for e in epochs if e.get(f"val_{metric}") is not None]
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in ((f"val_{metric}", "validation"), (f"test_{metric}", "test")):
        ax.plot([e["elapsed_seconds"] for e in points], [e[key] for e in points], marker="o", label=label)
    ax.set_xlabel("seconds (training + evaluation)")
    ax.set_ylabel(f"{metric} (layer-wise full-neighbourhood inference)")
    ax.set_title(title)
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return True
