"""Op declarations, one class per op, in family files under category folders.

``math/`` (arithmetic, exponential, trigonometric, comparison, activation, reduction, linalg), ``array/``
(shape, indexing, join), ``nn/`` (convolution, pooling, normalization, dropout, softmax, recurrent, attention, sequence),
``loss/`` (cross_entropy, regression, divergence, margin, penalty) and ``control`` (stop_gradient). Importing
this package imports every family, so :data:`REGISTRY` lists every op.
"""

from . import control
from .array import indexing, join, shape
from .base import REGISTRY, Broadcasting, Op, Unary, unbroadcast
from .loss import cross_entropy, divergence, margin, penalty, regression
from .math import (
    activation,
    arithmetic,
    comparison,
    exponential,
    linalg,
    reduction,
    trigonometric,
)
from .nn import (
    attention,
    convolution,
    dropout,
    normalization,
    pooling,
    recurrent,
    sequence,
    softmax,
)

__all__ = [
    "REGISTRY", "Broadcasting", "Op", "Unary", "activation", "attention", "arithmetic", "comparison", "control",
    "convolution", "cross_entropy", "divergence", "dropout", "exponential", "indexing", "join",
    "linalg", "margin", "normalization", "penalty", "pooling", "recurrent", "reduction", "regression", "sequence", "shape",
    "softmax", "trigonometric", "unbroadcast",
]  # fmt: skip
