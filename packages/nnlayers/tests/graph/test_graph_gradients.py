"""Gradient flow through the compiled graph: fan-out, diamonds, deep chains, stop_gradient."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.testing import check_gradients


def host(xp, a):
    return np.asarray(xp.to_numpy(a), dtype=np.float64)


def test_fan_out_h_used_twice(tol) -> None:
    """``h = a + c; y = h*u + h*v``: h's gradient is the sum of both uses."""
    check_gradients(
        lambda a, c, u, v: (lambda h: h * u + h * v)(a + c),
        [np.random.default_rng(1).uniform(-1, 1, (3, 4)) for _ in range(4)],
        tol,
    )


def test_fan_out_values(tol) -> None:
    rng = np.random.default_rng(2)
    a, c, u, v = (rng.uniform(-1, 1, (2, 3)) for _ in range(4))
    pa, pc = Parameter(a, name="a", dtype=tol.dtype), Parameter(c, name="c", dtype=tol.dtype)
    uu, vv = ex.constant(u, dtype=tol.dtype), ex.constant(v, dtype=tol.dtype)
    h = pa + pc
    graph = nnlayers.compile(ex.sum(h * uu + h * vv))
    graph.forward()
    graph.backward()
    np.testing.assert_allclose(host(graph.xp, pa.grad), u + v, rtol=1e-6)
    np.testing.assert_allclose(host(graph.xp, pc.grad), u + v, rtol=1e-6)
    # a and c get the same contribution from one add: their grads must not share memory.
    assert pa.grad is not pc.grad


def test_deeper_diamonds_and_repeated_inputs(tol) -> None:
    """Nodes with several inputs and several consumers, an input used twice by one op."""

    def build(x, w):
        h1 = ex.tanh(x @ w)
        h2 = h1 * h1 + ex.exp(h1 * 0.5)
        h3 = ex.concat([h1, h2, h1 - h2], axis=1)
        return ex.sum(h3 * h3, axis=1, keepdims=True) + h1[:, :1] * h2[:, 1:2] + x[:, :1]

    rng = np.random.default_rng(3)
    check_gradients(build, [rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 2))], tol)


def test_fan_out_over_many_consumers_accumulates_in_place(tol) -> None:
    """Four consumers: the third and fourth contributions are added in place."""
    check_gradients(
        lambda x: x * 2.0 + ex.exp(x) + ex.tanh(x) + x * x,
        [np.random.default_rng(4).uniform(-1, 1, (3,))],
        tol,
    )


def test_scalar_fan_out(tol) -> None:
    """0-d nodes never accumulate in place (NumPy returns scalars for them)."""
    check_gradients(
        lambda x: (lambda s: s * s + s * 3.0 + ex.exp(s))(ex.sum(x)),
        [np.random.default_rng(5).uniform(-1, 1, (4,))],
        tol,
    )


def test_ten_thousand_node_chain() -> None:
    """A chain far deeper than the recursion limit compiles, runs and differentiates."""
    x = ex.placeholder((None, 3), "float64", name="x")
    h = x
    for _ in range(10_000):
        h = h * 1.0001
    graph = nnlayers.compile(ex.sum(h), wrt=[x])
    feed = np.ones((2, 3))
    value = float(graph.xp.to_numpy(graph.forward({x: feed})))
    assert value == pytest.approx(6 * 1.0001**10_000)
    grad = graph.xp.to_numpy(graph.backward()[x])
    np.testing.assert_allclose(grad, np.full((2, 3), 1.0001**10_000), rtol=1e-9)


def test_stop_gradient_blocks_the_gradient(tol) -> None:
    x = ex.placeholder((3,), tol.dtype, name="x")
    y = ex.sum(x * ex.stop_gradient(x))
    graph = nnlayers.compile(y, wrt=[x])
    feed = np.array([1.0, 2.0, 3.0])
    graph.forward({x: feed})
    np.testing.assert_allclose(host(graph.xp, graph.backward()[x]), feed)


def test_no_gradient_work_for_constants_and_placeholders() -> None:
    x = ex.placeholder((None, 4), name="x")
    W = Parameter(np.ones((4, 2)), name="W")
    graph = nnlayers.compile(ex.sum(ex.tanh(x @ W) * 3.0))
    a = graph.analysis
    x_index = a.nodes.index(x)
    assert not a.on_path[x_index]
    matmul = next(i for i, n in enumerate(a.nodes) if n.kind == "matmul")
    assert a.needs[matmul] == (False, True)
    assert all(not a.on_path[i] for i in a.constants)


def test_parameter_grads_do_not_alias_each_other() -> None:
    """sum(a + b) gives both the same upstream gradient; each .grad is its own array."""
    a = Parameter(np.zeros(3), name="a")
    b = Parameter(np.zeros(3), name="b")
    graph = nnlayers.compile(ex.sum(a + b))
    graph.forward()
    graph.backward()
    graph.xp.inplace.fill(5.0, out=a.grad)
    assert float(graph.xp.to_numpy(b.grad)[0]) == 1.0


def test_unused_parameter_gets_zero_gradient() -> None:
    a = Parameter(np.ones(2), name="a")
    b = Parameter(np.ones(3), name="b")
    graph = nnlayers.compile([ex.sum(a), ex.sum(b)])
    graph.forward()
    grads = graph.backward()
    assert graph.xp.to_numpy(grads[b]).tolist() == [0.0, 0.0, 0.0]


def test_gradient_with_respect_to_an_intermediate(tol) -> None:
    x = ex.placeholder((2,), tol.dtype, name="x")
    h = ex.exp(x).named("h")
    graph = nnlayers.compile(ex.sum(h * h), wrt=[h, x])
    feed = np.array([0.1, -0.3])
    graph.forward({x: feed})
    grads = graph.backward()
    np.testing.assert_allclose(host(graph.xp, grads[h]), 2 * np.exp(feed), rtol=1e-5)
    np.testing.assert_allclose(host(graph.xp, grads[x]), 2 * np.exp(2 * feed), rtol=1e-5)
