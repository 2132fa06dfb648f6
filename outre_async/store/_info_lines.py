"""``outre info``'s text for a dataset: a line per count, the in-degree statistics, the features (or,
for a typed dataset, a line per node and edge type), classes, splits and file sizes.

Apart from the CLI because it formats only what :meth:`Dataset.summary` returns, beside the reader
that fills it: the CLI's ``info`` verb opens the dataset, adds ``--verify`` and the partitions' lines
(``partition._cli``), and prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._units import format_bytes


def dataset_lines(s: dict[str, Any], index_dtype: np.dtype) -> list[str]:
    """The lines of the summary ``s`` (``Dataset.summary``); ``index_dtype``: the dtype of ``indices``."""
    deg = s["in_degree"]
    return [
        f"dataset      {s['path']}",
        f"nodes        {s['num_nodes']:,}",
        f"edges        {s['num_edges']:,}  ({index_dtype} ids)",
        f"in-degree    mean {deg['mean']:.2f}  median {deg['median']:.0f}  p99 {deg['p99']:.0f}  "
        f"max {deg['max']:,}  isolated {deg['isolated']:,}",
        *(_type_lines(s["types"]) if s["types"] else
          [f"features     {s['feature_dim']} x {s['feature_dtype']}  {s['row_layout']}{_encoding_line(s)}"]),
        f"classes      {s['num_classes']}",
        "splits       " + ("  ".join(f"{k} {v:,}" for k, v in s["splits"].items()) or "none"),
        *(["edge splits  " + "  ".join(f"{k} {v:,}" for k, v in s["edge_splits"].items())] if s["edge_splits"] else []),
        f"size         {format_bytes(s['total_bytes'])}  "
        + "  ".join(f"{k} {format_bytes(v)}" for k, v in s["bytes"].items()),
    ]


def _encoding_line(s: dict[str, Any]) -> str:
    """What ``outre info`` adds to the features line: the stored words of bfloat16, an int8 entry's
    quantizer and scales, and the error of the cast that wrote them."""
    enc, cast = s["feature_encoding"] or {}, s["meta"].get("feature_cast")
    text = f"  stored as {enc['stored_as']}" if enc and enc["stored_as"] != enc["encoding"] else ""
    if "quantizer" in enc:
        text += (f"  {enc['quantizer']} scales {enc['scale_min']:.3g}..{enc['scale_max']:.3g}"
                 f" (values {enc['range_min']:.3g}..{enc['range_max']:.3g})")
    if cast:
        text += f"  cast error: max abs {cast['max_abs_error']:.3g}, relative RMS {cast['relative_rms']:.3g}"
    return text


def _type_lines(types: dict[str, Any]) -> list[str]:
    """``outre info``'s lines for a typed dataset: a node type a line (count, features, target), then an
    edge type a line (edge count)."""
    nodes, edges = types["node_types"], types["edge_types"]
    width = max(len(n) for n in nodes)
    count = max(len(f"{t['count']:,}") for t in nodes.values())
    lines = []
    for name, t in nodes.items():
        feats = f"features {t['feature_dim']} x {t['feature_dtype']}" if t["feature_dim"] else "featureless"
        target = "  (target)" if name in types["target_types"] else ""
        lines.append(f"node type    {name:<{width}}  {t['count']:>{count},}  {feats}{target}")
    ewidth = max(len(e) for e in edges)
    lines += [f"edge type    {name:<{ewidth}}  {n:,}" for name, n in edges.items()]
    return lines
