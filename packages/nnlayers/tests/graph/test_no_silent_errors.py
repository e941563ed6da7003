"""Silent wrong answers that once happened: aliased gradients, float64 graphs computing partly in
float32, NaN gradients of a norm at 0, declared and actual dtypes that differ, mixed dtypes that
failed only at the first forward."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.errors import ShapeError


def host(xp, a):
    return np.asarray(xp.to_numpy(a))


def float64_or_skip(xp) -> None:
    if "float64" not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the {xp.name} device has no float64")


IDENTITIES = {
    "broadcast_to": lambda p: ex.broadcast_to(p, p.shape),
    "reshape": lambda p: ex.reshape(p, p.shape),
    "permute_dims": lambda p: ex.permute_dims(p, (0, 1)),
    "getitem-all": lambda p: p[:, :],
    "pad-nothing": lambda p: ex.pad(p, ((0, 0), (0, 0))),
    "concat-one": lambda p: ex.concat([p], axis=0),
    "astype-same": lambda p: ex.astype(p, p.dtype),
}


@pytest.mark.parametrize("identity", list(IDENTITIES), ids=list(IDENTITIES))
def test_parameters_own_their_gradients_through_identity_ops(identity: str) -> None:
    """Two parameters each through an op that is an identity for their shape, then added: an
    in-place update of one gradient must not change the other."""
    f = IDENTITIES[identity]
    a = Parameter(np.ones((2, 3)), name="a")
    b = Parameter(np.ones((2, 3)), name="b")
    graph = nnlayers.compile(ex.sum(f(a) + f(b)))
    graph.forward()
    graph.backward()
    xp = graph.xp
    before = host(xp, b.grad).copy()
    xp.inplace.multiply(a.grad, 5.0, out=a.grad)  # what an optimiser does to a gradient
    np.testing.assert_array_equal(host(xp, b.grad), before)
    np.testing.assert_array_equal(host(xp, a.grad), 5 * before)


def test_parameter_gradient_of_a_sum_is_writable() -> None:
    """``sum(w)``'s gradient is a broadcast view of one number: the parameter gets its own array."""
    w = Parameter(np.ones((2, 3)), name="w")
    graph = nnlayers.compile(ex.sum(w) + ex.mean(w))
    graph.forward()
    graph.backward()
    xp = graph.xp
    xp.inplace.add(w.grad, 1.0, out=w.grad)
    np.testing.assert_allclose(host(xp, w.grad), np.full((2, 3), 2 + 1 / 6))


def test_shared_parameter_used_twice_gets_the_sum_of_both_uses() -> None:
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 3))
    x = rng.standard_normal((2, 3))
    w = Parameter(w0, name="w")
    graph = nnlayers.compile(ex.sum(ex.tanh(ex.constant(x) @ w) @ w))
    graph.forward()
    graph.backward()
    y, ones = np.tanh(x @ w0), np.ones((2, 3))
    want = y.T @ ones + x.T @ ((ones @ w0.T) * (1 - y**2))
    np.testing.assert_allclose(host(graph.xp, w.grad), want, rtol=1e-4, atol=1e-5)


FLOAT64_CONSTANTS = {
    # a float64 NumPy array beside a float64 expression must not be rounded to float32
    "stack": (
        lambda x, c: ex.sum(ex.stack([c, x])),
        lambda x, c: c.sum() + x.sum(),
    ),
    "stack-constant-last": (
        lambda x, c: ex.sum(ex.stack([x, c])),
        lambda x, c: c.sum() + x.sum(),
    ),
    "softmax_cross_entropy": (
        lambda x, c: ex.softmax_cross_entropy(x, c / c.sum(1, keepdims=True)),
        lambda x, c: (
            -((c / c.sum(1, keepdims=True)) * (x - np.log(np.exp(x).sum(1, keepdims=True)))).sum()
            / 2
        ),
    ),
    "kl_standard_normal": (
        lambda x, c: ex.kl_standard_normal(c, x),
        lambda x, c: (-0.5 * (1 + x - c**2 - np.exp(x))).sum() / 2,
    ),
    "squared_error": (
        lambda x, c: ex.squared_error(c, x),
        lambda x, c: ((c - x) ** 2).sum() / 2,
    ),
    "sigmoid_cross_entropy": (
        lambda x, c: ex.sigmoid_cross_entropy(c, ex.sigmoid(x)),
        lambda x, c: (np.logaddexp(0, c) - c / (1 + np.exp(-x))).sum() / 2,
    ),
    "layer_norm": (
        lambda x, c: ex.sum(ex.layer_norm(x, c[0], c[1])),
        lambda x, c: (
            (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * c[0] + c[1]
        ).sum(),
    ),
}


@pytest.mark.parametrize("case", list(FLOAT64_CONSTANTS), ids=list(FLOAT64_CONSTANTS))
def test_float64_graphs_keep_float64_constants(xp, case: str) -> None:
    float64_or_skip(xp)
    build, reference = FLOAT64_CONSTANTS[case]
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 1.0, (2, 3))
    c = rng.uniform(0.1, 1.0, (2, 3)) + 1 / 3  # not representable in float32
    px = ex.placeholder((2, 3), "float64", name="x")
    out = build(px, c)
    assert out.dtype == np.float64
    graph = nnlayers.compile(out, wrt=[px])
    got = float(host(graph.xp, graph.forward({px: x})))
    assert got == pytest.approx(reference(x, c), rel=1e-13, abs=1e-13)


