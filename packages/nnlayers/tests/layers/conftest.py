"""``check_layer``: a layer's gradients (input and every parameter) against central differences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.testing import Tolerances


def _host(xp: Any, value: Any) -> np.ndarray:
    return np.asarray(xp.to_numpy(value), dtype=np.float64)


def check_layer(
    layer: Callable[..., Any],
    inputs: np.ndarray,
    tol: Tolerances,
    *,
    training: bool = True,
    seed: int = 0,
    reseed: bool = False,
) -> nnlayers.Graph:
    """Check ``d sum(layer(x) * R)`` with respect to ``x`` (if floating) and every parameter the
    layer made, against central differences; returns the compiled graph."""
    x_host = inputs.astype(tol.dtype) if inputs.dtype.kind == "f" else inputs
    x = ex.placeholder(x_host.shape, x_host.dtype, name="x")
    out = layer(x)
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.5, 1.5, out.shape).astype(tol.dtype)
    loss = ex.sum(out * ex.constant(weights, dtype=tol.dtype))
    params = [p for p in layer.params]  # type: ignore[attr-defined]
    wrt = ([x] if x_host.dtype.kind == "f" else []) + params
    graph = nnlayers.compile(loss, wrt=wrt, training=training, seed=seed)
    xp = graph.xp
    feeds = {x: x_host}

    def run() -> float:
        if reseed:
            graph.state.rng = xp.random.default_rng(seed)
        return float(_host(xp, graph.forward(feeds, keep_for_backward=False)))

    if reseed:
        graph.state.rng = xp.random.default_rng(seed)
    graph.forward(feeds, keep_for_backward=True)
    analytic = {id(w): _host(xp, g) for w, g in graph.backward().items()}
    for w in wrt:
        if w is x:
            base = x_host
            set_value = lambda v: feeds.__setitem__(x, v)
        else:
            base = w.numpy()  # type: ignore[attr-defined]
            set_value = w.assign  # type: ignore[attr-defined]
        numeric = np.zeros(base.shape)
        for k in range(base.size):
            shifted = base.copy()
            shifted.reshape(-1)[k] += tol.eps
            set_value(shifted)
            up = run()
            shifted.reshape(-1)[k] -= 2 * tol.eps
            set_value(shifted.copy())
            down = run()
            numeric.reshape(-1)[k] = (up - down) / (2 * tol.eps)
        set_value(base)
        np.testing.assert_allclose(
            analytic[id(w)],
            numeric,
            rtol=tol.grad_rtol,
            atol=tol.grad_atol,
            err_msg=f"gradient of {w.describe()} {base.shape}",
        )
    return graph


@pytest.fixture
def gradcheck(tol: Tolerances) -> Callable[..., nnlayers.Graph]:
    """``gradcheck(layer, x)``: the layer's gradients checked at the suite's tolerances."""

    def check(layer: Callable[..., Any], inputs: np.ndarray, **options: Any) -> nnlayers.Graph:
        return check_layer(layer, inputs, tol, **options)

    return check


@pytest.fixture(params=["float64", "float32"])
def dtype(request, xp) -> np.dtype:
    """float64 then float32, for the PyTorch oracle tests of layers (skipped, with the reason,
    on a device without the dtype)."""
    if request.param not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the {xp.name} device has no {request.param}")
    return np.dtype(request.param)
