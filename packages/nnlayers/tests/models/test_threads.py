"""Thread safety, with real threads: ``evaluate``, ``test_step`` and ``predict`` of one model
may be called from many threads at once and give each thread exactly what it gives alone, in
the eval phase, leaving the model's phase as it was; training steps of separate models in
separate threads (mixed precision included) run as alone and leave the process's warning
filters untouched. (Training one model from several threads at once is not supported: see
docs/training.md.)"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, Dropout, LayerNorm, Sequential
from nnlayers.models import Classifier, Model
from nnlayers.optim import SGD

THREADS = 8


def run_in_threads(work: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """``work(i)`` in ``n`` threads started together; the results in order, or the first
    exception raised again here."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = work(i)
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def dropout_classifier() -> Classifier:
    network = Sequential(
        [Affine(16, activation="relu"), Dropout(0.5), Affine(3)], seed=0
    )  # dropout: a step run in the training phase by mistake gives other numbers
    return Classifier(network, (5,), seed=0)


def thread_data(i: int) -> tuple[np.ndarray, np.ndarray]:
    """Each thread its own data, of its own size (a shape mix-up between threads fails)."""
    rng = np.random.default_rng(i)
    n = 9 + 5 * i
    return rng.normal(size=(n, 5)).astype(np.float32), rng.integers(0, 3, n)


def test_evaluate_from_many_threads_gives_each_what_it_gives_alone(xp) -> None:
    model = dropout_classifier()
    model.train()
    alone = [model.evaluate(*thread_data(i), batch_size=4) for i in range(THREADS)]
    assert model.graph.training
    for _ in range(3):
        got = run_in_threads(lambda i: model.evaluate(*thread_data(i), batch_size=4))
        for mine, want in zip(got, alone, strict=True):
            assert mine == pytest.approx(want, rel=1e-6, abs=1e-7)
    assert model.graph.training  # the phase it had before the evaluations


def test_test_steps_and_predictions_in_threads_pair_each_threads_data(xp) -> None:
    model = dropout_classifier()
    model.eval()
    data = [thread_data(i) for i in range(THREADS)]
    steps_alone = [[float(xp.to_numpy(v)) for v in model.test_step(d)] for d in data]
    predicted_alone = [model.predict(d[0]) for d in data]

    def work(i: int) -> tuple[list[float], np.ndarray]:
        steps = [float(xp.to_numpy(v)) for v in model.test_step(data[i])]
        return steps, model.predict(data[i][0], batch_size=3)

    for _ in range(3):
        for (steps, predicted), want_steps, want_predicted in zip(
            run_in_threads(work), steps_alone, predicted_alone, strict=True
        ):
            assert steps == pytest.approx(want_steps, rel=1e-6, abs=1e-7)
            np.testing.assert_allclose(predicted, want_predicted, rtol=1e-6, atol=1e-7)


def _mixed_model() -> Model:
    net = Sequential([Affine(16, activation="relu"), LayerNorm(), Affine(3)], seed=0)
    x = ex.placeholder((None, 5), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    logits = net(x)
    return Model(
        ex.softmax_cross_entropy(logits, y),
        inputs=[x, y],
        outputs=ex.softmax(logits),
        optimizer=SGD(0.1),
        precision="mixed_float16",
    )


def test_mixed_precision_models_training_in_threads_leave_the_warning_filters_alone(xp) -> None:
    if not xp.__array_namespace_info__().dtypes(kind="float16"):
        pytest.skip(f"the {xp.name} device has no float16")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1)
    alone = _mixed_model()
    for _ in range(20):
        alone.train_step((x, y))
    want = alone.state_dict()
    filters = list(warnings.filters)
    models = [_mixed_model() for _ in range(2)]

    def train(i: int) -> None:
        for _ in range(20):
            models[i].train_step((x, y))

    run_in_threads(train, 2)
    assert list(warnings.filters) == filters
    for model in models:
        for name, value in model.state_dict().items():
            np.testing.assert_array_equal(value, want[name], err_msg=name)


def test_fit_of_two_models_in_two_threads_trains_each_as_alone(xp) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 5)).astype(np.float32)
    y = rng.integers(0, 3, 40)

    def trained() -> dict[str, np.ndarray]:
        model = dropout_classifier()
        nnlayers.fit(
            model, nnlayers.Feed(x, y, batch_size=8), epochs=2, optimizer=SGD(0.1), progress=False
        )
        return model.state_dict()

    want = trained()
    for got in run_in_threads(lambda i: trained(), 2):
        for name, value in got.items():
            np.testing.assert_array_equal(value, want[name], err_msg=name)
