"""Python lists where arrays are expected: ``predict(list_of_rows)`` and ``evaluate(list,
list)`` convert them, as Keras and scikit-learn do, and give what the arrays give; a list of
``(x, y)`` batches is read as batches; what cannot be an array (ragged rows, strings, a dict)
is a ``TypeError`` naming the call and the argument."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier

RNG = np.random.default_rng(0)
X = RNG.normal(size=(7, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 7)


def classifier() -> Classifier:
    return Classifier(Sequential([Affine(6, activation="tanh"), Affine(3)], seed=0), (4,))


def test_predict_of_a_list_of_rows_is_the_prediction_of_the_array(xp) -> None:
    model = classifier()
    want = model.predict(X)
    np.testing.assert_allclose(model.predict(X.tolist()), want, rtol=1e-6)
    np.testing.assert_allclose(model.predict([list(map(float, r)) for r in X]), want, rtol=1e-6)


def test_evaluate_of_lists_is_the_evaluation_of_the_arrays(xp) -> None:
    model = classifier()
    want = model.evaluate(X, Y)
    assert model.evaluate(X.tolist(), Y.tolist()) == pytest.approx(want, rel=1e-6)
    assert model.evaluate((X, Y.tolist()), batch_size=3) == pytest.approx(want, rel=1e-6)


def test_a_list_of_batches_is_read_as_batches(xp) -> None:
    model = classifier()
    want = model.evaluate(X, Y, batch_size=3)
    listed = [(X[i : i + 3], Y[i : i + 3]) for i in range(0, 7, 3)]
    assert model.evaluate(listed) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(
    ("call", "args", "message"),
    [
        ("predict", ([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]],), r"predict: argument 0.*not rectangular"),
        ("predict", ([["a", "b", "c", "d"]],), r"predict: argument 0.*str"),
        ("predict", ({"x": X},), r"predict: cannot read examples from a dict"),
        ("evaluate", (X.tolist(), 3), r"evaluate: argument 1 is a int"),
        ("evaluate", (X.tolist(), Y[:5].tolist()), r"evaluate: argument 1 has 5 examples.*7"),
    ],
)
def test_what_cannot_be_an_array_is_a_type_error_naming_the_call(xp, call, args, message) -> None:
    model = classifier()
    with pytest.raises((TypeError, ValueError), match=message) as info:
        getattr(model, call)(*args)
    assert not isinstance(info.value, AttributeError)
