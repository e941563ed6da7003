"""Learning-rate schedules: callables ``step -> lr``, and the same rate computed on the device.

``step`` is the number of optimiser steps taken before the one being computed, so the first
update uses ``schedule(0)``. Any callable with that signature works as an optimiser's ``lr``;
these classes cover the usual shapes and compose: :class:`Warmup` wraps any of them.

Each of these classes also computes its rate on the device, from a 0-d array that counts the
steps there (:meth:`Schedule.on_device`), so an optimiser on a device backend updates with no
Python float that changes from one step to the next (a captured step would freeze it: see
``docs/training.md``). A plain callable, or a subclass that only defines :meth:`Schedule.value`,
is evaluated on the host each step and its value copied to the device: it trains the same, but
its steps cannot be captured.

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

    def on_device(self, xp: Any, step: Any) -> Any:
        """The rate at ``step``, a 0-d floating array on the device (the number of steps taken),
        as a 0-d array of its dtype, computed with ``xp``'s functions; ``None`` where this
        schedule has no device form (the default: a subclass that defines only :meth:`value`
        is evaluated on the host)."""
        return None

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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device`."""
        return xp.full((), self.lr, dtype=step.dtype)


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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device`."""
        drops = xp.floor(xp.divide(step, float(self.step_size)))
        return xp.multiply(_power(xp, self.gamma, drops), self.lr)


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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device`."""
        exponent = xp.divide(step, float(self.decay_steps))
        if self.staircase:
            exponent = xp.floor(exponent)
        return xp.multiply(_power(xp, self.gamma, exponent), self.lr)


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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device` (past ``total_steps`` the angle stays at pi)."""
        total = float(self.total_steps)
        # (1 + cos(a)) / 2 as cos(a / 2)**2: no cancellation near the end, where it is small
        half = xp.multiply(xp.divide(xp.minimum(step, total), total), math.pi / 2)
        cosine = xp.square(xp.cos(half))
        return xp.add(xp.multiply(cosine, self.lr - self.min_lr), self.min_lr)


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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device`: the wrapped schedule's device form (``None`` where
        it has none) after the warm-up, the linear ramp (its target from the host) before."""
        after = device_rate(
            self.schedule, xp, xp.maximum(xp.subtract(step, float(self.warmup_steps)), 0.0)
        )
        if after is None:
            return None
        target = float(self.schedule(0))
        slope = target * (1.0 - self.start_factor) / self.warmup_steps
        ramp = xp.add(xp.multiply(step, slope), target * self.start_factor)
        return xp.where(xp.less(step, float(self.warmup_steps)), ramp, after)


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

    def on_device(self, xp: Any, step: Any) -> Any:
        """See :meth:`Schedule.on_device` (``None`` where the wrapped schedule has no device
        form)."""
        base = device_rate(self.schedule, xp, step)
        if base is None:
            return None
        return xp.maximum(xp.multiply(base, self.factor), xp.minimum(base, self.min_lr))


def _power(xp: Any, base: float, exponent: Any) -> Any:
    """``base ** exponent`` for a host ``base >= 0`` and a device ``exponent >= 0``, as
    ``exp(exponent * log(base))`` with the log taken on the host in float64 (a ``pow`` of
    ``base`` rounded to float32 errs by ``exponent`` times its rounding)."""
    if base == 0.0:
        return xp.where(xp.equal(exponent, 0.0), 1.0, 0.0)
    return xp.exp(xp.multiply(exponent, math.log(base)))


def device_rate(lr: LearningRate, xp: Any, step: Any) -> Any:
    """``lr`` at the device step count ``step`` (a 0-d floating array) as a 0-d array of its
    dtype: a number as a constant, a :class:`Schedule` by its :meth:`~Schedule.on_device`;
    ``None`` for a callable without a device form."""
    if not callable(lr):
        return xp.full((), float(lr), dtype=step.dtype)
    on_device = getattr(lr, "on_device", None)
    return None if on_device is None else on_device(xp, step)


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
