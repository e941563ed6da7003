"""Inputs that would make training meaningless are refused before any parameter changes, with an
error naming the argument, the offending values and what was expected; and empty inputs work."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Feed
from nnlayers.errors import FeedError, GraphError
from nnlayers.layers import Affine, BatchNorm, Sequential
from nnlayers.models import Classifier
from nnlayers.ops.loss.cross_entropy import SquashedLogitsWarning
from nnlayers.optim import SGD
from nnlayers.train import fit

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 0, 1, 2, 0, 1])


def classifier(optimizer=None) -> Classifier:
    network = Sequential([Affine(6, activation="tanh"), Affine(3)], seed=0)
    return Classifier(network, (4,), optimizer=optimizer, seed=0)


def weights(model) -> list[np.ndarray]:
    return [p.numpy().copy() for p in model.params]


def assert_unchanged(model, before) -> None:
    for p, w in zip(model.params, before, strict=True):
        np.testing.assert_array_equal(p.numpy(), w)


@pytest.mark.parametrize(("bad", "shown"), [(3, "3 at (5,)"), (-1, "-1 at (5,)")])
def test_class_labels_out_of_range_are_refused(bad: int, shown: str) -> None:
    model = classifier(SGD(0.1))
    before = weights(model)
    labels = Y.copy()
    labels[5] = bad
    with pytest.raises(FeedError) as info:
        model.train_step((X, labels))
    message = str(info.value)
    assert "'labels'" in message and "[0, 3)" in message and shown in message
    assert "softmax_cross_entropy" in message
    assert_unchanged(model, before)
    with pytest.raises(FeedError):
        model.evaluate(X, labels)


def test_fit_checks_an_in_memory_feed_before_the_first_step() -> None:
    """On every backend: the feed's host labels are checked before anything moves."""
    model = classifier(SGD(0.1))
    before = weights(model)
    labels = Y.copy()
    labels[-1] = 7
    with pytest.raises(FeedError, match=r"\[0, 3\); got 7 at \(7,\)"):
        fit(model, Feed(X, labels, batch_size=4, shuffle=False), epochs=1, progress=False)
    assert_unchanged(model, before)
    assert model.epoch == 0


def test_float_labels_are_refused_not_truncated() -> None:
    model = classifier(SGD(0.1))
    before = weights(model)
    with pytest.raises(FeedError, match=r"'labels' holds integers .* got float64 values"):
        model.train_step((X, Y + 0.7))
    assert_unchanged(model, before)


def test_one_hot_indices_out_of_range_are_refused() -> None:
    idx = ex.placeholder((None,), "int64", name="idx")
    graph = nnlayers.compile(ex.sum(ex.one_hot(idx, 4)), wrt=[])
    with pytest.raises(FeedError, match=r"'idx' holds class labels for one_hot.*\[0, 4\); got 4"):
        graph.forward({idx: np.array([0, 4])})


def test_feeding_a_placeholder_of_another_graph_is_an_error() -> None:
    x = ex.placeholder((None, 2), name="x")
    other = ex.placeholder((None, 2), name="other")
    graph = nnlayers.compile(ex.sum(x), wrt=[])
    with pytest.raises(FeedError, match=r"placeholder 'other' is not a placeholder of this graph"):
        graph.forward({x: np.ones((1, 2)), other: np.ones((1, 2))})


def test_feeding_one_placeholder_twice_is_an_error() -> None:
    x = ex.placeholder((None, 2), name="x")
    graph = nnlayers.compile(ex.sum(x), wrt=[])
    with pytest.raises(FeedError, match=r"placeholder 'x' is given twice"):
        graph.forward({x: np.ones((1, 2)), "x": np.zeros((1, 2))})


def test_a_batch_with_more_arrays_than_inputs_is_an_error() -> None:
    model = classifier(SGD(0.1))
    before = weights(model)
    with pytest.raises(ValueError, match=r"a batch of 3 arrays for 2 inputs"):
        model.train_step((X, Y, Y))
    assert_unchanged(model, before)


def test_train_step_without_an_optimizer_says_so() -> None:
    model = classifier()
    with pytest.raises(GraphError, match=r"train_step: Classifier has no optimizer"):
        model.train_step((X, Y))


def test_batch_norm_refuses_one_value_per_channel_in_training() -> None:
    network = Sequential([Affine(6), BatchNorm(), Affine(3)], seed=0)
    model = Classifier(network, (4,), optimizer=SGD(0.1), seed=0)
    before = [b.numpy().copy() for b in model.buffers]
    with pytest.raises(ValueError, match=r"batch_norm: a batch of shape \(1, 6\) has 1 value"):
        model.train_step((X[:1], Y[:1]))
    for b, w in zip(model.buffers, before, strict=True):
        np.testing.assert_array_equal(b.numpy(), w)
    assert model.predict(X[:1]).shape == (1,)  # the eval phase is fine with one example


