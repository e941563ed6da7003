"""One rule for every loss's operands: a target that would broadcast the prediction to another
shape (targets ``(N,)`` against predictions ``(N, 1)``) is refused when the loss is built,
naming the loss and both shapes, never averaged as an outer product; targets of the prediction's
shape, or of one that broadcasts to it, give the loss they always did."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.errors import ShapeError

N = 5

# loss name -> (builder of prediction/target expressions, prediction shape, misaligned target
# shape); the misaligned target is what a user writes for the labels of a one-output network.
MISALIGNED: dict[str, tuple[Callable[[Any, Any], Any], tuple[Any, ...], tuple[Any, ...], str]] = {
    "squared_error": (ex.squared_error, (N, 1), (N,), "float32"),
    "squared_error, unknown batch": (ex.squared_error, (None, 1), (None,), "float32"),
    "squared_error, extra axis": (ex.squared_error, (None,), (None, 1), "float32"),
    "squared_error, (N, D) against (N, 1)": (ex.squared_error, (N, 1), (N, 3), "float32"),
    "kl_standard_normal": (ex.kl_standard_normal, (N, 1), (N,), "float32"),
    "sigmoid_cross_entropy": (ex.sigmoid_cross_entropy, (N, 1), (N,), "float32"),
    "softmax_cross_entropy, probabilities": (
        ex.softmax_cross_entropy,
        (N, 3),
        (N, 1),
        "float32",
    ),
    "softmax_cross_entropy, labels": (ex.softmax_cross_entropy, (N, 3), (N, 1), "int64"),
    "hinge": (ex.hinge, (N, 3), (N, 1), "int64"),
}


@pytest.mark.parametrize("case", list(MISALIGNED), ids=list(MISALIGNED))
def test_a_target_that_would_broadcast_the_prediction_is_refused(case: str) -> None:
    build, p_shape, t_shape, t_dtype = MISALIGNED[case]
    prediction = ex.placeholder(p_shape, "float32", name="prediction")
    target = ex.placeholder(t_shape, t_dtype, name="target")
    with pytest.raises(ShapeError) as info:
        build(prediction, target).shape  # noqa: B018 (ops infer their shapes when asked)
    message = str(info.value)
    loss = case.split(",")[0]
    assert loss in message
    shape = "(" + ", ".join(str(d) for d in t_shape) + (",)" if len(t_shape) == 1 else ")")
    assert shape in message


def test_squared_error_of_equal_values_in_misaligned_arrays_is_refused_not_four() -> None:
    """The issue's case: equal values, ``(N, 1)`` against ``(N,)``, used to give 4.0 (the mean
    of an ``(N, N)`` outer product of differences); the hint says how to align them."""
    values = np.arange(N, dtype=np.float32)
    with pytest.raises(ShapeError, match=r"squared_error.*\(5,\).*\(5, 1\).*y\[:, None\]"):
        ex.squared_error(values[:, None], values)


@pytest.mark.parametrize(
    ("p_shape", "t_shape"),
    [((N, 1), (N, 1)), ((N, 3), (1, 3)), ((N, 3), ()), ((N, 3), (3,)), ((N,), (N,))],
)
def test_targets_that_broadcast_to_the_prediction_keep_their_loss(xp, p_shape, t_shape) -> None:
    rng = np.random.default_rng(0)
    p = rng.normal(size=p_shape).astype(np.float32)
    t = rng.normal(size=t_shape).astype(np.float32)
    px = ex.placeholder(p_shape, "float32", name="p")
    graph = nnlayers.compile(ex.squared_error(px, t), wrt=[px])
    got = float(np.asarray(graph.xp.to_numpy(graph.forward({px: p}))))
    diff = (p - t) ** 2
    want = diff.reshape(diff.shape[0], -1).sum(1).mean() if diff.ndim > 1 else diff.mean()
    assert got == pytest.approx(float(want), rel=1e-5)


def test_a_regressor_fed_targets_without_the_output_axis_is_told_the_shape() -> None:
    """Through ``evaluate``: a one-output regressor fed targets ``(N,)`` gets a feed error naming
    the targets and the expected shape, not a loss averaged over an outer product."""
    from nnlayers.layers import Affine

    model = nnlayers.Regressor(Affine(1, seed=0), (2,))
    x = np.ones((N, 2), np.float32)
    y = np.ones(N, np.float32)
    with pytest.raises(nnlayers.errors.FeedError, match=r"targets.*\(None, 1\).*\(5,\)"):
        model.evaluate(x, y)
