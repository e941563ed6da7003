"""The fast paths of issue #15, each checked for values, gradients and the work it saves.

- ``gelu`` is one op (not ten), ``sigmoid``/``tanh`` update one new array in place;
- ``x ** p`` for a number ``p`` is ``power_scalar``: products, a reciprocal or a square root;
- ``(N, T, D) @ (D, U)`` is one 2-D GEMM forward and one per gradient;
- the embedding gradient (``take`` backward) is a fast ``scatter_add``;
- basic slices of one array add their gradients into one buffer the plan owns.

The op table (test_op_table.py) also runs every one of these ops against central differences,
NumPy and the PyTorch oracle.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.graph.plan import ADD_INPLACE, ADD_SLICE
from nnlayers.layers import GRU, LSTM, RNN
from nnlayers.ops.math.activation import Sigmoid, Tanh
from nnlayers.testing import check_forward, check_gradients


def _host(xp, a) -> np.ndarray:
    return np.asarray(xp.to_numpy(a), dtype=np.float64)


def _kinds(out) -> list[str]:
    graph = nnlayers.compile(out, wrt=[])
    return [n.kind for n in graph.analysis.nodes]


def _normal_cdf(x):
    return np.vectorize(lambda v: 0.5 * math.erfc(-v / math.sqrt(2.0)))(x)


def _gelu(x, approximate):
    if approximate == "none":  # x Phi(x), PyTorch's default
        return x * _normal_cdf(x)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_grad(x, approximate):
    if approximate == "none":
        return _normal_cdf(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    k, c = math.sqrt(2.0 / math.pi), 0.044715
    t = np.tanh(k * (x + c * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x)


def _value_and_grad(build, x: np.ndarray, dtype="float64"):
    p = Parameter(x, dtype=dtype, name="p")
    graph = nnlayers.compile(ex.sum(build(p)))
    value = graph.forward()
    graph.backward()
    return graph, _host(graph.xp, value), _host(graph.xp, p.grad)


# -- gelu, sigmoid, tanh -------------------------------------------------------------------------
def test_gelu_is_one_op() -> None:
    x = ex.placeholder((None, 8), name="x")
    assert _kinds(ex.gelu(x)) == ["placeholder", "gelu"]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gelu_values_and_gradient_over_a_wide_range(dtype, approximate, xp) -> None:
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the {xp.name} device has no {dtype}")
    x = np.linspace(-8.0, 8.0, 97)
    _, value, grad = _value_and_grad(lambda p: ex.gelu(p, approximate=approximate), x, dtype)
    rtol = 1e-12 if dtype == "float64" else 1e-5
    want = _gelu(x.astype(dtype).astype(np.float64), approximate).sum()
    np.testing.assert_allclose(value, want, rtol=rtol)
    np.testing.assert_allclose(grad, _gelu_grad(x, approximate), rtol=rtol * 10, atol=rtol * 10)
    # saturated: y = x or 0 and a gradient of 1 or 0, to the backend's tanh near +-1 (one ulp
    # of 1 - |tanh| becomes about 1e-3 at x = -60 in float32, as with the composed formula)
    far = np.array([-60.0, -30.0, 30.0, 60.0])
    _, _, grad = _value_and_grad(lambda p: ex.gelu(p, approximate=approximate), far, dtype)
    np.testing.assert_allclose(grad, [0.0, 0.0, 1.0, 1.0], atol=1e-12 if rtol < 1e-6 else 2e-3)


def test_gelu_of_a_scalar(tol) -> None:
    check_gradients(lambda x: ex.gelu(x) * 3.0, [np.array(0.7)], tol)


@pytest.mark.parametrize("fn", [ex.sigmoid, ex.tanh])
def test_sigmoid_and_tanh_saturate_without_overflow(fn) -> None:
    x = np.array([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        graph, _, grad = _value_and_grad(fn, x, "float32")
    y = _host(graph.xp, graph.forward())
    assert np.isfinite(grad).all() and abs(grad[0]) < 3e-7 and abs(grad[-1]) < 3e-7
    reference = 0.5 + 0.5 * np.tanh(0.5 * x) if fn is ex.sigmoid else np.tanh(x)
    np.testing.assert_allclose(y, reference.sum(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", [ex.sigmoid, ex.tanh])
def test_sigmoid_and_tanh_write_into_a_fresh_input(fn, tol, monkeypatch) -> None:
    """``fn(x @ W + b)``: the sum is a fresh array nothing else reads, so the activation runs in
    place in it (forward_inplace), with the values and gradients of the plain forward."""
    op = {ex.sigmoid: Sigmoid, ex.tanh: Tanh}[fn]
    calls = []
    inplace = op.forward_inplace

    def spy(self, xp, k, x):
        calls.append(tuple(x.shape))
        return inplace(self, xp, k, x)

    monkeypatch.setattr(op, "forward_inplace", spy)
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(5,))
    check_gradients(lambda x, w, b: fn(x @ w + b), [x, w, b], tol)
    reference = {ex.sigmoid: lambda z: 1 / (1 + np.exp(-z)), ex.tanh: np.tanh}[fn]
    check_forward(lambda x, w, b: fn(x @ w + b), [x, w, b], lambda x, w, b: reference(x @ w + b))
    assert (3, 5) in calls


# -- x ** p ----------------------------------------------------------------------------------------
def test_power_by_a_number_is_power_scalar() -> None:
    x = ex.placeholder((None, 3), name="x")
    y = ex.placeholder((None, 3), name="y")
    assert _kinds(x**3)[-1] == "power_scalar"
    assert _kinds(ex.power(x, np.float32(-1.0)))[-1] == "power_scalar"
    assert _kinds(x**2)[-1] == "square"
    assert _kinds(x**y)[-1] == "power"
    assert _kinds(2.0**x)[-1] == "power"


EXPONENTS = [3, 4, 5, 8, -1, -2, -3, 0.5, -0.5, 0, 1, 1.5, 9, -2.5]


@pytest.mark.parametrize("p", EXPONENTS)
def test_power_scalar_matches_numpy_on_special_values(p) -> None:
    """Zeros of both signs, infinities, NaN, negative and tiny values: what np.power gives,
    except that ``x ** 0.5`` is ``sqrt(x)`` and ``x ** -0.5`` is ``1 / sqrt(x)`` exactly, as in
    PyTorch: at -0 they give -0 and -inf, at -inf NaN (C's pow: +0, +inf and +inf, 0)."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -2.0, 3.0, 1e-3, -1e-3, 7.5])
    with np.errstate(all="ignore"):
        want = np.power(x, float(p))
        if p in (0.5, -0.5):
            want[1] = -0.0 if p == 0.5 else -np.inf
            want[3] = np.nan
        graph = nnlayers.compile(ex.constant(x, dtype="float64") ** p, wrt=[])
        got = _host(graph.xp, graph.forward())
    np.testing.assert_allclose(got, want, rtol=1e-14, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want[:2]))


