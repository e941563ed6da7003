"""The PyTorch oracle: forward values and gradients of an expression against PyTorch's autograd.

The same inputs go through ``build(*placeholders)`` on the active arraycore backend and through
``torch_fn(torch, *tensors)`` on PyTorch's CPU; both are reduced to ``sum(output * R)`` with one
fixed random ``R``, so every element of the output gradient differs, and the output and every
floating input's gradient must agree within the tolerances of the dtype. PyTorch is a test-only
dependency (``pip install torch``); importing this module does not import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arraycore import ArrayNamespace

from .. import expr as ex
from ..graph.graph import Graph


@dataclass(frozen=True)
class OracleTolerance:
    """How close values and gradients must be to PyTorch's in one dtype."""

    rtol: float
    atol: float


#: float64: both sides compute the same formula in double precision; only rounding differs.
#: float32: summation order and fused kernels differ, as between two GPU libraries.
ORACLE_TOLERANCES = {
    np.dtype("float64"): OracleTolerance(1e-10, 1e-12),
    np.dtype("float32"): OracleTolerance(2e-4, 2e-5),
}


def _host(xp: ArrayNamespace, value: Any) -> np.ndarray:
    return np.asarray(xp.to_numpy(value), dtype=np.float64)


def check_against_torch(
    build: Callable[..., Any],
    torch_fn: Callable[..., Any],
    inputs: Sequence[np.ndarray],
    dtype: Any,
    training: bool = True,
    seed: int = 0,
) -> None:
    """Assert that ``build`` on the active backend computes what ``torch_fn`` does in PyTorch,
    forward and backward, for ``inputs`` (host arrays; floating ones are cast to ``dtype``)."""
    import torch

    dtype = np.dtype(dtype)
    tol = ORACLE_TOLERANCES[dtype]
    inputs = [a.astype(dtype) if a.dtype.kind == "f" else a for a in inputs]
    placeholders = [
        ex.placeholder(a.shape, dtype if a.dtype.kind == "f" else a.dtype, name=f"in{i}")
        for i, a in enumerate(inputs)
    ]
    out = build(*placeholders)
    weights = np.random.default_rng(seed).uniform(0.5, 1.5, out.shape).astype(dtype)
    loss = ex.sum(out * ex.constant(weights, dtype=dtype))
    wrt: list[ex.Expr] = [
        p for p, a in zip(placeholders, inputs, strict=True) if a.dtype.kind == "f"
    ]
    graph = Graph([loss, out], wrt=wrt, training=training)
    feeds = dict(zip(placeholders, inputs, strict=True))
    _, value = graph.forward(feeds, keep_for_backward=True)
    grads = graph.backward()

    tensors: list[Any] = [
        torch.tensor(a, requires_grad=a.dtype.kind == "f") if a.dtype.kind in "fiub" else a
        for a in inputs
    ]
    want = torch_fn(torch, *tensors)
    (want * torch.tensor(weights)).sum().backward()

    got = _host(graph.xp, value)
    expected = want.detach().numpy().astype(np.float64)
    assert got.shape == expected.shape, f"forward shape {got.shape} != PyTorch's {expected.shape}"
    np.testing.assert_allclose(
        got, expected, rtol=tol.rtol, atol=tol.atol, err_msg=f"forward ({dtype.name})"
    )
    for k, (p, t) in enumerate(zip(placeholders, tensors, strict=True)):
        if p not in grads:
            continue
        torch_grad = t.grad
        expected_grad = (
            np.zeros(t.shape) if torch_grad is None else torch_grad.numpy().astype(np.float64)
        )
        np.testing.assert_allclose(
            _host(graph.xp, grads[p]),
            expected_grad,
            rtol=tol.rtol,
            atol=tol.atol,
            err_msg=f"gradient of input {k} {tuple(t.shape)} ({dtype.name})",
        )
