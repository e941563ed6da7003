"""Activations: tanh, sigmoid, log_sigmoid, relu, leaky_relu, elu, softplus and gelu.

The smooth ones make one new array and update it in place (``xp.inplace``): each pass over the
data is one kernel and no pass allocates, where a composition of ops would allocate per step.
"""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ..base import Grads, Inputs, Needs, Unary, inplace_on


def _sigmoid_of_half(xp: ArrayNamespace, y: Any) -> Any:
    """``y`` (a new array holding ``x / 2``) turned into ``sigmoid(x) = 0.5 + 0.5 tanh(x / 2)``
    in place, which never overflows, unlike ``1 / (1 + exp(-x))``."""
    ip = inplace_on(xp, y)
    y = ip.tanh(y, out=y)
    y = ip.multiply(y, 0.5, out=y)
    return ip.add(y, 0.5, out=y)


def _sigmoid(xp: ArrayNamespace, x: Any) -> Any:
    """``sigmoid(x)`` as a new array: four passes, one allocation."""
    return _sigmoid_of_half(xp, xp.multiply(x, 0.5))


def _times_dy(xp: ArrayNamespace, g: Any, dy: Any) -> Any:
    """``g * dy`` written into ``g`` (a new array of the input's shape)."""
    return inplace_on(xp, g).multiply(g, dy, out=g)


def _softplus(xp: ArrayNamespace, x: Any) -> Any:
    # max(x, 0) + log1p(exp(-|x|)): exp never sees a positive argument.
    return xp.add(xp.maximum(x, 0.0), xp.log1p(xp.exp(xp.negative(xp.abs(x)))))


class Tanh(Unary):
    """Hyperbolic tangent; backward ``dy * (1 - y**2)``: three passes into one new array."""

    fresh_grads = True

    name = "tanh"
    keep_output = True
    fresh_output = True
    inplace_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.tanh(x)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x: Any) -> Any:
        return xp.inplace.tanh(x, out=x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        g = xp.multiply(output, output)
        g = inplace_on(xp, g).subtract(1.0, g, out=g)
        return (_times_dy(xp, g, dy),)


class Sigmoid(Unary):
    """Logistic sigmoid ``0.5 + 0.5 tanh(x / 2)`` (no overflow): four passes into one new array
    (or into ``x`` itself when nothing else reads it); backward ``dy * y * (1 - y)``, three."""

    fresh_grads = True

    name = "sigmoid"
    keep_output = True
    fresh_output = True
    inplace_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return _sigmoid(xp, x)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x: Any) -> Any:
        return _sigmoid_of_half(xp, xp.inplace.multiply(x, 0.5, out=x))

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        g = xp.subtract(1.0, output)
        g = inplace_on(xp, g).multiply(g, output, out=g)
        return (_times_dy(xp, g, dy),)


class LogSigmoid(Unary):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""

    fresh_grads = True

    name = "log_sigmoid"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.negative(_softplus(xp, xp.negative(x)))

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (_times_dy(xp, _sigmoid_of_half(xp, xp.multiply(inputs[0], -0.5)), dy),)


class Relu(Unary):
    """``max(x, 0)``; the gradient passes where ``y > 0`` (``dy * (y > 0)``)."""

    fresh_grads = True

    name = "relu"
    keep_output = True
    fresh_output = True
    inplace_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.maximum(x, 0.0)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x: Any) -> Any:
        return xp.inplace.maximum(x, 0.0, out=x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        # dy * (y > 0) in one pass (a NaN or inf in dy where the unit is off gives NaN here
        # rather than 0): a kernel on device backends, threads on the NumPy backend's
        return (xp.nn.relu_backward(dy, output),)


class LeakyRelu(Unary):
    """``x`` for ``x > 0``, else ``slope * x``."""

    fresh_grads = True

    name = "leaky_relu"
    keep_inputs = (0,)

    def __init__(self, slope: float) -> None:
        self.slope = slope

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.where(xp.greater(x, 0.0), x, xp.multiply(x, self.slope))

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.where(xp.greater(inputs[0], 0.0), dy, xp.multiply(dy, self.slope)),)


