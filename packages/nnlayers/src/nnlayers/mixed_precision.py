"""Mixed precision: float32 master weights, half-precision compute, dynamic loss scaling.

``Model(loss, inputs=..., precision="mixed_float16")`` (or a :class:`Policy`) trains as
PyTorch's ``autocast`` with a ``GradScaler`` and Keras's ``mixed_float16`` policy do:

- **Parameters stay float32** (the master weights the optimiser updates). Each use in a
  low-precision op reads a half-precision copy (a cast node in the graph), and the gradient
  comes back through the cast as float32.
- **Compute runs in half precision where it is safe**: matrix products, convolutions and
  attention take their floating inputs in the policy's dtype (:data:`HALF_OPS`), and the
  element-wise ops between them follow (a float32 bias meeting a half activation is cast down).
- **Reductions, softmax, normalisation, exponentials, recurrences and losses run in float32**
  (:data:`FLOAT32_OPS`): their inputs are cast up, so the loss and metrics are float32.
- **Dynamic loss scaling** (float16; bfloat16 has float32's range and needs none): backward
  starts from ``scale`` instead of 1, so small gradients do not flush to zero in float16; the
  float32 gradients are then divided by ``scale`` and checked. A step whose gradients are not
  all finite is skipped (no parameter or optimiser state changes) and the scale is halved; after
  ``growth_interval`` good steps in a row it doubles (PyTorch's ``GradScaler`` defaults).

The rewrite happens once, when the model is built (:func:`autocast`); the graph it compiles is
an ordinary graph with cast nodes, so every backend with the dtype runs it (the NumPy backend
and CUDA have float16; ``xp.__array_namespace_info__().dtypes(kind="float16")`` tells).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from .expr.node import Expr
from .graph.topo import topological_order
from .ops.math.comparison import astype

#: Ops that run in the policy's half-precision dtype (their floating inputs are cast down).
HALF_OPS = frozenset(
    {"matmul", "conv2d", "conv2d_transpose", "scaled_dot_product_attention", "take"}
)
#: Ops that run in float32 (their floating inputs are cast up): reductions, softmax and its
#: losses, normalisation, exponentials and logarithms, powers, and the recurrent layers, whose
#: state accumulates over many steps.
FLOAT32_OPS = frozenset(
    {
        "sum", "mean", "norm", "softmax", "log_softmax", "softmax_cross_entropy",
        "sigmoid_cross_entropy", "log_sigmoid", "softplus", "layer_norm", "batch_norm", "exp",
        "log", "log1p", "power", "power_scalar", "sqrt", "lstm", "gru_sequence",
    }
)  # fmt: skip

_F32 = np.dtype("float32")
POLICIES = {"float32": None, "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


@dataclass
class Policy:
    """What runs in which precision, and how the loss is scaled.

    ``compute``: ``"float16"`` or ``"bfloat16"`` (where the backend has it); ``loss_scale``:
    ``"dynamic"`` (default for float16), a fixed float, or ``None`` (default for bfloat16).
    """

    compute: str = "float16"
    loss_scale: str | float | None = "dynamic"
    initial_scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    def __post_init__(self) -> None:
        if self.compute not in ("float16", "bfloat16"):
            raise ValueError(
                f"mixed precision: compute must be 'float16' or 'bfloat16', got {self.compute!r}"
            )
        if self.compute == "bfloat16" and self.loss_scale == "dynamic":
            self.loss_scale = None  # float32's exponent range: nothing underflows
        if isinstance(self.loss_scale, str) and self.loss_scale != "dynamic":
            raise ValueError(
                "mixed precision: loss_scale must be 'dynamic', a number or None, got "
                f"{self.loss_scale!r}"
            )
        if self.growth_interval < 1 or not 0 < self.backoff_factor < 1 < self.growth_factor:
            raise ValueError(
                "mixed precision: need growth_interval >= 1 and 0 < backoff_factor < 1 < "
                "growth_factor"
            )

    @property
    def name(self) -> str:
        return f"mixed_{self.compute}"


def as_policy(precision: Any) -> Policy | None:
    """``None``/``"float32"`` (no policy), a policy name (``"mixed_float16"``,
    ``"mixed_bfloat16"``, or just ``"float16"``/``"bfloat16"``) or a :class:`Policy`."""
    if precision is None or isinstance(precision, Policy):
        return precision
    if isinstance(precision, str):
        for name in (precision, f"mixed_{precision}"):
            if name in POLICIES:
                compute = POLICIES[name]
                return None if compute is None else Policy(compute)
    raise ValueError(
        f"precision must be None, 'float32', 'mixed_float16', 'mixed_bfloat16' or a "
        f"nnlayers.mixed_precision.Policy, got {precision!r}"
    )


def autocast(roots: list[Expr], dtype: Any) -> list[Expr]:
    """The expressions ``roots`` rewritten to compute in ``dtype`` where safe (see the module):
    new nodes with cast nodes inserted; the sources (parameters, placeholders, constants) are
    the same objects."""
    half = np.dtype(dtype)
    new: dict[int, Expr] = {}

    def cast(x: Expr, to: np.dtype) -> Expr:
        return x if x.dtype.kind != "f" or x.dtype == to else astype(x, to)

    for node in topological_order(roots):
        if node.op is None:
            new[id(node)] = node
            continue
        inputs = [new[id(x)] for x in node.inputs]
        name = node.op.name
        if name in HALF_OPS:
            if name == "take":  # the table is cast, the indices are not
                inputs = [cast(inputs[0], half), *inputs[1:]]
            else:
                inputs = [cast(x, half) for x in inputs]
        elif name in FLOAT32_OPS:
            inputs = [cast(x, _F32) for x in inputs]
        elif any(x.dtype == half for x in inputs) and name != "astype":
            inputs = [cast(x, half) if x.dtype == _F32 else x for x in inputs]
        if all(a is b for a, b in zip(inputs, node.inputs, strict=True)):
            new[id(node)] = node
        else:
            new[id(node)] = Expr(copy.copy(node.op), tuple(inputs), name=node.name)
    return [new[id(r)] for r in roots]


class LossScaler:
    """Dynamic (or fixed) loss scaling for one model (see the module): :meth:`seed` is what
    backward starts from, :meth:`unscale` divides the gradients and says whether the step may
    be taken, and updates the scale."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.dynamic = policy.loss_scale == "dynamic"
        self.scale = float(policy.initial_scale if self.dynamic else policy.loss_scale or 1.0)
        self.good_steps = 0
        self.skipped = 0  # steps skipped so far for gradients that were not finite
        self._seed: tuple[float, Any] | None = None

    def seed(self, xp: Any, dtype: Any) -> Any:
        """``scale`` as a scalar of the loss's dtype on the loss's device (made again only
        when the scale changes, not every step)."""
        if self._seed is None or self._seed[0] != self.scale:
            self._seed = (self.scale, xp.asarray(self.scale, dtype=dtype))
        return self._seed[1]

    def unscale(self, xp: Any, grads: list[Any]) -> bool:
        """Divide ``grads`` by the scale in place; whether all were finite (one host read).
        A dynamic scaler halves the scale after an overflow and doubles it after
        ``growth_interval`` finite steps in a row."""
        grads = [g for g in grads if g is not None]
        finite = True
        if grads:
            bad = [xp.any(xp.logical_not(xp.isfinite(g))) for g in grads]
            found = bad[0]
            for b in bad[1:]:
                found = xp.logical_or(found, b)
            finite = not bool(xp.to_numpy(found))
        if finite and self.scale != 1.0:
            inverse = 1.0 / self.scale
            for g in grads:
                xp.inplace.multiply(g, inverse, out=g)
        if not self.dynamic:
            return finite
        p = self.policy
        if not finite:
            self.scale *= p.backoff_factor
            self.good_steps = 0
            self.skipped += 1
        else:
            self.good_steps += 1
            if self.good_steps >= p.growth_interval:
                self.scale *= p.growth_factor
                self.good_steps = 0
        return finite

    def state(self) -> dict[str, float]:
        """What a checkpoint keeps: the scale and the count of good steps."""
        return {"scale": self.scale, "good_steps": float(self.good_steps)}
