"""Initialisers for :class:`nnlayers.Parameter` values, and the seeds layers draw them from.

An initialiser is a callable ``init(shape, rng, dtype) -> numpy.ndarray``. Initial values are
drawn on the host with a seeded ``numpy.random.Generator``: the same seed gives the same starting
weights on every backend, so a run (and its checkpoints) can move between devices.

>>> import numpy as np
>>> from nnlayers import init
>>> w = init.he_normal()((256, 128), np.random.default_rng(0))
>>> w.shape, w.dtype.name, round(float(w.std()), 2)
((256, 128), 'float32', 0.09)

Fan-in and fan-out follow nnlayers' layouts: a 2-D weight is ``(inputs, outputs)`` (``x @ W``),
a convolution kernel ``(outputs, inputs, kh, kw)``. Layers whose layout differs (transposed
convolutions, recurrent weights) pass ``fans=`` explicitly.

Seeds: a layer made without ``seed=`` takes the next seed of a process-wide sequence when it is
first applied. :func:`seed` restarts that sequence, so ``nnlayers.seed(0)`` before building a
model makes it start from the same weights every time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .expr.spec import DEFAULT_FLOAT

Shape = tuple[int, ...]
Fans = tuple[int, int]


def fans(shape: Shape) -> Fans:
    """``(fan_in, fan_out)`` of a weight of ``shape`` in nnlayers' layouts.

    >>> fans((784, 128)), fans((16, 3, 5, 5))
    ((784, 128), (75, 400))
    """
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


_default_fans = fans


class Initializer:
    """Base of the initialisers: ``init(shape, rng=None, dtype=None, fans=None) -> ndarray``."""

    name = "initializer"

    def __call__(
        self,
        shape: Any,
        rng: np.random.Generator | None = None,
        dtype: Any = None,
        fans: Fans | None = None,
    ) -> np.ndarray:
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(d) for d in shape)
        rng = np.random.default_rng(0) if rng is None else rng
        dt = DEFAULT_FLOAT if dtype is None else np.dtype(dtype)
        value = self.sample(shape, rng, fans or _default_fans(shape))
        return np.asarray(value, dtype=dt)

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        """Draw the values (float64); ``fans`` is ``(fan_in, fan_out)``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{self.name}({args})"


class Constant(Initializer):
    """Every element ``value``."""

    name = "constant"

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        return np.full(shape, self.value, dtype=np.float64)


class Normal(Initializer):
    """Samples of ``N(mean, std**2)``."""

    name = "normal"

    def __init__(self, std: float = 0.05, mean: float = 0.0) -> None:
        self.std = std
        self.mean = mean

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        return rng.normal(self.mean, self.std, shape)


class Uniform(Initializer):
    """Samples of ``U[low, high)``."""

    name = "uniform"

    def __init__(self, low: float = -0.05, high: float = 0.05) -> None:
        self.low = low
        self.high = high

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        return rng.uniform(self.low, self.high, shape)


