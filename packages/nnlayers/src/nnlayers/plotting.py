"""Training curves as PNG files (matplotlib, an optional extra: ``pip install "nnlayers[plot]"``).

matplotlib is imported only when a plot is made, and drawn through its Agg canvas directly,
without pyplot: no window opens and the process-wide matplotlib backend is left alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._atomic import atomic_write

_INSTALL = 'pip install "nnlayers[plot]"'


def _matplotlib() -> tuple[Any, Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib, which is not installed: {_INSTALL}") from exc
    return Figure, FigureCanvasAgg, MaxNLocator


def plot_history(
    history: Any,
    path: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Path:
    """Save one panel per metric (training and, when present, ``val_`` curves) as a PNG.

    ``history`` maps metric names to per-epoch values: a ``dict[str, list[float]]`` or
    :class:`nnlayers.train.History`. The x axis is its ``"epoch"`` list (or ``epochs``
    attribute) when it has one, else 1, 2, ... ``metrics`` picks the panels; by default
    ``loss`` and ``accuracy`` where present, else every metric that is not a ``val_`` one.
    NaN values (an epoch without that metric) leave gaps. The file is replaced atomically.
    Returns the path written.

    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> history = {
    ...     "loss": [1.0, 0.6, 0.4],
    ...     "val_loss": [1.1, 0.8, 0.7],
    ...     "accuracy": [0.5, 0.7, 0.8],
    ... }
    >>> plot_history(history, out).name
    'curves.png'
    """
    names = _keys(history)
    if metrics is None:
        metrics = [m for m in ("loss", "accuracy") if m in names]
        if not metrics:
            metrics = [m for m in names if not m.startswith("val_") and m != "epoch"]
    metrics = list(metrics)
    if not metrics:
        raise ValueError("plot_history: the history has no metric to plot")
    missing = [m for m in metrics if m not in names and f"val_{m}" not in names]
    if missing:
        raise ValueError(
            f"plot_history: no metric {', '.join(map(repr, missing))} in the history; it has "
            f"{', '.join(map(repr, names)) or 'nothing'}"
        )
    curves = {n: [float(v) for v in history[n]] for n in names if n != "epoch"}
    lengths = {len(v) for v in curves.values()}
    length = max(lengths, default=0)
    epochs = _epochs(history, names, length)

    Figure, FigureCanvasAgg, MaxNLocator = _matplotlib()
    fig = Figure(figsize=(5.0 * len(metrics), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        for name, label, style in (
            (metric, "training", "-"),
            (f"val_{metric}", "validation", "--"),
        ):
            values = curves.get(name)
            if values is None or all(math.isnan(v) for v in values):
                continue
            ax.plot(epochs[: len(values)], values, style, marker="o", markersize=3, label=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(metric)
        ax.set_title(metric)
        ax.grid(True, alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    target = Path(path)
    with atomic_write(target, durable=False) as out:
        fig.savefig(out, format="png", dpi=100)
    return target


def _keys(history: Any) -> list[str]:
    keys = history.keys() if hasattr(history, "keys") else None
    if keys is None or not hasattr(history, "__getitem__"):
        raise TypeError(
            f"plot_history: history must map metric names to lists of values, got "
            f"{type(history).__name__}"
        )
    return [str(k) for k in keys]


def _epochs(history: Any, names: list[str], length: int) -> list[float]:
    if "epoch" in names:
        epochs = [float(e) for e in history["epoch"]]
    elif hasattr(history, "epochs"):
        epochs = [float(e) for e in history.epochs]
    else:
        epochs = []
    if len(epochs) < length:
        epochs = [float(i + 1) for i in range(length)]
    return epochs


__all__ = ["plot_history"]
