"""Divergences (compositions): KL divergence of a diagonal Gaussian to the standard normal."""

from __future__ import annotations

from typing import Any

from ...expr.node import Expr, as_exprs
from ..math.arithmetic import square
from ..math.exponential import exp
from .regression import check_operands, per_example_mean


def kl_standard_normal(mean: Any, log_var: Any) -> Expr:
    """``KL(N(mean, exp(log_var)) || N(0, 1))`` summed over each example, averaged over the
    batch: ``-0.5 * sum(1 + log_var - mean**2 - exp(log_var))`` (the VAE regulariser)."""
    mean, log_var = as_exprs(mean, log_var)
    check_operands("kl_standard_normal", mean, log_var, what="log_var")
    return per_example_mean((1.0 + log_var - square(mean) - exp(log_var)) * -0.5)