class VarianceScaling(Initializer):
    """Zero-mean values of variance ``gain**2 / fan``: the family of Glorot and He.

    ``mode`` is ``"fan_in"``, ``"fan_out"`` or ``"fan_avg"``; ``distribution`` is ``"normal"``
    or ``"uniform"`` (on ``[-limit, limit)`` with ``limit = sqrt(3) * std``).
    """

    name = "variance_scaling"

    def __init__(self, gain: float = 1.0, mode: str = "fan_in", distribution: str = "normal"):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(
                f"variance_scaling: mode must be fan_in, fan_out or fan_avg, got {mode!r}"
            )
        if distribution not in ("normal", "uniform"):
            raise ValueError(
                f"variance_scaling: distribution must be normal or uniform, got {distribution!r}"
            )
        self.gain = gain
        self.mode = mode
        self.distribution = distribution

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        fan_in, fan_out = fans
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        std = self.gain / math.sqrt(max(fan, 1))
        if self.distribution == "normal":
            return rng.normal(0.0, std, shape)
        limit = math.sqrt(3.0) * std
        return rng.uniform(-limit, limit, shape)


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain``: the weight reshaped to ``(shape[0], rest)``
    has orthonormal rows or columns (Saxe et al., 2014). Good for recurrent weights."""

    name = "orthogonal"

    def __init__(self, gain: float = 1.0) -> None:
        self.gain = gain

    def sample(self, shape: Shape, rng: np.random.Generator, fans: Fans) -> np.ndarray:
        if len(shape) < 2:
            raise ValueError(f"orthogonal: needs a weight of at least 2 axes, got shape {shape}")
        rows, cols = shape[0], math.prod(shape[1:])
        a = rng.normal(0.0, 1.0, (max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q *= np.where(np.diag(r) < 0, -1.0, 1.0)  # a uniform (Haar) distribution over Q
        if rows < cols:
            q = q.T
        return self.gain * q.reshape(shape)


def constant(value: float = 0.0) -> Initializer:
    """Every element ``value``."""
    return Constant(value)


def zeros() -> Initializer:
    """Zeros (biases, batch-norm shifts)."""
    return Constant(0.0)


def ones() -> Initializer:
    """Ones (batch-norm and layer-norm scales)."""
    return Constant(1.0)


def normal(std: float = 0.05, mean: float = 0.0) -> Initializer:
    """``N(mean, std**2)``."""
    return Normal(std, mean)


def uniform(low: float = -0.05, high: float = 0.05) -> Initializer:
    """``U[low, high)``."""
    return Uniform(low, high)


def glorot_uniform(gain: float = 1.0) -> Initializer:
    """Glorot/Xavier uniform: ``U[-l, l)`` with ``l = gain * sqrt(6 / (fan_in + fan_out))``."""
    return VarianceScaling(gain, "fan_avg", "uniform")


def glorot_normal(gain: float = 1.0) -> Initializer:
    """Glorot/Xavier normal: std ``gain * sqrt(2 / (fan_in + fan_out))``."""
    return VarianceScaling(gain, "fan_avg", "normal")


def he_normal(gain: float = math.sqrt(2.0)) -> Initializer:
    """He/Kaiming normal for ReLU networks: std ``gain / sqrt(fan_in)`` (gain ``sqrt(2)``)."""
    return VarianceScaling(gain, "fan_in", "normal")


def he_uniform(gain: float = math.sqrt(2.0)) -> Initializer:
    """He/Kaiming uniform: ``U[-l, l)`` with ``l = gain * sqrt(3 / fan_in)``."""
    return VarianceScaling(gain, "fan_in", "uniform")


def orthogonal(gain: float = 1.0) -> Initializer:
    """A random (semi-)orthogonal matrix times ``gain``."""
    return Orthogonal(gain)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_normal = he_normal
kaiming_uniform = he_uniform

_BY_NAME: dict[str, Callable[[], Initializer]] = {
    "zeros": zeros,
    "ones": ones,
    "normal": normal,
    "uniform": uniform,
    "glorot_uniform": glorot_uniform,
    "glorot_normal": glorot_normal,
    "xavier_uniform": glorot_uniform,
    "xavier_normal": glorot_normal,
    "he_normal": he_normal,
    "he_uniform": he_uniform,
    "kaiming_normal": he_normal,
    "kaiming_uniform": he_uniform,
    "orthogonal": orthogonal,
}


def get(init: Any) -> Callable[..., np.ndarray]:
    """An initialiser from a name (``"he_normal"``), a number (a constant) or a callable.

    >>> get("glorot_uniform")
    variance_scaling(gain=1.0, mode='fan_avg', distribution='uniform')
    """
    if isinstance(init, str):
        if init not in _BY_NAME:
            raise ValueError(
                f"unknown initialiser {init!r}; choose one of {', '.join(sorted(_BY_NAME))} "
                "or pass a callable (shape, rng, dtype) -> array"
            )
        return _BY_NAME[init]()
    if isinstance(init, int | float):
        return Constant(float(init))
    if callable(init):
        return init  # type: ignore[no-any-return]
    raise TypeError(f"an initialiser must be a name, a number or a callable, got {init!r}")


# -- seeds -----------------------------------------------------------------------------------
class _SeedSequence:
    """The process-wide sequence layers draw their seeds from (``nnlayers.seed`` restarts it)."""

    def __init__(self, base: int = 0) -> None:
        self.restart(base)

    def restart(self, base: Any) -> None:
        if isinstance(base, bool) or not isinstance(base, int | np.integer) or base < 0:
            raise ValueError(f"seed: give a non-negative int, got {base!r}")
        self.base = int(base)
        self.count = 0

    def next(self) -> int:
        """A fresh seed: a 63-bit int derived from ``(base, count)``."""
        value = np.random.SeedSequence([self.base, self.count]).generate_state(2, np.uint32)
        self.count += 1
        return (int(value[0]) << 31) ^ int(value[1])


_SEEDS = _SeedSequence()


def seed(value: int) -> None:
    """Restart the seed sequence that layers made without ``seed=`` draw from.

    >>> import nnlayers
    >>> nnlayers.seed(0)
    """
    _SEEDS.restart(value)


def next_seed() -> int:
    """The next seed of the process-wide sequence."""
    return _SEEDS.next()


def rng(seed: int | None = None) -> np.random.Generator:
    """A host generator for initial values: from ``seed``, else from the next sequence seed."""
    return np.random.default_rng(next_seed() if seed is None else seed)


__all__ = [
    "Constant", "Initializer", "Normal", "Orthogonal", "Uniform", "VarianceScaling", "constant",
    "fans", "get", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "next_seed", "normal", "ones", "orthogonal", "rng",
    "seed", "uniform", "xavier_normal", "xavier_uniform", "zeros",
]  # fmt: skip
