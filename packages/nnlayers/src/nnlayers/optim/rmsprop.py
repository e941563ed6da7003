"""RMSProp: gradients divided by a running root mean square."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arraycore import ArrayNamespace

from .base import Array, Optimizer, ParameterLike, _check_nonnegative, _check_positive, _check_unit
from .schedules import LearningRate


class RMSProp(Optimizer):
    """RMSProp (Hinton's, in PyTorch's formulation), optionally centred and with momentum.

    With ``g = grad + weight_decay * w`` (L2, coupled):

    - ``s = rho * s + (1 - rho) * g**2``;
    - ``centered=True``: ``a = rho * a + (1 - rho) * g`` and the denominator uses
      ``s - a**2`` (an estimate of the variance) instead of ``s``;
    - ``d = sqrt(s [- a**2]) + eps``;
    - no momentum: ``w -= lr * g / d``; momentum: ``b = mu * b + g / d``, ``w -= lr * b``.

    All buffers start at zero.
    """

    def __init__(
        self,
        lr: LearningRate = 0.001,
        rho: float = 0.9,
        *,
        eps: float = 1e-8,
        momentum: float = 0.0,
        centered: bool = False,
        params: Iterable[ParameterLike] | None = None,
        weight_decay: float = 0.0,
        clip_norm: float | None = None,
        clip_eps: float = 1e-6,
    ) -> None:
        _check_unit("RMSProp", "rho", rho)
        _check_positive("RMSProp", "eps", eps)
        _check_nonnegative("RMSProp", "momentum", momentum)
        self.rho = float(rho)
        self.eps = float(eps)
        self.momentum = float(momentum)
        self.centered = bool(centered)
        slots = ["square_avg"]
        if self.centered:
            slots.append("grad_avg")
        if self.momentum:
            slots.append("momentum")
        self.slots = tuple(slots)
        super().__init__(
            lr, params=params, weight_decay=weight_decay, clip_norm=clip_norm, clip_eps=clip_eps
        )

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
        rho, centered, momentum = self.rho, self.centered, bool(self.momentum)
        kernel = self._kernel(
            xp, f"rmsprop{int(centered)}{int(momentum)}", _rmsprop(centered, momentum)
        )
        kernel(
            value,
            grad,
            state["square_avg"],
            state["grad_avg"] if centered else tmp,
            state["momentum"] if momentum else tmp,
            tmp,
            rho,
            1.0 - rho,
            self.eps,
            self.momentum,
            lr,
        )

    def _settings(self) -> list[str]:
        found = [f"rho={self.rho:g}", f"eps={self.eps:g}"]
        if self.momentum:
            found.append(f"momentum={self.momentum:g}")
        if self.centered:
            found.append("centered=True")
        return found


def _rmsprop(centered: bool, momentum: bool) -> Any:
    """A maker of the RMSProp update chain for one (centered, momentum) variant."""

    def make(xp: ArrayNamespace) -> Any:
        ip = xp.inplace

        def rmsprop(
            value: Array,
            grad: Array,
            square_avg: Array,
            grad_avg: Array,
            buf: Array,
            tmp: Array,
            rho: float,
            one_minus_rho: float,
            eps: float,
            mu: float,
            lr: float,
        ) -> None:
            ip.multiply(grad, grad, out=tmp)
            ip.multiply(tmp, one_minus_rho, out=tmp)
            ip.multiply(square_avg, rho, out=square_avg)
            ip.add(square_avg, tmp, out=square_avg)
            if centered:
                ip.multiply(grad_avg, rho, out=grad_avg)
                ip.multiply(grad, one_minus_rho, out=tmp)
                ip.add(grad_avg, tmp, out=grad_avg)
                ip.multiply(grad_avg, grad_avg, out=tmp)
                ip.subtract(square_avg, tmp, out=tmp)
                ip.sqrt(tmp, out=tmp)
            else:
                ip.sqrt(square_avg, out=tmp)
            ip.add(tmp, eps, out=tmp)
            ip.divide(grad, tmp, out=tmp)
            if momentum:
                ip.multiply(buf, mu, out=buf)
                ip.add(buf, tmp, out=buf)
                ip.multiply(buf, lr, out=tmp)
            else:
                ip.multiply(tmp, lr, out=tmp)
            ip.subtract(value, tmp, out=value)

        return rmsprop

    return make
