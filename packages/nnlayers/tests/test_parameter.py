"""Parameter: values, gradients, names, initialisers, per-parameter settings, sharing."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import nnlayers
import nnlayers.demo
import nnlayers.expr as ex
from nnlayers import Parameter, init


def test_parameter_holds_a_copy_and_receives_a_gradient() -> None:
    host = np.ones((2, 3))
    W = Parameter(host, name="W")
    host[0, 0] = 5.0
    assert W.numpy()[0, 0] == 1.0 and W.dtype.name == "float32" and W.size == 6
    assert (W.weight_decay, W.lr_multiplier, W.trainable, W.grad) == (None, 1.0, True, None)
    x = ex.placeholder((None, 2), name="x")
    graph = nnlayers.compile(ex.sum(x @ W))
    graph.forward({x: np.ones((4, 2))})
    graph.backward()
    np.testing.assert_allclose(graph.xp.to_numpy(W.grad), np.full((2, 3), 4.0))
    assert "Parameter 'W' (2, 3) float32" in repr(W)


def test_shared_parameter_sums_its_gradients() -> None:
    W = Parameter(np.eye(2), name="W")
    x = ex.placeholder((None, 2), name="x")
    graph = nnlayers.compile(ex.sum(x @ W) + ex.sum((x * 2.0) @ W))
    assert graph.wrt == [W]
    graph.forward({x: np.ones((1, 2))})
    graph.backward()
    np.testing.assert_allclose(graph.xp.to_numpy(W.grad), np.full((2, 2), 3.0))


def test_assign_writes_in_place_on_the_backend() -> None:
    W = Parameter(np.zeros((2, 2)), name="W")
    x = ex.placeholder((None, 2), name="x")
    graph = nnlayers.compile(ex.sum(x @ W))
    stored = W.value
    W.assign(np.ones((2, 2)))
    assert W.value is stored
    assert float(graph.xp.to_numpy(graph.forward({x: np.ones((1, 2))}))) == 4.0
    with pytest.raises(ValueError, match=r"cannot assign a value of shape \(3,\)"):
        W.assign(np.ones(3))


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        Parameter(np.zeros(2), name="b", weight_decay=-1.0)
    with pytest.raises(ValueError, match="lr_multiplier must be >= 0"):
        Parameter(np.zeros(2), name="b", lr_multiplier=-0.5)
    p = Parameter(np.zeros(2), weight_decay=0.0, lr_multiplier=0.1)
    assert (p.weight_decay, p.lr_multiplier) == (0.0, 0.1)


@pytest.mark.parametrize(
    ("name", "std"),
    [
        ("glorot_uniform", math.sqrt(2 / (400 + 300))),
        ("glorot_normal", math.sqrt(2 / (400 + 300))),
        ("xavier_uniform", math.sqrt(2 / (400 + 300))),
        ("he_normal", math.sqrt(2 / 400)),
        ("he_uniform", math.sqrt(2 / 400)),
        ("kaiming_normal", math.sqrt(2 / 400)),
        ("normal", 0.05),
        ("uniform", 0.1 / math.sqrt(12)),
    ],
)
def test_initialisers_have_their_variance(name, std) -> None:
    W = Parameter.create((400, 300), name, seed=0)
    values = W.numpy()
    assert values.mean() == pytest.approx(0.0, abs=0.1 * std)
    assert values.std() == pytest.approx(std, rel=0.02)


def test_uniform_bounds_and_constants() -> None:
    limit = math.sqrt(6 / (50 + 20))
    w = init.glorot_uniform()((50, 20), np.random.default_rng(0))
    assert -limit <= w.min() and w.max() < limit and w.max() > 0.9 * limit
    np.testing.assert_array_equal(Parameter.create(3, "ones").numpy(), 1.0)
    np.testing.assert_array_equal(Parameter.create((2,), 0.5).numpy(), 0.5)
    np.testing.assert_array_equal(init.zeros()((2, 2)), 0.0)
    assert init.constant(2.0)((1,), dtype="float64").dtype.name == "float64"


def test_conv_fans_and_explicit_fans() -> None:
    assert init.fans((16, 3, 5, 5)) == (75, 400)
    assert init.fans((7,)) == (7, 7) and init.fans(()) == (1, 1)
    w = Parameter.create((32, 8, 3, 3), "he_normal", seed=1).numpy()
    assert w.std() == pytest.approx(math.sqrt(2 / 72), rel=0.05)
    w = Parameter.create((400, 300), "he_normal", seed=1, fans=(100, 1)).numpy()
    assert w.std() == pytest.approx(math.sqrt(2 / 100), rel=0.02)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 2, 2)])
def test_orthogonal_rows_or_columns(shape) -> None:
    w = Parameter.create(shape, init.orthogonal(gain=2.0), seed=0).numpy().astype(np.float64)
    m = w.reshape(shape[0], -1)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="at least 2 axes"):
        Parameter.create((3,), "orthogonal")


@pytest.mark.parametrize("make", ["orthogonal", "transposed", "fortran"])
def test_values_are_stored_in_c_order(make) -> None:
    # the optimiser's state and scratch are C-ordered: a Fortran-ordered value made each SGD
    # update of an LSTM's recurrent weight stride through memory (0.6 ms a step instead of 35 us)
    if make == "orthogonal":  # a wide one is the transpose of a QR factor
        p = Parameter.create((128, 512), "orthogonal", seed=0)
        assert Parameter.create((512, 128), "orthogonal", seed=0).value.flags.c_contiguous
    elif make == "transposed":
        p = Parameter(np.arange(15.0).reshape(3, 5).T)
    else:
        p = Parameter(np.asfortranarray(np.arange(12.0).reshape(3, 4)))
    assert p.value.flags.c_contiguous
    if make != "orthogonal":
        np.testing.assert_array_equal(p.value, p.numpy())
    lstm = nnlayers.layers.LSTM(16, seed=0)
    lstm(ex.placeholder((None, 5, 8)))
    assert lstm.params and all(q.value.flags.c_contiguous for q in lstm.params)


def test_seeds_and_the_seed_sequence() -> None:
    a = Parameter.create((3, 3), "normal", seed=4).numpy()
    np.testing.assert_array_equal(a, Parameter.create((3, 3), "normal", seed=4).numpy())
    nnlayers.seed(1)
    first = [Parameter.create((2,), "normal").numpy() for _ in range(2)]
    nnlayers.seed(1)
    again = [Parameter.create((2,), "normal").numpy() for _ in range(2)]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[0], first[1])
    with pytest.raises(ValueError, match="non-negative int"):
        nnlayers.seed(-1)


def test_custom_and_unknown_initialisers() -> None:
    p = Parameter.create((2, 2), lambda shape, rng, dtype: np.full(shape, 3.0, dtype), seed=0)
    np.testing.assert_array_equal(p.numpy(), 3.0)
    with pytest.raises(ValueError, match="unknown initialiser 'he'"):
        Parameter.create((2, 2), "he")
    with pytest.raises(ValueError, match="gave shape"):
        Parameter.create((2, 2), lambda shape, rng, dtype: np.zeros(3, dtype))
    assert "fan_avg" in repr(init.get("xavier_normal"))


@pytest.mark.parametrize("module", [nnlayers, nnlayers.parameter, nnlayers.init, nnlayers.demo])
def test_docstring_examples(module) -> None:
    assert doctest.testmod(module).failed == 0
