"""All element-wise functions in one place (the ``Expr`` operators look them up here)."""

from __future__ import annotations

from .arithmetic import abs, add, divide, multiply, negative, power, sqrt, square, subtract
from .comparison import (
    astype,
    clip,
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    maximum,
    minimum,
    not_equal,
    where,
)
from .exponential import exp, log, log1p
from .trigonometric import cos, sin

__all__ = [
    "abs", "add", "astype", "clip", "cos", "divide", "equal", "exp", "greater", "greater_equal",
    "less", "less_equal", "log", "log1p", "maximum", "minimum", "multiply", "negative",
    "not_equal", "power", "sin", "sqrt", "square", "subtract", "where",
]  # fmt: skip
