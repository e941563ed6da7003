"""Captured and replayed steps (nnlayers.models.capture) on a backend that captures for real.

They run where the active backend captures work (``capture_support()`` is None: OpenCL's launch
lists, CUDA's graphs) and skip, with the reason, elsewhere (NumPy, whose steps run eagerly).
Every check compares a captured model against the same model run eagerly from the same weights:
losses step by step, weights, optimiser state, the host counters.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import arraycore
import nnlayers.expr as ex
from nnlayers.layers import Affine, BatchNorm, Dropout, Sequential
from nnlayers.models import Model
from nnlayers.models import capture as capture_module
from nnlayers.optim import SGD, Adam
from nnlayers.optim.schedules import CosineDecay, Schedule, Warmup


@pytest.fixture(scope="module", autouse=True)
def _captures(xp: Any) -> None:
    reason = xp.__array_namespace_info__().capture_support()
    if reason is not None:
        pytest.skip(f"the {xp.name} backend does not capture: {reason}")


def _model(optimizer: Any = None, *, dropout: bool = True, norm: bool = False) -> Model:
    """A small classifier; ``optimizer`` a function making its optimiser (default: Adam on a
    warm-up and a cosine)."""
    layers: list[Any] = [Affine(24, activation="relu")]
    if norm:
        layers.append(BatchNorm())
    if dropout:
        layers.append(Dropout(0.3))
    layers.append(Affine(5))
    net = Sequential(layers, seed=3)
    x = ex.placeholder((None, 12), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    opt = optimizer() if optimizer else Adam(Warmup(CosineDecay(0.01, total_steps=30), 3))
    model = Model(ex.softmax_cross_entropy(net(x), y), inputs=[x, y], optimizer=opt)
    model.net = net  # type: ignore[attr-defined]
    return model


def _batches(count: int, rows: int = 8, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((rows, 12), dtype=np.float32), rng.integers(0, 5, rows))
        for _ in range(count)
    ]


def _train(model: Model, batches: list[Any], xp: Any) -> list[float]:
    return [float(xp.to_numpy(model.train_step(b)[0])) for b in batches]


def _weights(model: Model, xp: Any) -> list[np.ndarray]:
    return [xp.to_numpy(p.value) for p in model._everything]


def _pair(**options: Any) -> tuple[Model, Model]:
    eager, captured = _model(**options), _model(**options)
    eager.capture = False
    return eager, captured


def test_replayed_steps_train_as_eager_steps(xp: Any) -> None:
    """Dropout masks, a warm-up + cosine schedule, Adam's bias corrections, batch-norm
    statistics: 20 steps on new batches give the eager model's losses and weights."""
    eager, captured = _pair(norm=True)
    batches = _batches(20)
    expected = _train(eager, batches, xp)
    got = _train(captured, batches, xp)
    assert "captured" in captured.capture_status, captured.capture_status
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    for a, b in zip(_weights(captured, xp), _weights(eager, xp), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert captured.optimizer.step_count == eager.optimizer.step_count == 20
    assert captured.optimizer.learning_rate == eager.optimizer.learning_rate
    state = {k: xp.to_numpy(v) for k, v in captured.optimizer.state_dict()["arrays"].items()}
    for k, v in eager.optimizer.state_dict()["arrays"].items():
        np.testing.assert_allclose(state[k], xp.to_numpy(v), rtol=1e-5, atol=1e-8, err_msg=k)


def test_each_replay_draws_new_dropout_masks(xp: Any) -> None:
    """The same batch, replayed: the loss changes with the masks (a frozen mask would repeat
    it), and equals the eager model's at every step."""
    eager, captured = _pair(optimizer=lambda: SGD(0.0))
    batch = _batches(1)[0]
    expected = _train(eager, [batch] * 8, xp)
    got = _train(captured, [batch] * 8, xp)
    assert len(set(got[4:])) == 4, got
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_new_shape_phase_or_freeze_is_not_replayed_stale(xp: Any) -> None:
    """A short last batch runs eagerly; evaluation between epochs is its own step; freezing a
    layer recaptures: the captured model keeps training as the eager one does."""
    eager, captured = _pair()
    epoch = [*_batches(6), *_batches(1, rows=3, seed=9)]
    for model in (eager, captured):
        model.history = [_train(model, epoch, xp) for _ in range(2)]
        model.history.append([float(model.evaluate(*_batches(1, seed=4)[0])["loss"])])
        model.net.layers[0].freeze()
        model.history.append(_train(model, epoch, xp))
    for got, expected in zip(captured.history, eager.history, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_loading_state_recaptures(xp: Any) -> None:
    """After load_state_dict (weights and optimiser), replays start from the loaded state."""
    eager, captured = _pair()
    batches = _batches(8)
    _train(eager, batches, xp)
    _train(captured, batches, xp)
    saved = eager.state_dict()
    saved_opt = eager.optimizer.state_dict()
    saved_opt = {
        **saved_opt,
        "arrays": {k: xp.to_numpy(v) for k, v in saved_opt["arrays"].items()},
    }
    for model in (eager, captured):
        model.load_state_dict(saved)
        model.optimizer.load_state_dict(saved_opt)
    more = _batches(8, seed=2)
    np.testing.assert_allclose(_train(captured, more, xp), _train(eager, more, xp), rtol=1e-5)


def test_a_changed_learning_rate_is_used(xp: Any) -> None:
    """A new learning rate (what ReduceLROnPlateau does) after the step was captured."""
    eager, captured = _pair(optimizer=lambda: SGD(0.05, momentum=0.9))
    batches = _batches(12)
    for model in (eager, captured):
        model.history = _train(model, batches[:6], xp)
        model.optimizer.lr = 0.01
        model.history += _train(model, batches[6:], xp)
    np.testing.assert_allclose(captured.history, eager.history, rtol=1e-5)


class _Uploading(Schedule):
    """A schedule whose device form copies a host value each step: not capturable."""

    def value(self, step: int) -> float:
        return 0.01

    def on_device(self, xp: Any, step: Any) -> Any:
        return xp.multiply(step, 0.0) + xp.asarray(np.asarray(0.01, dtype=step.dtype))


def test_a_step_that_cannot_be_captured_runs_eagerly_and_says_why(xp: Any) -> None:
    """The capture fails inside the step (a host copy): one warning with the reason, the
    host counters as if nothing happened, and the steps train as eager ones."""
    eager, captured = _pair(optimizer=lambda: SGD(_Uploading()))
    batches = _batches(8)
    expected = _train(eager, batches, xp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _train(captured, batches, xp)
    found = [
        w
        for w in caught
        if issubclass(w.category, arraycore.PerformanceWarning) and "numba" not in str(w.message)
    ]
    assert len(found) == 1 and "capture failed" in str(found[0].message), found
    assert "capture failed" in captured.capture_status
    assert captured.optimizer.step_count == 8
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_blockers_are_named(xp: Any, monkeypatch: Any) -> None:
    """What keeps a model eager is in its status: opting out, a callable rate, a checked
    graph, warm-up."""
    model = _model(optimizer=lambda: SGD(lambda step: 0.01))
    _train(model, _batches(5), xp)
    assert "callable" in model.capture_status, model.capture_status
    off = _model()
    off.capture = False
    _train(off, _batches(5), xp)
    assert "capture is off" in off.capture_status
    monkeypatch.setenv(capture_module.ENV_CAPTURE, "0")
    assert not _model().capture
    monkeypatch.setenv(capture_module.ENV_CAPTURE, "maybe")
    with pytest.raises(ValueError, match="NNLAYERS_CAPTURE"):
        _model()
    monkeypatch.delenv(capture_module.ENV_CAPTURE)
    fresh = _model()
    _train(fresh, _batches(2), xp)
    assert "warming up" in fresh.capture_status


def test_device_fed_labels_stay_eager_while_checked(xp: Any) -> None:
    """Labels fed as device arrays are range-checked on the device each step (a host read):
    such steps stay eager and say so; under arraycore.checks(False) they are captured."""
    model = _model()
    batches = [(xp.asarray(x), xp.asarray(y)) for x, y in _batches(6)]
    for b in batches:
        model.train_step(b)
    assert "device arrays of class labels" in model.capture_status
    with arraycore.checks(False):
        for b in batches:
            model.train_step(b)
    assert "captured" in model.capture_status, model.capture_status


def test_a_data_parallel_model_stays_eager_and_weights_its_all_reduce(xp: Any) -> None:
    """Data-parallel training all-reduces with a wait per call, so its steps are not captured:
    they run eagerly, say why, and still hand the all-reduce the batch's rows."""

    class OneRank:
        world_size, rank = 1, 0

        def __init__(self) -> None:
            self.rows: list[int] = []

        def reduce(self, params: Any, rows: int) -> None:
            self.rows.append(rows)

    model = _model()
    model.data_parallel = OneRank()
    _train(model, _batches(6, rows=7), xp)
    assert model.data_parallel.rows == [7] * 6
    assert "data-parallel" in model.capture_status
