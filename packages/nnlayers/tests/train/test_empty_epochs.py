"""An epoch that reads no data is an error, raised before the epoch is counted: a StreamFeed
whose source yields nothing, a generator used up by an earlier epoch, an empty list, empty
validation data. A one-shot iterator given for several epochs is refused before anything
trains, naming Feed and StreamFeed. ``model.epoch``, the history and the weights stay as they
were."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
from nnlayers import Feed, StreamFeed
from nnlayers.errors import EmptyEpochError
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD
from nnlayers.train import fit

RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 16)


def classifier() -> Classifier:
    return Classifier(Sequential([Affine(6, activation="tanh"), Affine(3)], seed=0), (4,))


def weights(model) -> list[np.ndarray]:
    return [p.numpy().copy() for p in model.params]


def batches_of(x, y, size=4):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def test_a_stream_whose_source_yields_nothing_stops_fit_naming_the_epoch(xp) -> None:
    model = classifier()
    feed = StreamFeed(lambda: iter(()), batch_size=4)
    with pytest.raises(EmptyEpochError, match=r"epoch 1 read no data.*StreamFeed.*source"):
        fit(model, feed, epochs=3, optimizer=SGD(0.1), progress=False)
    assert model.epoch == 0
    assert len(model.history) == 0


def test_a_source_used_up_after_the_first_epoch_stops_at_the_second(xp) -> None:
    """A source callable returning the same (used-up) iterator: epoch 1 trains, epoch 2 raises,
    and the model keeps epoch 1 as its last one."""
    shared = iter([(X, Y)])
    model = classifier()
    feed = StreamFeed(lambda: shared, batch_size=4)
    with pytest.raises(EmptyEpochError, match=r"epoch 2 read no data.*\(model.epoch is still 1\)"):
        fit(model, feed, epochs=3, optimizer=SGD(0.1), progress=False)
    assert model.epoch == 1
    assert [r["epoch"] for r in model.history] == [1]
    assert np.isfinite(model.history.last["loss"])


def test_a_generator_for_several_epochs_is_refused_before_anything_trains(xp) -> None:
    model = classifier()
    before = weights(model)
    generator = (batch for batch in batches_of(X, Y))
    with pytest.raises(TypeError, match=r"generator.*epochs 2 to 3.*Feed.*StreamFeed"):
        fit(model, generator, epochs=3, optimizer=SGD(0.1), progress=False)
    assert model.epoch == 0
    for p, w in zip(model.params, before, strict=True):
        np.testing.assert_array_equal(p.numpy(), w)


def test_a_generator_for_one_epoch_trains_and_a_second_call_with_it_is_an_error(xp) -> None:
    model = classifier()
    generator = (batch for batch in batches_of(X, Y))
    fit(model, generator, epochs=1, optimizer=SGD(0.1), progress=False)
    assert model.epoch == 1
    with pytest.raises(EmptyEpochError, match=r"epoch 2 read no data.*iterator.*Feed"):
        fit(model, generator, epochs=1, progress=False)  # one more epoch
    assert model.epoch == 1
    assert len(model.history) == 1


def test_an_empty_list_of_batches_is_an_error(xp) -> None:
    model = classifier()
    with pytest.raises(EmptyEpochError, match=r"epoch 1 read no data: the list yielded no batch"):
        fit(model, [], epochs=2, optimizer=SGD(0.1), progress=False)
    assert model.epoch == 0


def test_empty_validation_data_is_an_error_not_a_nan(xp) -> None:
    model = classifier()
    empty = StreamFeed(lambda: iter(()), batch_size=4)
    with pytest.raises(EmptyEpochError, match=r"epoch 1: the validation data"):
        fit(
            model,
            Feed(X, Y, batch_size=4),
            epochs=2,
            validation=empty,
            optimizer=SGD(0.1),
            progress=False,
        )
    assert model.epoch == 0


def test_evaluate_of_no_examples_still_gives_nan(xp) -> None:
    """``evaluate`` itself keeps its documented answer for no examples (NaN metrics)."""
    model = classifier()
    scores = model.evaluate(X[:0], Y[:0])
    assert all(np.isnan(v) for v in scores.values())
    assert nnlayers.errors.EmptyEpochError.__mro__[1] is nnlayers.errors.NNLayersError