def test_softmax_before_softmax_cross_entropy_warns_naming_the_layer() -> None:
    network = Sequential([Affine(6, activation="tanh"), Affine(3, activation="softmax")], seed=0)
    with pytest.warns(SquashedLogitsWarning, match=r"layer 'affine_1'|layer 'affine'"):
        Classifier(network, (4,))


def test_predict_and_evaluate_on_no_examples() -> None:
    model = classifier()
    empty = np.zeros((0, 4), dtype=np.float32)
    assert model.predict(empty).shape == (0,)
    assert model.predict_proba(empty).shape == (0, 3)
    scores = model.evaluate(empty, np.zeros(0, dtype=np.int64))
    assert set(scores) == {"loss", "accuracy"} and all(np.isnan(v) for v in scores.values())


def nan_feed(batch_with_nan: int) -> Feed:
    x = np.tile(X, (2, 1))
    y = np.tile(Y, 2)
    x[4 * (batch_with_nan - 1) + 1, 0] = np.nan
    return Feed(x, y, batch_size=4, shuffle=False)


def test_fit_stops_at_the_step_whose_loss_is_nan_and_keeps_the_checkpoint(tmp_path) -> None:
    from nnlayers.errors import NonFiniteError
    from nnlayers.train import Checkpoint

    model = classifier(SGD(0.1))
    path = tmp_path / "model.safetensors"
    fit(model, Feed(X, Y, batch_size=4), epochs=1, callbacks=[Checkpoint(path)], progress=False)
    saved = path.read_bytes()
    with pytest.raises(NonFiniteError, match=r"loss became nan at epoch 2, step 3;"):
        fit(model, nan_feed(3), epochs=2, callbacks=[Checkpoint(path)], progress=False)
    assert path.read_bytes() == saved
    assert model.epoch == 1 and len(model.history) == 1


def test_fit_trains_on_through_nan_when_asked() -> None:
    model = classifier(SGD(0.1))
    history = fit(model, nan_feed(2), epochs=1, progress=False, stop_on_nonfinite=False)
    assert np.isnan(history.last["loss"])


@pytest.mark.parametrize("batch_norm", [False, True], ids=["stateless", "batch-norm"])
def test_fed_labels_are_checked_once_a_step_and_named_either_way(monkeypatch, batch_norm) -> None:
    """The graph checks fed labels itself, or, where the reading op's arraycore function checks
    them on the host and nothing changes before it (no running statistics), leaves them to it:
    one check a step, and a bad label is refused naming the placeholder, everything as it was."""
    import arraycore
    from nnlayers.graph import graph as graph_module
    from nnlayers.models import Model
    from nnlayers.parameter import Parameter

    x = ex.placeholder((None, 4), name="x")
    labels = ex.placeholder((None,), "int64", name="labels")
    middle = [BatchNorm()] if batch_norm else []
    net = Sequential([Affine(6, activation="tanh"), *middle, Affine(3)], seed=0)
    loss = ex.softmax_cross_entropy(net(x), labels)
    model = Model(loss, inputs=[x, labels], optimizer=SGD(0.1))
    calls = []
    real = graph_module.check_labels

    def counted(node, *args):
        calls.append(node.name)
        return real(node, *args)

    monkeypatch.setattr(graph_module, "check_labels", counted)
    model.train_step((X, Y))
    deferred = model.xp.name == "numpy" and not batch_norm  # labels on the host, no state
    assert calls == ([] if deferred else ["labels"])
    calls.clear()
    with arraycore.checks(False, only="labels"):  # arraycore does not check: the graph does
        model.train_step((X, Y))
    assert calls == ["labels"]
    state = [n for n in model.graph.analysis.nodes if isinstance(n, Parameter)]
    assert len(state) == (8 if batch_norm else 4)  # running statistics included
    before = [p.numpy().copy() for p in state]
    bad = Y.copy()
    bad[2] = 3
    expected = r"'labels' holds class labels for softmax_cross_entropy.*\[0, 3\); got 3 at \(2,\)"
    with pytest.raises(FeedError, match=expected) as info:
        model.train_step((X, bad))
    if deferred:  # arraycore's error, naming the op, is the cause
        assert "softmax_cross_entropy: label 3 is out of range" in str(info.value.__cause__)
    for p, w in zip(state, before, strict=True):
        np.testing.assert_array_equal(p.numpy(), w)
