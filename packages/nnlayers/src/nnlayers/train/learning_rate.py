"""Callbacks that change the learning rate between epochs: Keras's :class:`ReduceLROnPlateau`
and :class:`LearningRateScheduler`.

An optimiser's ``lr`` (:mod:`nnlayers.optim`) is a float or a schedule (a callable
``step -> rate``). Both callbacks change it between epochs, never during one, and make ``fit``
record the rate each epoch trained with in its record (``"lr"``; ``"lr_generator"`` for a
GAN's second optimiser), so the history, a :class:`~nnlayers.train.CSVLogger` and a
:class:`~nnlayers.train.TensorBoard` show it. A run resumed from a checkpoint (or continued by
a later ``fit`` call with a new callback) picks up from that record, as if it had never
stopped.

>>> ReduceLROnPlateau("val_loss", factor=0.5, patience=2)
ReduceLROnPlateau(monitor='val_loss', factor=0.5, patience=2, mode='min')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..optim.schedules import Scaled
from .callbacks import Callback
from .history import resolve_mode


def _optimizers(owner: str, model: Any) -> list[tuple[str, Any]]:
    """``(history key, optimiser)`` for each optimiser of ``model`` (the keys of
    :func:`nnlayers.train.fit.learning_rates`), checking that each has an ``lr``."""
    found = []
    for i, (name, optimizer) in enumerate(model.optimizers().items()):
        if not hasattr(optimizer, "lr"):
            raise TypeError(
                f"{owner}: the model's optimizer {name!r} ({type(optimizer).__name__}) has no "
                "lr attribute to change; use an optimiser of nnlayers.optim"
            )
        found.append(("lr" if i == 0 else f"lr_{name}", optimizer))
    return found


def _rate(lr: Any) -> float:
    """The number an optimiser's ``lr`` is (not a schedule)."""
    return float(lr)


class ReduceLROnPlateau(Callback):
    """Multiply the learning rate by ``factor`` when ``monitor`` has not improved by more than
    ``min_delta`` for ``patience`` epochs (Keras's callback of this name).

    After a reduction it waits ``cooldown`` epochs before counting again, and it never lowers
    the rate below ``min_lr``. ``mode="auto"`` maximises accuracies and minimises everything
    else. Every optimiser of the model is lowered (a GAN's two).

    - A float ``lr`` becomes ``max(lr * factor, min_lr)``, from the next epoch on.
    - A schedule (``CosineDecay``, any callable ``step -> rate``) keeps its shape and is scaled:
      it becomes :class:`nnlayers.optim.schedules.Scaled` ``(schedule, factor, min_lr)``, and a
      second reduction multiplies that factor.

    Each epoch's record gets ``"lr"``, the rate the epoch trained with (a reduction at the end
    of epoch 5 shows in epoch 6's record); :attr:`reduced` lists the epochs after which the
    rate went down. When a run continues (resumed from a checkpoint, or a later ``fit`` call
    with a new callback), the counters are replayed from the history's monitored values and
    the rate continues from its last ``"lr"``, so training goes on as it would have without the
    stop (a schedule is taken as the run's starting schedule and scaled for the reductions so
    far).
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        factor: float = 0.1,
        patience: int = 10,
        *,
        min_delta: float = 1e-4,
        cooldown: int = 0,
        min_lr: float = 0.0,
        mode: str = "auto",
    ) -> None:
        if not (_real(factor) and 0.0 <= factor < 1.0):
            raise ValueError(
                f"ReduceLROnPlateau: factor must lie in [0, 1) (it multiplies the rate), got "
                f"{factor!r}"
            )
        for name, count in (("patience", patience), ("cooldown", cooldown)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"ReduceLROnPlateau: {name} must be an int >= 0, got {count!r}")
        for name, number in (("min_delta", min_delta), ("min_lr", min_lr)):
            if not _real(number) or (name == "min_lr" and number < 0):
                raise ValueError(f"ReduceLROnPlateau: {name} must be a number >= 0, got {number!r}")
        self.monitor = monitor
        self.factor = float(factor)
        self.patience = patience
        self.min_delta = abs(float(min_delta))
        self.cooldown = cooldown
        self.min_lr = float(min_lr)
        self.mode = resolve_mode(monitor, mode)
        self._reset()
        self._last_epoch = 0
        self._first = True

    def _reset(self) -> None:
        self.best = math.inf if self.mode == "min" else -math.inf
        self.wait = 0
        self.cooldown_counter = 0
        #: The epochs after which the rate was lowered.
        self.reduced: list[int] = []

    def on_train_begin(self) -> None:
        _optimizers("ReduceLROnPlateau", self.model)
        self.state.log_lr = True
        self._first = True

    def on_epoch_begin(self, epoch: int) -> None:
        first, self._first = self._first, False
        if first and self._last_epoch != epoch - 1:
            # not the run this callback saw last: replay the history (a resumed run)
            self._reset()
            self._catch_up(epoch)
        self._last_epoch = epoch - 1

    def _catch_up(self, epoch: int) -> None:
        records = [
            r for r in self.history if r.get("epoch", 0) < epoch and self.monitor in r and "lr" in r
        ]
        lowered = False
        for record in records:
            lowered = self._plateau(float(record[self.monitor]), float(record["lr"]))
            if lowered:
                self.reduced.append(int(record["epoch"]))
        if not records:
            return
        last = records[-1]
        for key, optimizer in _optimizers("ReduceLROnPlateau", self.model):
            if callable(optimizer.lr):
                if self.reduced:
                    optimizer.lr = self._scaled(optimizer.lr, self.factor ** len(self.reduced))
                continue
            rate = float(last.get(key, _rate(optimizer.lr)))
            if lowered and rate > self.min_lr:
                rate = max(rate * self.factor, self.min_lr)
            optimizer.lr = rate

    def _improved(self, value: float) -> bool:
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def _plateau(self, value: float, rate: float) -> bool:
        """One epoch of Keras's rule; ``True`` when the rate (``rate`` now) is to go down."""
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._improved(value):
            self.best, self.wait = value, 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience and rate > self.min_lr:
                self.cooldown_counter, self.wait = self.cooldown, 0
                return True
        return False

    def _scaled(self, schedule: Callable[[int], float], factor: float) -> Scaled:
        if isinstance(schedule, Scaled):
            return Scaled(schedule.schedule, schedule.factor * factor, self.min_lr)
        return Scaled(schedule, factor, self.min_lr)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if self.monitor not in logs:
            raise KeyError(
                f"ReduceLROnPlateau: no metric {self.monitor!r} this epoch (have "
                f"{', '.join(logs)}); pass validation= to fit for val_ metrics"
            )
        optimizers = _optimizers("ReduceLROnPlateau", self.model)
        rate = max(float(optimizer.learning_rate) for _, optimizer in optimizers)
        if self._plateau(float(logs[self.monitor]), rate):
            for _, optimizer in optimizers:
                if callable(optimizer.lr):
                    optimizer.lr = self._scaled(optimizer.lr, self.factor)
                elif _rate(optimizer.lr) > self.min_lr:
                    optimizer.lr = max(_rate(optimizer.lr) * self.factor, self.min_lr)
            self.reduced.append(epoch)
        self._last_epoch = epoch

    def __repr__(self) -> str:
        return (
            f"ReduceLROnPlateau(monitor={self.monitor!r}, factor={self.factor:g}, "
            f"patience={self.patience}, mode={self.mode!r})"
        )