class Elu(Unary):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``; backward uses ``y + alpha`` there."""

    fresh_grads = True

    name = "elu"
    keep_inputs = (0,)
    keep_output = True

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        neg = xp.multiply(xp.expm1(xp.minimum(x, 0.0)), self.alpha)
        return xp.where(xp.greater(x, 0.0), x, neg)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        slope = xp.add(output, self.alpha)
        return (xp.where(xp.greater(inputs[0], 0.0), dy, xp.multiply(dy, slope)),)


class Softplus(Unary):
    """``log(1 + exp(x))`` without overflow; backward ``dy * sigmoid(x)``."""

    fresh_grads = True

    name = "softplus"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return _softplus(xp, x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (_times_dy(xp, _sigmoid(xp, inputs[0]), dy),)


class Gelu(Unary):
    """GELU: exact, ``x Phi(x)`` with the normal distribution (``approximate="none"``, the
    default, as PyTorch's and Keras's) or the tanh approximation
    ``x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))`` (``"tanh"``), the backend's ``xp.nn.gelu`` and ``xp.nn.gelu_backward``
    (one vectorised pass each on the NumPy backend with oneDNN, one kernel each on the device
    backends). Backward needs only ``x``: nothing else is kept between the passes."""

    fresh_grads = True

    name = "gelu"
    keep_inputs = (0,)
    fresh_output = True

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("tanh", "none"):
            raise ValueError(
                f"gelu: approximate must be 'tanh' or 'none' (exact), got {approximate!r}"
            )
        self.approximate = approximate

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.nn.gelu(x, approximate=self.approximate)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.nn.gelu_backward(dy, inputs[0], approximate=self.approximate),)


def tanh(x: Any) -> Expr:
    """Element-wise hyperbolic tangent."""
    return Tanh()(x)


def sigmoid(x: Any) -> Expr:
    """Element-wise logistic sigmoid ``1 / (1 + exp(-x))``."""
    return Sigmoid()(x)


def log_sigmoid(x: Any) -> Expr:
    """Element-wise ``log(sigmoid(x))``, stable for large ``|x|``."""
    return LogSigmoid()(x)


def relu(x: Any) -> Expr:
    """Element-wise ``max(x, 0)``."""
    return Relu()(x)


def leaky_relu(x: Any, slope: float = 0.01) -> Expr:
    """Element-wise ``x if x > 0 else slope * x``."""
    return LeakyRelu(slope)(x)


def elu(x: Any, alpha: float = 1.0) -> Expr:
    """Element-wise ``x if x > 0 else alpha * (exp(x) - 1)``."""
    return Elu(alpha)(x)


def softplus(x: Any) -> Expr:
    """Element-wise ``log(1 + exp(x))``."""
    return Softplus()(x)


def gelu(x: Any, approximate: str = "none") -> Expr:
    """GELU, PyTorch's ``torch.nn.functional.gelu``: exactly ``x Phi(x)`` with the standard
    normal distribution ``Phi(x) = 0.5 (1 + erf(x / sqrt 2))`` by default (PyTorch's and Keras's
    ``approximate=False``; the activation name ``"gelu"``), or with ``approximate="tanh"`` the
    tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))`` (JAX's default; the
    activation name ``"gelu_tanh"``). Earlier versions defaulted to the tanh form."""
    return Gelu(approximate)(x)


def gelu_exact(x: Any) -> Expr:
    """Exact GELU, ``x Phi(x)``: ``gelu(x)`` (``approximate="none"``)."""
    return Gelu("none")(x)


def gelu_tanh(x: Any) -> Expr:
    """GELU's tanh approximation: ``gelu(x, approximate="tanh")``."""
    return Gelu("tanh")(x)
