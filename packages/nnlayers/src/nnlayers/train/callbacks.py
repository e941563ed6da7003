"""Callbacks: code ``fit`` runs at the start and end of training and of every epoch.

Subclass :class:`Callback` and override the hooks you need; ``self.model``, ``self.history``
and ``self.state`` (set ``self.state.stop = True`` to stop after this epoch) are available.
Nothing runs per step, so callbacks cost nothing while the device works.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import check_target
from .history import History, resolve_mode

if TYPE_CHECKING:
    from ..models.model import Model
    from .fit import TrainingState


class Callback:
    """Base class: every hook does nothing."""

    state: TrainingState

    @property
    def model(self) -> Model:
        """The model being trained."""
        return self.state.model

    @property
    def history(self) -> History:
        """The run's history (grows by one record per epoch)."""
        return self.state.history

    def on_train_begin(self) -> None:
        """Before the first epoch (a resuming checkpoint restores here)."""

    def on_epoch_begin(self, epoch: int) -> None:
        """Before epoch ``epoch`` (1-based)."""

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        """After epoch ``epoch`` with its metrics (validation ones prefixed ``val_``)."""

    def on_train_end(self) -> None:
        """After the last epoch (also when training stops early or fails)."""


class CallbackList:
    """Calls every callback's hook in order."""

    def __init__(self, callbacks: Sequence[Callback], state: TrainingState) -> None:
        self.callbacks = list(callbacks)
        for c in self.callbacks:
            if not isinstance(c, Callback):
                raise TypeError(f"fit: callbacks must be Callback objects, got {c!r}")
            c.state = state

    def on_train_begin(self) -> None:
        for c in self.callbacks:
            c.on_train_begin()

    def on_epoch_begin(self, epoch: int) -> None:
        for c in self.callbacks:
            c.on_epoch_begin(epoch)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        for c in self.callbacks:
            c.on_epoch_end(epoch, logs)

    def on_train_end(self) -> None:
        for c in self.callbacks:
            c.on_train_end()


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    epochs; with ``restore_best`` the parameters of the best epoch are put back at the end.

    ``mode="auto"`` maximises accuracies and minimises everything else. The best weights are
    copied to the host only when the monitored value improves.

    >>> EarlyStopping("val_accuracy", patience=3)
    EarlyStopping(monitor='val_accuracy', patience=3, mode='max')
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        patience: int = 5,
        *,
        min_delta: float = 0.0,
        mode: str = "auto",
        restore_best: bool = True,
    ) -> None:
        if patience < 0:
            raise ValueError(f"EarlyStopping: patience must be >= 0, got {patience}")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(min_delta)
        self.mode = resolve_mode(monitor, mode)
        self.restore_best = restore_best
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch = 0
        self._weights: dict[str, np.ndarray] | None = None

    def on_train_begin(self) -> None:
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch = 0
        self._weights = None

    def _improved(self, value: float) -> bool:
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if self.monitor not in logs:
            raise KeyError(
                f"EarlyStopping: no metric {self.monitor!r} this epoch (have "
                f"{', '.join(logs)}); pass validation= to fit for val_ metrics"
            )
        value = float(logs[self.monitor])
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best:
                self._weights = self.model.state_dict()
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.state.stop = True

    def on_train_end(self) -> None:
        if self.restore_best and self._weights is not None and self.stopped_epoch:
            self.model.load_state_dict(self._weights)

    def __repr__(self) -> str:
        return (
            f"EarlyStopping(monitor={self.monitor!r}, patience={self.patience}, mode={self.mode!r})"
        )


class Checkpoint(Callback):
    """Save the model, its optimisers' state, the epoch and the history to ``path`` (a
    safetensors file, written atomically) after every ``every`` epochs, or only when
    ``monitor`` improves (``save_best_only``).

    With ``resume=True`` an existing file at ``path`` is restored when training begins, so
    running the same script again continues where it stopped (``fit`` then trains the epochs
    still missing).

    ``path`` is checked when training begins, before the first epoch: an empty path, a folder
    or a path into a folder that does not exist raises there, naming it, rather than after an
    epoch of training.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        every: int = 1,
        monitor: str | None = None,
        mode: str = "auto",
        save_best_only: bool = False,
        resume: bool = False,
    ) -> None:
        if save_best_only and monitor is None:
            raise ValueError("Checkpoint: save_best_only needs a monitor (e.g. 'val_loss')")
        if not os.fspath(path).strip():
            raise ValueError(
                f"Checkpoint: path {os.fspath(path)!r} is empty: name a file, such as "
                f"'model.safetensors'"
            )
        self.path = Path(path)
        self.every = max(1, int(every))
        self.monitor = monitor
        self.mode = resolve_mode(monitor or "loss", mode)
        self.save_best_only = save_best_only
        self.resume = resume
        self.best = math.inf if self.mode == "min" else -math.inf
        self.saved: list[int] = []
        self.resumed_from: int | None = None

    def on_train_begin(self) -> None:
        from .checkpoints import restore

        check_target(self.path, "checkpoint")
        if self.resume and self.path.exists():
            restore(self.model, self.path)
            self.resumed_from = self.model.epoch

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        from .checkpoints import save

        if self.save_best_only:
            assert self.monitor is not None
            value = float(logs[self.monitor])
            better = value < self.best if self.mode == "min" else value > self.best
            if not better:
                return
            self.best = value
        elif epoch % self.every and epoch != self.state.epochs:
            return
        save(self.model, self.path)
        self.saved.append(epoch)

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, every={self.every}, resume={self.resume})"


class PlotCurves(Callback):
    """Save the loss and accuracy curves (training and validation) as a PNG after each epoch.

    ``metrics`` picks the panels (default: ``loss`` and, when tracked, ``accuracy``); with
    ``every=k`` it draws every ``k`` epochs and once more at the end. Needs matplotlib
    (``pip install "nnlayers[plot]"``).
    """

    def __init__(
        self, path: str | Path, metrics: Sequence[str] | None = None, *, every: int = 1
    ) -> None:
        self.path = Path(path)
        self.metrics = list(metrics) if metrics is not None else None
        self.every = max(1, int(every))
        self._drawn = 0

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if epoch % self.every == 0:
            self._draw()

    def on_train_end(self) -> None:
        if len(self.history) and self._drawn != len(self.history):
            self._draw()

    def _draw(self) -> None:
        from ..plotting import plot_history

        names = self.metrics
        if names is None:
            names = [m for m in ("loss", "accuracy") if m in self.history]
            names = names or [k for k in self.history.keys() if not _bookkeeping(k)][:2]  # noqa: SIM118
        plot_history(self.history, self.path, metrics=names)
        self._drawn = len(self.history)

    def __repr__(self) -> str:
        return f"PlotCurves({str(self.path)!r})"


def _bookkeeping(name: str) -> bool:
    return name in ("time", "examples_per_second", "peak_device_mb") or name.startswith("val_")


__all__ = ["Callback", "CallbackList", "Checkpoint", "EarlyStopping", "PlotCurves"]