@pytest.mark.parametrize("p", EXPONENTS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_power_scalar_gradient(p, dtype) -> None:
    x = np.array([-1.7, -0.4, 0.3, 1.1, 2.5]) if float(p).is_integer() else np.array([0.3, 2.5])
    _, value, grad = _value_and_grad(lambda t: t**p, x, dtype)
    rtol = 1e-13 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(value, np.power(x, float(p)).sum(), rtol=rtol)
    want = np.zeros_like(x) if p == 0 else p * np.power(x, p - 1.0)
    np.testing.assert_allclose(grad, want, rtol=rtol)


def test_power_scalar_gradient_at_zero() -> None:
    """x**3 and x**4 are flat at 0; x**0 has a zero gradient; x**0.5 and x**-1 are infinite."""
    with np.errstate(divide="ignore"):
        for p, want in [(3, 0.0), (4, 0.0), (0, 0.0), (0.5, np.inf), (-1, -np.inf)]:
            _, _, grad = _value_and_grad(lambda t, p=p: t**p * 1.0, np.array([0.0]))
            assert grad[0] == want, p


# -- (N, T, D) @ (D, U) -------------------------------------------------------------------------
class _MatmulSpy:
    def __init__(self, monkeypatch, xp) -> None:
        self.shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        real = xp.matmul

        def spy(a, b):
            self.shapes.append((tuple(a.shape), tuple(b.shape)))
            return real(a, b)

        monkeypatch.setattr(xp, "matmul", spy)


def test_rows_times_matrix_is_one_2d_gemm_per_pass(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    x = ex.placeholder((None, 5, 4), "float64", name="x")
    w = Parameter(rng.normal(size=(4, 3)), dtype="float64", name="w")
    graph = nnlayers.compile(ex.sum(x @ w), wrt=[x, w])
    spy = _MatmulSpy(monkeypatch, graph.xp)
    data = rng.normal(size=(6, 5, 4))
    graph.forward({x: data})
    grads = graph.backward()
    assert spy.shapes == [((30, 4), (4, 3)), ((30, 3), (3, 4)), ((4, 30), (30, 3))]
    np.testing.assert_allclose(_host(graph.xp, grads[w]), data.sum((0, 1))[:, None] * [1, 1, 1])
    np.testing.assert_allclose(
        _host(graph.xp, grads[x]), np.broadcast_to(w.numpy().sum(1), data.shape)
    )


def _t(a):
    return ex.permute_dims(a, (1, 0, 2)) if len(a.shape) == 3 else ex.permute_dims(a, (1, 0))


def _np_t(a):
    return a.transpose(1, 0, 2) if a.ndim == 3 else a.T


@pytest.mark.parametrize(
    "build,reference,shapes",
    [
        (lambda x, w: x @ w, lambda x, w: x @ w, [(2, 3, 4), (4, 5)]),
        (lambda x, w: x @ w, lambda x, w: x @ w, [(2, 3, 2, 4), (4, 5)]),
        (lambda x, w: _t(x) @ w, lambda x, w: _np_t(x) @ w, [(3, 2, 4), (4, 5)]),  # strided
        (lambda x, w: x[:, ::2, 1:] @ w, lambda x, w: x[:, ::2, 1:] @ w, [(2, 5, 5), (4, 3)]),
        (lambda x, w: x @ _t(w), lambda x, w: x @ w.T, [(2, 3, 4), (5, 4)]),  # transposed W
        (
            lambda x, w: ex.tanh(x @ w) @ _t(w),  # W used twice
            lambda x, w: np.tanh(x @ w) @ w.T,
            [(2, 3, 4), (4, 5)],
        ),
    ],
    ids=["3d", "4d", "permuted", "sliced", "transposed-w", "shared-w"],
)
def test_rows_times_matrix_values_and_gradients(build, reference, shapes, tol) -> None:
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(-1, 1, s) for s in shapes]
    check_gradients(build, inputs, tol)
    check_forward(build, inputs, reference, tol)


def test_rows_times_matrix_with_a_batch_axis_fed_later_and_empty() -> None:
    rng = np.random.default_rng(2)
    x = ex.placeholder((None, 3, 4), "float64", name="x")
    w = Parameter(rng.normal(size=(4, 2)), dtype="float64", name="w")
    graph = nnlayers.compile(ex.sum(ex.square(x @ w)), wrt=[x, w])
    for n in (5, 1, 0):
        data = rng.normal(size=(n, 3, 4))
        got = float(_host(graph.xp, graph.forward({x: data})))
        assert got == pytest.approx(float(((data @ w.numpy()) ** 2).sum()), rel=1e-12, abs=1e-12)
        grads = graph.backward()
        assert _host(graph.xp, grads[x]).shape == (n, 3, 4)
        want_w = 2 * data.reshape(-1, 4).T @ (data.reshape(-1, 4) @ w.numpy())
        np.testing.assert_allclose(_host(graph.xp, grads[w]), want_w, atol=1e-12)


# -- embedding gradient ----------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1])
def test_take_gradient_accumulates_heavy_repeats(axis) -> None:
    """Many repeats of a few ids (Zipf) and rows wide enough for the backend's fast
    scatter_add: the gradient is the add.at sum."""
    rng = np.random.default_rng(3)
    vocab, width = 40, 24
    ids = np.minimum(rng.zipf(1.3, size=(12, 25)), vocab) - 1
    table = rng.normal(size=(vocab, width) if axis == 0 else (width, vocab))
    e = Parameter(table, dtype="float64", name="e")
    r = rng.uniform(0.5, 1.5, (12, 25, width) if axis == 0 else (width, 12, 25))
    looked_up = ex.take(e, ex.constant(ids), axis=axis)
    graph = nnlayers.compile(ex.sum(looked_up * ex.constant(r, dtype="float64")))
    graph.forward()
    graph.backward()
    want = np.zeros_like(table)
    if axis == 0:
        np.add.at(want, ids.reshape(-1), r.reshape(-1, width))
    else:
        np.add.at(want, (slice(None), ids.reshape(-1)), r.reshape(width, -1))
    np.testing.assert_allclose(_host(graph.xp, e.grad), want, rtol=1e-12, atol=1e-12)


# -- slices of one array -------------------------------------------------------------------------
def _slice_modes(graph) -> list[int]:
    plan = next(iter(graph._plans.values()))
    return [mode for step in plan.backward_steps for _k, _j, mode, *_ in step[8]]


def test_slices_of_one_array_share_one_gradient_buffer(monkeypatch) -> None:
    rng = np.random.default_rng(4)
    steps = 6
    x = ex.placeholder((None, steps, 3), "float64", name="x")
    w = Parameter(rng.normal(size=(steps, 3)), dtype="float64", name="w")
    loss = sum(ex.sum(ex.tanh(x[:, t]) * w[t]) for t in range(steps))
    graph = nnlayers.compile(loss, wrt=[x, w])
    data = rng.normal(size=(2, steps, 3))
    graph.forward({x: data})
    xp = graph.xp
    full: list[tuple[int, ...]] = []
    zeros = xp.zeros

    def spy(shape, **kw):
        if tuple(shape) in ((2, steps, 3), (steps, 3)):
            full.append(tuple(shape))
        return zeros(shape, **kw)

    monkeypatch.setattr(xp, "zeros", spy)
    grads = graph.backward()
    # one zero-filled gradient for x and one for w, however many slices read them
    assert sorted(full) == [(2, steps, 3), (steps, 3)]
    assert _slice_modes(graph).count(ADD_SLICE) == 2 * (steps - 1)
    t = np.tanh(data)
    np.testing.assert_allclose(_host(xp, grads[x]), (1 - t * t) * w.numpy(), rtol=1e-12)
    np.testing.assert_allclose(_host(xp, grads[w]), t.sum(0), rtol=1e-12)


@pytest.mark.parametrize(
    "build",
    [
        # every column, in order and out of order
        lambda x: ex.stack([x[:, t] * (t + 1.0) for t in (2, 0, 3, 1)], axis=1),
        # a non-slice consumer first (its gradient may alias dy), then slices
        lambda x: ex.reshape(x, (3, 4)) * 2.0 + ex.stack([x[:, t] for t in range(4)], axis=1),
        # slices first, then an element-wise consumer, overlapping slices, steps and new axes
        lambda x: x[:, 1:3] * x[:, 0:2] + ex.tanh(x)[:, ::2] * 0.5 + x[::-1, None, 3] * x[:, :2],
        # int indices that drop axes, and the same slice twice
        lambda x: x[1] * x[2] + x[1] + x[..., -1][None][:, 0],
        # a slice of a 0-d-producing chain stays out of place
        lambda x: ex.sum(x, axis=1)[0] * x[:, 0],
    ],
    ids=["columns", "alias-first", "overlap", "ints", "scalar"],
)
def test_slice_accumulation_gradients(build, tol) -> None:
    check_gradients(build, [np.random.default_rng(5).uniform(-1, 1, (3, 4))], tol)


def test_slice_accumulation_into_a_parameter_and_under_the_guard() -> None:
    rng = np.random.default_rng(6)
    value = rng.normal(size=(4, 3))
    e = Parameter(value, dtype="float64", name="e")
    other = Parameter(value.copy(), dtype="float64", name="other")
    loss = ex.sum(e[0] * e[1]) + ex.sum(e[2:] * 3.0) + ex.sum(other * e)
    for finite in (False, True):
        graph = nnlayers.compile(loss, check_finite=finite)
        graph.forward()
        grads = graph.backward()
        ge = _host(graph.xp, grads[e])
        want = value.copy()
        want[0] += value[1]
        want[1] += value[0]
        want[2:] += 3.0
        np.testing.assert_allclose(ge, want, rtol=1e-12)
        assert grads[e] is not grads[other]
    graph = nnlayers.compile(loss)
    graph.forward()
    assert ADD_SLICE in _slice_modes(graph)


def test_second_fresh_contribution_is_added_in_place() -> None:
    """The first contribution is a fresh array (tanh's gradient): the second one is added into
    it rather than into a new array."""
    x = Parameter(np.ones((2, 3)), name="x")
    graph = nnlayers.compile(ex.sum(ex.tanh(x) * ex.exp(x)))
    graph.forward()
    graph.backward()
    modes = _slice_modes(graph)
    assert ADD_INPLACE in modes


@pytest.mark.parametrize("cell", [RNN, LSTM, GRU])
def test_unrolled_recurrent_layers_project_the_sequence_once(cell, tol) -> None:
    kw = {} if cell is RNN else {"fused": False}
    layer = cell(3, return_sequences=True, seed=0, **kw)
    x = ex.placeholder((None, 5, 2), name="x")
    graph = nnlayers.compile(ex.sum(layer(x)), wrt=[])
    weight = layer._params["weight"]
    readers = [
        n for n in graph.analysis.nodes if n.op is not None and any(i is weight for i in n.inputs)
    ]
    assert [n.kind for n in readers] == ["matmul"]
    assert readers[0].inputs[0] is x
    rng = np.random.default_rng(7)
    check_gradients(
        lambda x: cell(3, return_sequences=True, seed=0, **kw)(x), [rng.normal(size=(2, 4, 2))], tol
    )
