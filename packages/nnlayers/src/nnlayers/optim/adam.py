"""Adam and AdamW: adaptive moment estimation, with L2 or decoupled weight decay."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from arraycore import ArrayNamespace

from ._scalars import StepScalars
from .base import Array, Optimizer, ParameterLike, _check_positive, _check_unit
from .schedules import LearningRate


class Adam(Optimizer):
    """Adam (Kingma & Ba), with bias correction.

    With ``g = grad + weight_decay * w`` (L2, coupled, as in PyTorch's ``Adam``) and ``t`` the
    parameter's update count (1 at its first update):

    - ``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g**2``;
    - ``m_hat = m / (1 - beta1**t)``, ``v_hat = v / (1 - beta2**t)``;
    - ``w -= lr * m_hat / (sqrt(v_hat) + eps)``.

    The bias corrections are folded into the two scalars of the update: host floats on the NumPy
    backend, 0-d arrays computed on the device from its step counter elsewhere (so a device step
    has no Python float that changes from step to step; see :mod:`nnlayers.optim._scalars`).

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> p = SimpleNamespace(name="w", value=np.array([1.0, -1.0]), grad=np.array([0.3, -2.0]))
    >>> Adam(0.1, params=[p]).step()
    >>> p.value.round(6).tolist()  # the first step moves every entry by about lr
    [0.9, -0.9]
    """

    slots = ("m", "v")

    def __init__(
        self,
        lr: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        *,
        eps: float = 1e-8,
        params: Iterable[ParameterLike] | None = None,
        weight_decay: float = 0.0,
        clip_norm: float | None = None,
        clip_eps: float = 1e-6,
    ) -> None:
        name = type(self).__name__
        _check_unit(name, "beta1", beta1)
        _check_unit(name, "beta2", beta2)
        _check_positive(name, "eps", eps)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.eps = float(eps)
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
        b1, b2 = self.beta1, self.beta2
        device = self._device_step
        if device is not None:
            step, inv_sqrt_c2, decay = self._device_scalars_of(device, lr, weight_decay, count)
            if decay is not None:
                xp.inplace.multiply(value, decay, out=value)
        else:
            if not self.coupled_weight_decay and weight_decay:
                xp.inplace.multiply(value, 1.0 - lr * weight_decay, out=value)
            # lr * m_hat / (sqrt(v_hat) + eps) == (lr / c1) * m / (sqrt(v) / sqrt(c2) + eps)
            step = lr / (1.0 - b1**count)
            inv_sqrt_c2 = 1.0 / math.sqrt(1.0 - b2**count)
        self._kernel(xp, "adam", _adam)(
            value,
            grad,
            state["m"],
            state["v"],
            tmp,
            b1,
            1.0 - b1,
            b2,
            1.0 - b2,
            inv_sqrt_c2,
            self.eps,
            step,
        )

    def _device_scalars_of(
        self, device: StepScalars, lr: Array, weight_decay: float, count: int
    ) -> tuple[Array, Array, Array | None]:
        """``(lr / c1, 1 / sqrt(c2), 1 - lr * weight_decay or None)`` as 0-d arrays of ``lr``'s
        dtype, from the device's step counter, shared by the parameters of one update count."""
        xp, wide, dtype = device.xp, device.wide(lr), lr.dtype
        b1, b2 = self.beta1, self.beta2

        def corrections() -> tuple[Array, Array]:
            # 1 - beta**n as -expm1(n * log(beta)), the log taken on the host in float64: in
            # float32 (a device without float64) 1 - pow(beta, n) loses the digits of a beta
            # rounded to float32 (1.3e-5 relative at beta2 = 0.999, n = 1); this keeps ~1e-7
            n = device.count(count)
            c1 = xp.negative(xp.expm1(xp.multiply(n, math.log(b1)))) if b1 else None
            c2 = xp.negative(xp.expm1(xp.multiply(n, math.log(b2)))) if b2 else None
            c1 = xp.ones_like(n) if c1 is None else c1
            inv = xp.ones_like(n) if c2 is None else xp.divide(1.0, xp.sqrt(c2))
            return c1, xp.astype(inv, dtype, copy=False)

        c1, inv_sqrt_c2 = device.memo(("adam", count, dtype), corrections)
        step = device.memo(
            ("adam step", id(lr), count), lambda: xp.astype(xp.divide(wide, c1), dtype, copy=False)
        )
        decay = None
        if not self.coupled_weight_decay and weight_decay:
            decay = device.memo(
                ("adamw decay", id(lr), weight_decay),
                lambda: xp.astype(
                    xp.subtract(1.0, xp.multiply(wide, weight_decay)), dtype, copy=False
                ),
            )
        return step, inv_sqrt_c2, decay

    def _settings(self) -> list[str]:
        return [f"beta1={self.beta1:g}", f"beta2={self.beta2:g}", f"eps={self.eps:g}"]


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as PyTorch's ``AdamW``.

    Before the Adam update (on the raw gradient): ``w *= 1 - lr * weight_decay``, where ``lr``
    includes the parameter's ``lr_multiplier``. Parameters whose own ``weight_decay`` is ``0.0``
    (biases, normalisation scales in nnlayers' layers) are not decayed.
    """

    coupled_weight_decay = False

    def __init__(
        self,
        lr: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        *,
        eps: float = 1e-8,
        params: Iterable[ParameterLike] | None = None,
        weight_decay: float = 0.01,
        clip_norm: float | None = None,
        clip_eps: float = 1e-6,
    ) -> None:
        super().__init__(
            lr,
            beta1,
            beta2,
            eps=eps,
            params=params,
            weight_decay=weight_decay,
            clip_norm=clip_norm,
            clip_eps=clip_eps,
        )


def _adam(xp: ArrayNamespace) -> Any:
    """The Adam update as one chain (one fused kernel where the backend fuses)."""
    ip = xp.inplace

    def adam(
        value: Array,
        grad: Array,
        m: Array,
        v: Array,
        tmp: Array,
        b1: float,
        one_minus_b1: float,
        b2: float,
        one_minus_b2: float,
        inv_sqrt_c2: float,
        eps: float,
        step: float,
    ) -> None:
        ip.multiply(m, b1, out=m)
        ip.multiply(grad, one_minus_b1, out=tmp)
        ip.add(m, tmp, out=m)
        ip.multiply(grad, grad, out=tmp)
        ip.multiply(tmp, one_minus_b2, out=tmp)
        ip.multiply(v, b2, out=v)
        ip.add(v, tmp, out=v)
        ip.sqrt(v, out=tmp)
        ip.multiply(tmp, inv_sqrt_c2, out=tmp)
        ip.add(tmp, eps, out=tmp)
        ip.divide(m, tmp, out=tmp)
        ip.multiply(tmp, step, out=tmp)
        ip.subtract(value, tmp, out=value)

    return adam