@pytest.mark.parametrize(
    ("axis", "x"),
    [
        (None, np.zeros(3)),
        (1, np.array([[0.0, 0.0], [3.0, 4.0]])),
        (0, np.array([[0.0, 1.0], [0.0, 0.0]])),
    ],
)
def test_norm_of_zeros_has_gradient_zero(axis, x: np.ndarray) -> None:
    """PyTorch's subgradient: 0 where the norm is 0, ``x / norm`` elsewhere; never NaN."""
    px = ex.placeholder(x.shape, name="x")
    graph = nnlayers.compile(ex.sum(ex.norm(px, axis=axis)), wrt=[px])
    graph.forward({px: x})
    grad = host(graph.xp, graph.backward()[px])
    norm = np.linalg.norm(x, axis=axis, keepdims=True)
    want = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
    np.testing.assert_allclose(grad, want, rtol=1e-6)


@pytest.mark.parametrize("loss", ["softmax_cross_entropy", "sigmoid_cross_entropy"])
def test_cross_entropy_declares_the_dtype_it_returns(xp, loss: str) -> None:
    float64_or_skip(xp)
    logits = ex.placeholder((2, 3), "float32", name="logits")
    target = ex.placeholder((2, 3), "float64", name="target")
    out = getattr(ex, loss)(logits, target)
    graph = nnlayers.compile(out, wrt=[logits], check_specs=True)
    value = graph.forward({logits: np.zeros((2, 3)), target: np.full((2, 3), 1 / 3)})
    assert np.dtype(str(value.dtype)) == out.dtype == np.float64
    grad = graph.backward()[logits]
    assert np.dtype(str(grad.dtype)) == np.float32


MIXED = {
    "conv2d": lambda x, w: ex.conv2d(x, w),
    "conv2d_transpose": lambda x, w: ex.conv2d_transpose(x, w),
}


@pytest.mark.parametrize("op", list(MIXED), ids=list(MIXED))
def test_convolutions_reject_mixed_dtypes_when_built(op: str) -> None:
    x = ex.placeholder((1, 2, 5, 5), "float32", name="images")
    w = Parameter(np.ones((2, 2, 3, 3)), dtype="float64", name="w")
    with pytest.raises(ShapeError) as info:
        MIXED[op](x, w).spec  # noqa: B018 (inference runs when the spec is asked for)
    message = str(info.value)
    assert op in message and "float32" in message and "float64" in message


def test_batch_norm_rejects_mixed_dtypes_when_built() -> None:
    x = ex.placeholder((4, 3), "float32", name="x")
    gamma = Parameter(np.ones(3), dtype="float64", name="gamma")
    beta = Parameter(np.zeros(3), dtype="float32", name="beta")
    mean = Parameter(np.zeros(3), dtype="float32", trainable=False)
    var = Parameter(np.ones(3), dtype="float32", trainable=False)
    with pytest.raises(ShapeError) as info:
        ex.batch_norm(x, gamma, beta, mean, var).spec  # noqa: B018
    message = str(info.value)
    assert "batch_norm" in message and "gamma float64" in message and "x float32" in message


def test_compiled_models_check_a_moved_parameter_as_new_graphs_do(xp, other_xp) -> None:
    """``move_to`` on a parameter of a compiled model: predict, evaluate and train_step raise
    the documented BackendMismatchError naming the parameter, before anything changes (not the
    old backend's raw TypeError from inside a kernel); moved back, the model runs again."""
    import arraycore
    from nnlayers.layers import Affine, Sequential
    from nnlayers.models import Classifier
    from nnlayers.optim import Adam

    other = other_xp
    model = Classifier(Sequential([Affine(4, activation="relu"), Affine(3)], seed=0), (2,))
    model.optimizer = Adam(1e-2)
    x = np.random.default_rng(0).normal(size=(6, 2)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2])
    model.train_step((x, y))
    want = model.predict(x)
    moved = model.params[0]
    moved.move_to(other)
    others = [p.numpy() for p in model.params[1:]]
    for call in (
        lambda: model.predict(x),
        lambda: model.evaluate(x, y),
        lambda: model.train_step((x, y)),
    ):
        with pytest.raises(arraycore.BackendMismatchError) as info:
            call()
        message = str(info.value)
        assert repr(moved.name) in message and "move_to" in message and xp.name in message
    for p, value in zip(model.params[1:], others, strict=True):
        np.testing.assert_array_equal(p.numpy(), value)  # nothing trained
    moved.move_to(xp)
    np.testing.assert_allclose(model.predict(x), want, rtol=1e-6)


def test_a_parameter_used_by_graphs_of_two_backends_is_an_error(xp, other_xp) -> None:
    import arraycore

    w = Parameter(np.ones((2, 2)), name="w")
    first = nnlayers.compile(ex.sum(w * 2.0))
    first.forward()
    other = other_xp
    with arraycore.use(other.name), pytest.raises(arraycore.BackendMismatchError) as info:
        nnlayers.compile(ex.sum(w * 3.0))
    assert "Parameter 'w'" in str(info.value) and "move_to" in str(info.value)
    assert float(host(first.xp, first.forward())) == 8.0  # the first graph still runs
    w.move_to(other)  # the explicit move
    with arraycore.use(other.name):
        second = nnlayers.compile(ex.sum(w * 3.0))
        assert float(host(second.xp, second.forward())) == 12.0
