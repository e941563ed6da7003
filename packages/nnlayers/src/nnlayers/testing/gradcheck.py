"""Central-difference gradient checks and forward checks of expressions, on the active backend.

Inputs are host NumPy arrays; each becomes a placeholder of its dtype, so the same check runs on
every arraycore backend. Floating inputs are differentiated; integer inputs (class labels,
indices) are fed as they are.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import arraycore
from arraycore import ArrayNamespace

from .. import expr as ex
from ..graph.graph import Graph


@dataclass(frozen=True)
class Tolerances:
    """What a check on one backend allows: its float dtype, finite-difference step and bounds."""

    dtype: np.dtype
    eps: float
    grad_rtol: float
    grad_atol: float
    forward_rtol: float
    forward_atol: float


STRICT = Tolerances(np.dtype("float64"), 1e-6, 1e-5, 1e-7, 1e-7, 1e-9)
"""float64 on the NumPy reference backend."""

LOOSE = Tolerances(np.dtype("float32"), 1e-2, 5e-2, 2e-2, 1e-4, 1e-5)
"""float32 on every other backend (GPU-style arithmetic)."""


def tolerances() -> Tolerances:
    """``STRICT`` on the NumPy backend, ``LOOSE`` on any other (``ARRAYCORE_BACKEND``)."""
    name = os.environ.get("ARRAYCORE_BACKEND", "numpy") or "numpy"
    return STRICT if name == "numpy" and arraycore.namespace().name == "numpy" else LOOSE


def _to_host(xp: ArrayNamespace, value: Any) -> np.ndarray:
    return np.asarray(xp.to_numpy(value), dtype=np.float64)


def _placeholders(inputs: Sequence[np.ndarray], dtype: np.dtype) -> list[Any]:
    phs = []
    for i, a in enumerate(inputs):
        dt = dtype if a.dtype.kind == "f" else a.dtype
        phs.append(ex.placeholder(a.shape, dt, name=f"in{i}"))
    return phs


def check_forward(
    build: Callable[..., Any],
    inputs: Sequence[np.ndarray],
    reference: Callable[..., Any],
    tol: Tolerances | None = None,
    training: bool = False,
) -> None:
    """Assert that ``build(*placeholders)`` computes what ``reference(*inputs)`` does (NumPy)."""
    tol = tol or tolerances()
    phs = _placeholders(inputs, tol.dtype)
    graph = Graph(build(*phs), wrt=[], training=training)
    got = _to_host(graph.xp, graph.forward(dict(zip(phs, inputs, strict=True))))
    want = np.asarray(
        reference(*[a.astype(tol.dtype) if a.dtype.kind == "f" else a for a in inputs])
    )
    np.testing.assert_allclose(got, want, rtol=tol.forward_rtol, atol=tol.forward_atol)
    assert got.shape == want.shape, f"forward shape {got.shape} != reference {want.shape}"


def check_gradients(
    build: Callable[..., Any],
    inputs: Sequence[np.ndarray],
    tol: Tolerances | None = None,
    training: bool = True,
    reseed: bool = False,
    seed: int = 0,
) -> None:
    """Assert that backward agrees with central differences for every floating input.

    The checked scalar is ``sum(build(*x) * R)`` with a fixed random ``R``, so every element of
    the output's gradient differs. ``reseed`` restarts the graph's generator before each forward
    (dropout then draws the same mask every time).
    """
    tol = tol or tolerances()
    inputs = [a.astype(tol.dtype) if a.dtype.kind == "f" else a for a in inputs]
    phs = _placeholders(inputs, tol.dtype)
    out = build(*phs)
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.5, 1.5, out.shape).astype(tol.dtype)
    loss = ex.sum(out * ex.constant(weights, dtype=tol.dtype))
    wrt = [p for p, a in zip(phs, inputs, strict=True) if a.dtype.kind == "f"]
    graph = Graph(loss, wrt=wrt, training=training)
    xp = graph.xp
    feeds = dict(zip(phs, inputs, strict=True))

    def run() -> float:
        if reseed:
            graph.state.rng = xp.random.default_rng(seed)
        return float(_to_host(xp, graph.forward(feeds, keep_for_backward=False)))

    if reseed:
        graph.state.rng = xp.random.default_rng(seed)
    graph.forward(feeds, keep_for_backward=True)
    analytic = {p: _to_host(xp, g) for p, g in graph.backward().items()}
    for p in wrt:
        base = feeds[p]
        numeric = np.zeros(base.shape)
        flat = numeric.reshape(-1)
        for k in range(base.size):
            shifted = base.copy()
            shifted.reshape(-1)[k] += tol.eps
            feeds[p] = shifted
            up = run()
            shifted.reshape(-1)[k] -= 2 * tol.eps
            down = run()
            flat[k] = (up - down) / (2 * tol.eps)
        feeds[p] = base
        np.testing.assert_allclose(
            analytic[p],
            numeric,
            rtol=tol.grad_rtol,
            atol=tol.grad_atol,
            err_msg=f"gradient of input {p.name} {base.shape}",
        )