class LearningRateScheduler(Callback):
    """Set the learning rate at the start of each epoch to ``schedule(epoch, lr)``: Keras's
    callback of this name, with nnlayers' 1-based epochs (Keras passes ``epoch - 1``).

    ``lr`` is the rate the optimiser has (the previous epoch's, or the optimiser's own at the
    first epoch), so both forms work: ``lambda epoch, lr: 0.1 * 0.5 ** (epoch // 10)`` and
    ``lambda epoch, lr: lr if epoch < 10 else lr * 0.9``. The value must be a number >= 0.
    Every optimiser of the model gets its own ``schedule(epoch, its lr)``. The optimiser's
    ``lr`` must be a float: a schedule object already sets the rate per step, and replacing it
    each epoch would discard it (an error says so).

    A resumed run passes the rate its history recorded for the last epoch (``"lr"``), so a
    schedule written in terms of ``lr`` continues where it stopped.

    >>> LearningRateScheduler(lambda epoch, lr: lr * 0.9)
    LearningRateScheduler(<lambda>)
    """

    def __init__(self, schedule: Callable[[int, float], float]) -> None:
        if not callable(schedule):
            raise TypeError(
                f"LearningRateScheduler: schedule must be a function (epoch, lr) -> lr, got "
                f"{schedule!r}"
            )
        self.schedule = schedule
        self._last_epoch = 0
        self._first = True

    def on_train_begin(self) -> None:
        for key, optimizer in _optimizers("LearningRateScheduler", self.model):
            if callable(optimizer.lr):
                raise TypeError(
                    f"LearningRateScheduler: the optimizer's lr ({key}) is the schedule "
                    f"{optimizer.lr!r}, which already sets the rate at every step; give the "
                    "optimiser a float lr for LearningRateScheduler, or keep the schedule "
                    "without the callback"
                )
        self.state.log_lr = True
        self._first = True

    def on_epoch_begin(self, epoch: int) -> None:
        first, self._first = self._first, False
        last = self.history.last
        resumed = first and self._last_epoch != epoch - 1 and last.get("epoch") == epoch - 1
        for key, optimizer in _optimizers("LearningRateScheduler", self.model):
            rate = float(last[key]) if resumed and key in last else _rate(optimizer.lr)
            new = self.schedule(epoch, rate)
            if not (_real(new) and new >= 0):
                raise ValueError(
                    f"LearningRateScheduler: schedule({epoch}, {rate!r}) returned {new!r}; it "
                    "must return the learning rate, a finite number >= 0"
                )
            optimizer.lr = float(new)
        self._last_epoch = epoch

    def __repr__(self) -> str:
        name = getattr(self.schedule, "__name__", None) or repr(self.schedule)
        return f"LearningRateScheduler({name})"


def _real(value: Any) -> bool:
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


__all__ = ["LearningRateScheduler", "ReduceLROnPlateau"]
