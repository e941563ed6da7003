"""Model: one compiled graph, gradients, evaluate, predict, unique names, state round trips."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, BatchNorm, Sequential
from nnlayers.models import Model
from nnlayers.optim import SGD


def _regression(seed=0, **options):
    x = ex.placeholder((None, 3), name="x")
    y = ex.placeholder((None, 1), name="y")
    net = Sequential([Affine(4, activation="tanh"), BatchNorm(), Affine(1)], seed=seed)
    prediction = net(x)
    loss = ex.squared_error(prediction, y)
    model = Model(
        loss,
        inputs=[x, y],
        outputs=prediction,
        metrics={"mae": ex.mean(ex.abs(prediction - y))},
        **options,
    )
    return model, net


def _data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    return x, (x @ np.array([[1.0], [-2.0], [0.5]])).astype(np.float32)


def test_params_have_unique_names_and_shared_ones_are_listed_once() -> None:
    shared = Affine(3, seed=0)
    x = ex.placeholder((None, 3), name="x")
    h = Affine(3, seed=1)(shared(shared(x)))
    model = Model(ex.sum(h), inputs=[x])
    assert [p.name for p in model.params] == [
        "affine/weight", "affine/bias", "affine_1/weight", "affine_1/bias",
    ]  # fmt: skip
    assert model.params[0] is shared.weight
    again = Model(ex.sum(h), inputs=[x])  # building again gives the same names
    assert [p.name for p in again.params] == [p.name for p in model.params]


def test_gradients_evaluate_and_predict() -> None:
    model, _ = _regression()
    x, y = _data()
    grads = model.gradients(x, y)
    assert list(grads) == model.params
    assert all(p.grad is grads[p] for p in model.params)
    assert [p.name for p in model.buffers] == ["batch_norm/running_mean", "batch_norm/running_var"]
    model.eval()
    whole = model.evaluate(x, y, batch_size=100)
    pieces = model.evaluate(x, y, batch_size=7)  # 7 + 7 + 6, weighted by batch size
    assert whole == pytest.approx(pieces, rel=1e-5)
    assert set(whole) == {"loss", "mae"}
    assert model.graph.training is False
    model.train()
    model.evaluate((x, y))  # a tuple of arrays works too, and the phase comes back
    assert model.graph.training is True
    out = model.predict(x, batch_size=6)
    assert out.shape == (20, 1) and isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, model.predict(x), rtol=1e-6)


def test_train_step_updates_in_place_and_returns_device_scalars() -> None:
    model, _ = _regression(optimizer=SGD(0.05))
    x, y = _data()
    stored = [p.value for p in model.params]
    first = model.train_step((x, y))
    assert len(first) == 2 and first[0].shape == ()
    for _ in range(30):
        last = model.train_step((x, y))
    assert all(p.value is v for p, v in zip(model.params, stored))
    assert float(model.xp.to_numpy(last[0])) < float(model.xp.to_numpy(first[0]))


def test_state_dict_round_trip_and_a_mismatch_changes_nothing() -> None:
    model, _ = _regression(seed=0)
    other, _ = _regression(seed=1)
    other.load_state_dict(model.state_dict())
    for p, q in zip(model.params + model.buffers, other.params + other.buffers):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    before = {k: v.copy() for k, v in other.state_dict().items()}
    bad = dict(model.state_dict())
    bad["affine/weight"] = np.zeros((2, 2), np.float32)
    del bad["affine_1/bias"]
    bad["extra"] = np.zeros(1)
    with pytest.raises(
        ValueError,
        match=r"'affine/weight' has shape \(2, 2\).*missing 'affine_1/bias'.*unexpected 'extra'",
    ):
        other.load_state_dict(bad)
    for name, value in other.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_model_errors_and_summary() -> None:
    x = ex.placeholder((None, 3), name="x")
    y = ex.placeholder((None, 1), name="y")
    p = Affine(1, seed=0)(x)
    with pytest.raises(nnlayers.GraphError, match="missing from inputs: placeholder 'y'"):
        Model(ex.squared_error(p, y), inputs=[x])
    with pytest.raises(TypeError, match="must be placeholders"):
        Model(ex.sum(p), inputs=[p])  # type: ignore[list-item]
    model = Model(ex.sum(p), inputs=[x])
    with pytest.raises(nnlayers.GraphError, match="no outputs"):
        model.predict(np.ones((1, 3)))
    text = str(nnlayers.summary(model, ops=True))
    assert "affine/weight (matmul)" in text and "Trainable params: 4 " in text
    assert "Model: 2 parameters" in repr(model)


def test_start_epoch_makes_dropout_masks_depend_on_the_epoch_only() -> None:
    x = ex.placeholder((None, 50), name="x")
    h = nnlayers.Dropout(0.5)(x)
    model = Model(ex.sum(h * h), inputs=[x], outputs=h)
    ones = np.ones((2, 50), np.float32)

    def masks(epoch):
        model.start_epoch(epoch)
        return [model.xp.to_numpy(model.test_step((ones,))[0]) for _ in range(2)]

    a, b = masks(3), masks(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(masks(4), a)


def test_a_train_step_holds_one_set_of_gradients() -> None:
    """The last step's gradients are dropped before the next forward pass (PyTorch's
    ``zero_grad()``): a step's peak memory does not hold the old and the new ones together."""
    import tracemalloc

    x = ex.placeholder((None, 512), name="x")
    y = ex.placeholder((None, 512), name="y")
    net = Sequential([Affine(512)], seed=0)
    model = Model(ex.squared_error(net(x), y), inputs=[x, y], optimizer=SGD(0.01, momentum=0.9))
    if model.xp.name != "numpy":
        pytest.skip(f"tracemalloc sees host memory only, not {model.xp.name}'s device memory")
    batch = (np.ones((2, 512), np.float32), np.zeros((2, 512), np.float32))
    model.train_step(batch)
    weight = net.params[0]
    grads = sum(int(np.asarray(p.grad).nbytes) for p in model.params)
    assert weight.grad is not None and grads > 2**20
    tracemalloc.start()
    try:
        model.train_step(batch)  # its gradients are traced
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        model.train_step(batch)
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the new gradients replace the old: nothing near a second set at any point of the step
    assert after - before < grads // 4, (before, after)
    assert peak - before < grads // 4, (before, peak, grads)
    assert model.graph.gradients[weight] is weight.grad
    model.graph.clear_gradients()
    assert weight.grad is None and model.graph.gradients == {}
