"""Stochastic gradient descent with optional (Nesterov) momentum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arraycore import ArrayNamespace

from .base import Array, Optimizer, ParameterLike, _check_nonnegative
from .schedules import LearningRate


class SGD(Optimizer):
    """SGD with momentum ``mu`` and optional Nesterov momentum (PyTorch's formulation).

    With ``g = grad + weight_decay * w`` (L2, coupled):

    - no momentum: ``w -= lr * g``;
    - momentum: ``v = mu * v + g``, then ``w -= lr * v``, or with ``nesterov=True``
      ``w -= lr * (g + mu * v)``. ``v`` starts at zero.

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> p = SimpleNamespace(name="w", value=np.array([1.0]), grad=np.array([0.5]))
    >>> opt = SGD(0.1, momentum=0.9, params=[p])
    >>> for _ in range(2):
    ...     opt.step()
    >>> p.value.round(4).tolist()
    [0.855]
    """

    def __init__(
        self,
        lr: LearningRate = 0.01,
        momentum: float = 0.0,
        *,
        nesterov: bool = False,
        params: Iterable[ParameterLike] | None = None,
        weight_decay: float = 0.0,
        clip_norm: float | None = None,
        clip_eps: float = 1e-6,
    ) -> None:
        _check_nonnegative("SGD", "momentum", momentum)
        if nesterov and momentum == 0:
            raise ValueError("SGD: nesterov=True needs a momentum > 0")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.slots = ("momentum",) if self.momentum else ()
        super().__init__(
            lr, params=params, weight_decay=weight_decay, clip_norm=clip_norm, clip_eps=clip_eps
        )

    def _update_all(self, xp: ArrayNamespace, updates: list[tuple[Any, ...]]) -> None:
        if not self.momentum or self.nesterov:
            super()._update_all(xp, updates)
            return
        # plain momentum, the common case: one loop, no call per parameter
        kernel, mu = self._kernel(xp, "momentum", _momentum), self.momentum
        for value, grad, state, tmp, lr, _decay, _count in updates:
            kernel(value, grad, state["momentum"], tmp, mu, lr)

    def _update(
        self,
        xp: ArrayNamespace,
        value: Array,
        grad: Array,
        state: dict[str, Array],
        tmp: Array,
        lr: float,
        weight_decay: float,
        count: int,
    ) -> None:
        if not self.momentum:
            self._kernel(xp, "sgd", _plain)(value, grad, tmp, lr)
        elif self.nesterov:
            self._kernel(xp, "nesterov", _nesterov)(
                value, grad, state["momentum"], tmp, self.momentum, lr
            )
        else:
            self._kernel(xp, "momentum", _momentum)(
                value, grad, state["momentum"], tmp, self.momentum, lr
            )

    def _settings(self) -> list[str]:
        found = []
        if self.momentum:
            found.append(f"momentum={self.momentum:g}")
        if self.nesterov:
            found.append("nesterov=True")
        return found


# -- the update chains (one fused kernel each where the backend fuses) -------------------------
def _plain(xp: ArrayNamespace) -> Any:
    ip = xp.inplace

    def sgd(value: Array, grad: Array, tmp: Array, lr: float) -> None:
        ip.multiply(grad, lr, out=tmp)
        ip.subtract(value, tmp, out=value)

    return sgd


def _momentum(xp: ArrayNamespace) -> Any:
    ip = xp.inplace

    def momentum(
        value: Array, grad: Array, velocity: Array, tmp: Array, mu: float, lr: float
    ) -> None:
        ip.multiply(velocity, mu, out=velocity)
        ip.add(velocity, grad, out=velocity)
        ip.multiply(velocity, lr, out=tmp)
        ip.subtract(value, tmp, out=value)

    return momentum


def _nesterov(xp: ArrayNamespace) -> Any:
    ip = xp.inplace

    def nesterov(
        value: Array, grad: Array, velocity: Array, tmp: Array, mu: float, lr: float
    ) -> None:
        ip.multiply(velocity, mu, out=velocity)
        ip.add(velocity, grad, out=velocity)
        ip.multiply(velocity, mu, out=tmp)
        ip.add(tmp, grad, out=tmp)
        ip.multiply(tmp, lr, out=tmp)
        ip.subtract(value, tmp, out=value)

    return nesterov
