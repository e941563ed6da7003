"""Test helpers that ship with nnlayers: the op-table case type and the gradient checks.

A new op gets its gradient and forward checks by adding :class:`OpCase` rows to the op table
(``packages/nnlayers/tests/ops/test_op_table.py``); a backend package can run the same checks
by importing these helpers.
"""

from .cases import (
    OpCase,
    away_from_zero,
    distinct,
    integers,
    positive,
    probabilities,
    real,
    unit,
)
from .gradcheck import (
    LOOSE,
    STRICT,
    Tolerances,
    check_forward,
    check_gradients,
    tolerances,
)

__all__ = [
    "LOOSE", "STRICT", "OpCase", "Tolerances", "away_from_zero", "check_forward",
    "check_gradients", "distinct", "integers", "positive", "probabilities", "real", "tolerances",
    "unit",
]  # fmt: skip
