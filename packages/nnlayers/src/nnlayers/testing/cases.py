"""``OpCase``: one row of the op table that drives the gradient and forward checks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def real(rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    """Values in [-2, 2]."""
    return rng.uniform(-2.0, 2.0, shape)


def positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values in [0.5, 2] (log, sqrt, divisors, bases of powers)."""
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    """Values with ``0.2 <= |x| <= 2`` (kinks at zero: abs, relu, leaky_relu, elu)."""
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A shuffled grid of values at least 0.1 apart (max, min, pooling: no ties)."""
    n = int(np.prod(shape, dtype=np.int64))
    return rng.permutation(np.linspace(-2.0, 2.0, max(n, 1)))[:n].reshape(shape)


def probabilities(rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    """Rows (last axis) that sum to one."""
    p = rng.uniform(0.1, 1.0, shape)
    return p / p.sum(axis=-1, keepdims=True)


def unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values in [0.1, 0.9] (binary targets)."""
    return rng.uniform(0.1, 0.9, shape)


def integers(high: int) -> Sampler:
    """A sampler of int64 values in ``[0, high)`` (class labels, indices)."""

    def sample(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(0, high, shape).astype(np.int64)

    sample.__name__ = f"integers({high})"
    return sample


@dataclass(frozen=True)
class OpCase:
    """One op-table row: how to build the expression, on which inputs, and what it should equal.

    ``op`` names the op under test (a key of :data:`nnlayers.ops.REGISTRY` or a composed
    function). ``shapes`` lists input shapes; ``samplers`` gives each input's domain (default
    :func:`real`). ``reference`` is the NumPy forward; ``None`` skips the forward check.
    ``torch`` is the PyTorch version that the oracle compares values and gradients with.
    """

    op: str
    build: Callable[..., Any]
    shapes: Sequence[tuple[int, ...]]
    reference: Callable[..., Any] | None = None
    samplers: Sequence[Sampler] = ()
    label: str = ""
    training: bool = True
    reseed: bool = False
    gradient: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    #: The same computation in PyTorch, ``torch(torch_module, *tensors)``, for the oracle
    #: (``nnlayers.testing.oracle``); ``None`` where PyTorch cannot draw the same thing (a
    #: dropout mask).
    torch: Callable[..., Any] | None = None

    @property
    def id(self) -> str:
        """A readable pytest id: op, label and shapes."""
        shapes = "-".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        return f"{self.op}{'[' + self.label + ']' if self.label else ''}-{shapes}"

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Host inputs drawn from the samplers (float64; the check casts to its dtype)."""
        rng = np.random.default_rng(seed)
        samplers = list(self.samplers) + [real] * (len(self.shapes) - len(self.samplers))
        return [
            np.asarray(s(rng, tuple(shape))) for s, shape in zip(samplers, self.shapes, strict=True)
        ]
