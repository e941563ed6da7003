"""Learning-rate schedules: callables ``step -> lr`` evaluated on the host once per step.

``step`` is the number of optimiser steps taken before the one being computed, so the first
update uses ``schedule(0)``. Any callable with that signature works as an optimiser's ``lr``;
these classes cover the usual shapes and compose: :class:`Warmup` wraps any of them.

>>> schedule = Warmup(CosineDecay(0.1, total_steps=100, min_lr=0.001), warmup_steps=10)
>>> [round(schedule(s), 4) for s in (0, 5, 10, 60, 110, 200)]
[0.0, 0.05, 0.1, 0.0505, 0.001, 0.001]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias

LearningRate: TypeAlias = "float | Callable[[int], float]"
"""An optimiser's ``lr``: a constant, or a schedule called with the step."""


class Schedule:
    """Base class of the schedules: call it with a step (an int >= 0) to get the rate."""

    def __call__(self, step: int) -> float:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{type(self).__name__}: step must be an int >= 0, got {step!r}")
        return float(self.value(step))

    def value(self, step: int) -> float:
        """The rate at ``step`` (already validated)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _rate(owner: str, name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"{owner}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _count(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{owner}: {name} must be an int > 0, got {value!r}")
    return value


class Constant(Schedule):
    """The same rate at every step.

    >>> Constant(0.01)(1000)
    0.01
    """

    def __init__(self, lr: float) -> None:
        self.lr = _rate("Constant", "lr", lr)

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        return self.lr


class StepDecay(Schedule):
    """``lr * gamma ** (step // step_size)``: multiplied by ``gamma`` every ``step_size`` steps.

    >>> [StepDecay(1.0, step_size=10, gamma=0.5)(s) for s in (0, 9, 10, 25)]
    [1.0, 1.0, 0.5, 0.25]
    """

    def __init__(self, lr: float, step_size: int, gamma: float = 0.1) -> None:
        self.lr = _rate("StepDecay", "lr", lr)
        self.step_size = _count("StepDecay", "step_size", step_size)
        self.gamma = _rate("StepDecay", "gamma", gamma)

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        return self.lr * self.gamma ** (step // self.step_size)


class ExponentialDecay(Schedule):
    """``lr * gamma ** (step / decay_steps)`` (``staircase=True``: the exponent is floored).

    >>> round(ExponentialDecay(1.0, gamma=0.5, decay_steps=10)(5), 4)
    0.7071
    """

    def __init__(
        self, lr: float, gamma: float, decay_steps: int = 1, staircase: bool = False
    ) -> None:
        self.lr = _rate("ExponentialDecay", "lr", lr)
        self.gamma = _rate("ExponentialDecay", "gamma", gamma)
        self.decay_steps = _count("ExponentialDecay", "decay_steps", decay_steps)
        self.staircase = bool(staircase)

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        exponent = step / self.decay_steps
        if self.staircase:
            exponent = math.floor(exponent)
        return self.lr * float(self.gamma**exponent)


class CosineDecay(Schedule):
    """Half a cosine from ``lr`` at step 0 down to ``min_lr`` at ``total_steps``, then flat.

    ``min_lr + (lr - min_lr) * (1 + cos(pi * step / total_steps)) / 2``.

    >>> [CosineDecay(1.0, total_steps=4, min_lr=0.0)(s) for s in (0, 2, 4, 9)]
    [1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, lr: float, total_steps: int, min_lr: float = 0.0) -> None:
        self.lr = _rate("CosineDecay", "lr", lr)
        self.total_steps = _count("CosineDecay", "total_steps", total_steps)
        self.min_lr = _rate("CosineDecay", "min_lr", min_lr)
        if self.min_lr > self.lr:
            raise ValueError(f"CosineDecay: min_lr {min_lr} is above lr {lr}")

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        if step >= self.total_steps:
            return self.min_lr
        cosine = (1.0 + math.cos(math.pi * step / self.total_steps)) / 2.0
        return self.min_lr + (self.lr - self.min_lr) * cosine


class Warmup(Schedule):
    """A linear warm-up in front of any schedule (or constant).

    For ``step < warmup_steps`` the rate rises linearly from ``start_factor * target`` to the
    wrapped schedule's first value ``target = schedule(0)``:
    ``target * (start_factor + (1 - start_factor) * step / warmup_steps)``. From then on it is
    ``schedule(step - warmup_steps)``, so the wrapped schedule starts its own count after the
    warm-up (a cosine over 1000 steps then ends at step ``warmup_steps + 1000``).

    >>> [Warmup(0.1, warmup_steps=4)(s) for s in (0, 1, 2, 4, 100)]
    [0.0, 0.025, 0.05, 0.1, 0.1]
    """

    def __init__(
        self, schedule: LearningRate, warmup_steps: int, start_factor: float = 0.0
    ) -> None:
        self.schedule: Callable[[int], float] = as_schedule(schedule)
        self.warmup_steps = _count("Warmup", "warmup_steps", warmup_steps)
        if not (isinstance(start_factor, int | float) and 0.0 <= start_factor <= 1.0):
            raise ValueError(f"Warmup: start_factor must lie in [0, 1], got {start_factor!r}")
        self.start_factor = float(start_factor)

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        if step >= self.warmup_steps:
            return float(self.schedule(step - self.warmup_steps))
        target = float(self.schedule(0))
        fraction = self.start_factor + (1.0 - self.start_factor) * step / self.warmup_steps
        return target * fraction


class Scaled(Schedule):
    """Another schedule (or constant) times ``factor``, never pushed below ``min_lr`` by the
    factor: ``max(factor * schedule(step), min(min_lr, schedule(step)))``.

    :class:`nnlayers.train.ReduceLROnPlateau` lowers a scheduled learning rate this way: the
    schedule keeps its shape, scaled down (a schedule that itself goes below ``min_lr``, such
    as a cosine to 0, still does).

    >>> [Scaled(StepDecay(1.0, step_size=10, gamma=0.5), 0.1, min_lr=0.06)(s) for s in (0, 10)]
    [0.1, 0.06]
    """

    def __init__(self, schedule: LearningRate, factor: float, min_lr: float = 0.0) -> None:
        self.schedule: Callable[[int], float] = as_schedule(schedule)
        self.factor = _rate("Scaled", "factor", factor)
        self.min_lr = _rate("Scaled", "min_lr", min_lr)

    def value(self, step: int) -> float:
        """The rate at ``step``."""
        base = float(self.schedule(step))
        return max(self.factor * base, min(self.min_lr, base))


def as_schedule(lr: LearningRate) -> Callable[[int], float]:
    """``lr`` as a schedule: a number becomes :class:`Constant`, a callable stays as it is."""
    if callable(lr):
        return lr
    return Constant(lr)


def describe_lr(lr: LearningRate) -> str:
    """A short text for an optimiser's ``repr``."""
    if isinstance(lr, int | float):
        return f"{lr:g}"
    return repr(lr)
