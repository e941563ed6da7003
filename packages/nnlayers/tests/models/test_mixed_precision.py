"""Mixed precision: float32 master weights, half-precision compute where safe, float32 losses,
dynamic loss scaling that skips overflowing steps, the digits CNN at float32's accuracy, and the
warning for half-precision parameters trained without a policy."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.errors import PrecisionWarning
from nnlayers.graph.topo import topological_order
from nnlayers.layers import Affine, LayerNorm, Sequential
from nnlayers.mixed_precision import Policy, as_policy, autocast
from nnlayers.models import Model
from nnlayers.optim import SGD


@pytest.fixture
def half(xp) -> str:
    if not xp.__array_namespace_info__().dtypes(kind="float16"):
        pytest.skip(f"the {xp.name} device has no float16")
    return "float16"


def _mlp_model(precision, optimizer=None) -> tuple[Model, Sequential]:
    net = Sequential([Affine(16, activation="relu"), LayerNorm(), Affine(3)], seed=0)
    x = ex.placeholder((None, 5), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    logits = net(x)
    loss = ex.softmax_cross_entropy(logits, y)
    model = Model(
        loss,
        inputs=[x, y],
        outputs=ex.softmax(logits),
        optimizer=optimizer or SGD(0.1),
        precision=precision,
    )
    return model, net


def _batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1)


def test_the_rewrite_computes_products_in_half_and_the_loss_in_float32(half) -> None:
    model, net = _mlp_model("mixed_float16")
    kinds = {}
    for node in topological_order([model.loss]):
        kinds.setdefault(node.kind, set()).add(node.dtype.name)
    assert kinds["matmul"] == {"float16"}
    assert kinds["layer_norm"] == {"float32"}
    assert kinds["softmax_cross_entropy"] == {"float32"}
    assert model.loss.dtype == np.float32
    assert all(p.dtype == np.float32 for p in net.params)  # master weights stay float32
    x, y = _batch()
    model.train_step((x, y))
    assert all(p.grad.dtype == np.float32 for p in net.params)
    assert model.predict(x).dtype == np.float32  # outputs come back as float32


def test_mixed_training_follows_float32_training(half) -> None:
    x, y = _batch()
    losses = {}
    for precision in (None, "mixed_float16"):
        model, _ = _mlp_model(precision)
        losses[precision] = [float(model.train_step((x, y))[0]) for _ in range(30)]
    full, mixed = np.array(losses[None]), np.array(losses["mixed_float16"])
    np.testing.assert_allclose(mixed, full, rtol=0.02, atol=0.01)
    assert mixed[-1] < 0.5 * mixed[0]


def test_an_overflowing_step_is_skipped_and_the_scale_backs_off(half) -> None:
    policy = Policy(initial_scale=2.0**40, growth_interval=3)
    model, net = _mlp_model(policy)
    scaler = model.loss_scaler
    x, y = _batch()
    before = [p.numpy().copy() for p in net.params]
    model.train_step((x, y))  # 2^40 times the gradient overflows float16: nothing changes
    assert scaler.skipped == 1 and scaler.scale == 2.0**39
    for b, p in zip(before, net.params, strict=True):
        np.testing.assert_array_equal(p.numpy(), b)
    for _ in range(40):
        model.train_step((x, y))
    assert scaler.scale < 2.0**30  # backed off until the gradients fit
    good = scaler.scale
    for _ in range(3):
        model.train_step((x, y))
    assert scaler.scale in (good * 2, good * 0.5)  # grew after three good steps (or overflowed)
    assert any(not np.array_equal(b, p.numpy()) for b, p in zip(before, net.params, strict=True))


def test_the_digits_cnn_in_mixed_float16_matches_float32_accuracy(half) -> None:
    from nnlayers.datasets import load_digits, train_test_split
    from nnlayers.demo import network
    from nnlayers.optim import Adam

    images, labels = load_digits()
    train, test = train_test_split(images, labels, test_fraction=0.2, seed=0)
    scores = {}
    for precision in (None, "mixed_float16"):
        model = nnlayers.Classifier(network(0), (1, 8, 8), seed=0, precision=precision)
        feed = nnlayers.Feed(train.inputs, train.targets, batch_size=32, seed=0)
        nnlayers.fit(model, feed, epochs=4, optimizer=Adam(3e-3), progress=False)
        scores[precision] = model.evaluate(test.inputs, test.targets)["accuracy"]
    assert scores[None] > 0.9
    assert abs(scores["mixed_float16"] - scores[None]) <= 0.01


def test_half_parameters_without_a_policy_warn(half) -> None:
    x = ex.placeholder((None, 4), "float16", name="x")
    loss = ex.sum(Affine(2, seed=0)(x))
    with pytest.warns(PrecisionWarning, match="unscaled.*precision='mixed_float16'"):
        Model(loss, inputs=[x])


def test_policies_and_their_errors(xp) -> None:
    assert as_policy(None) is None and as_policy("float32") is None
    assert as_policy("mixed_float16").compute == "float16"
    assert as_policy("bfloat16").loss_scale is None  # bfloat16 needs no loss scaling
    with pytest.raises(ValueError, match="precision must be None, 'float32', 'mixed_float16'"):
        as_policy("float8")
    with pytest.raises(ValueError, match="compute must be 'float16' or 'bfloat16'"):
        Policy("float64")
    if "bfloat16" not in xp.__array_namespace_info__().dtypes():
        with pytest.raises(TypeError, match=r"needs bfloat16, which the .* backend's device"):
            _mlp_model("mixed_bfloat16")


def test_autocast_leaves_float32_graphs_of_other_kinds_alone() -> None:
    x = ex.placeholder((None, 3), name="x")
    y = ex.sum(ex.exp(x) * 2.0)
    (same,) = autocast([y], "float16")
    assert same is y  # nothing to run in half precision: the very same nodes


def test_a_checkpoint_resumes_the_loss_scale(half, tmp_path) -> None:
    policy = Policy(initial_scale=2.0**40, growth_interval=5)
    model, _ = _mlp_model(policy)
    x, y = _batch()
    for _ in range(4):
        model.train_step((x, y))
    state = (model.loss_scaler.scale, model.loss_scaler.good_steps, model.loss_scaler.skipped)
    assert state[2] > 0
    path = model.save(tmp_path / "mixed.safetensors")
    fresh, _ = _mlp_model(policy)
    assert fresh.loss_scaler.scale == 2.0**40
    fresh.restore(path)
    got = (fresh.loss_scaler.scale, fresh.loss_scaler.good_steps, fresh.loss_scaler.skipped)
    assert got == state
