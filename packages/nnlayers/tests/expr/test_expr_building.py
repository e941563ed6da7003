"""Building expressions: NumPy-like operators, constants, dtypes, lazy shapes."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter


def run(out, feeds=None):
    graph = nnlayers.compile(out, wrt=[])
    return graph.xp.to_numpy(graph.forward(feeds or {}))


def test_reads_like_numpy() -> None:
    x = ex.placeholder((None, 6), name="x")
    W = ex.constant(np.arange(12.0).reshape(6, 2) / 10)
    b = np.array([0.5, -0.5])
    y = ex.exp(-x[:, 2:5]).sum(axis=1, keepdims=True) + (x @ W + b) ** 2 - abs(x.T.T[:, :2]) / 2
    data = np.linspace(-1, 1, 18).reshape(3, 6)
    want = (
        np.exp(-data[:, 2:5]).sum(1, keepdims=True)
        + (data @ (np.arange(12.0).reshape(6, 2) / 10) + b) ** 2
        - abs(data[:, :2]) / 2
    )
    np.testing.assert_allclose(run(y, {x: data}), want, rtol=1e-5)
    assert y.shape == (None, 2)


def test_building_computes_nothing_and_infers_lazily() -> None:
    x = ex.placeholder((None, 3))
    y = ex.log(x) * 2.0
    assert y._spec is None  # nothing inferred or computed yet
    assert y.shape == (None, 3) and y.dtype == np.float32


def test_python_numbers_and_numpy_arrays_become_constants_of_the_expression_dtype() -> None:
    x = ex.placeholder((2,), "float64")
    y = 2 * x + np.float32(1.0) - np.array([1.0, 2.0], dtype=np.float32)
    assert y.dtype == np.float64
    z = ex.placeholder((2,)) * np.array([1.0, 2.0])  # float64 host data joins a float32 graph
    assert z.dtype == np.float32
    assert run(1.0 - ex.placeholder((2,), name="a"), {"a": np.ones(2)}).tolist() == [0.0, 0.0]


def test_defaults_are_float32_and_float64_is_kept_when_asked() -> None:
    assert ex.placeholder((1,)).dtype == np.float32
    assert ex.constant(1.5).dtype == np.float32
    assert ex.constant([1, 2]).dtype == np.int64
    assert ex.constant(1.5, dtype="float64").dtype == np.float64
    assert Parameter(np.zeros(2)).dtype == np.float32
    assert Parameter(np.zeros(2), dtype="float64").dtype == np.float64


def test_comparisons_and_where() -> None:
    x = ex.placeholder((4,), name="x")
    y = ex.where(x > 0.0, x, 0.1 * x) + ex.astype(x <= 0.0, "float32")
    out = run(y, {x: np.array([-1.0, 0.0, 2.0, 3.0])})
    np.testing.assert_allclose(out, [0.9, 1.0, 2.0, 3.0], rtol=1e-6)


def test_one_hot_and_embedding_lookup() -> None:
    ids = ex.placeholder((None, 3), "int64", name="ids")
    table = Parameter(np.arange(10.0).reshape(5, 2), name="table")
    vectors = ex.take(table, ids)
    assert vectors.shape == (None, 3, 2)
    got = run(vectors, {ids: np.array([[0, 4, 4]])})
    np.testing.assert_array_equal(got, [[[0, 1], [8, 9], [8, 9]]])
    np.testing.assert_array_equal(
        run(ex.one_hot(ids, 5), {ids: np.array([[1, 0, 4]])})[0, 2], [0, 0, 0, 0, 1]
    )


def test_embedding_gradient_accumulates_repeated_indices() -> None:
    ids = ex.placeholder((None,), "int64", name="ids")
    table = Parameter(np.zeros((4, 2)), name="table")
    graph = nnlayers.compile(ex.sum(ex.take(table, ids)))
    graph.forward({ids: np.array([1, 1, 3])})
    graph.backward()
    np.testing.assert_array_equal(graph.xp.to_numpy(table.grad), [[0, 0], [2, 2], [0, 0], [1, 1]])


def test_shape_helpers() -> None:
    x = ex.placeholder((None, 1, 4))
    assert ex.squeeze(x, 1).shape == (None, 4)
    assert ex.expand_dims(x, -1).shape == (None, 1, 4, 1)
    assert ex.flatten(ex.placeholder((None, 2, 3, 4))).shape == (None, 24)
    assert ex.reshape(x, (-1, 2, 2)).shape == (None, 2, 2)
    assert ex.transpose(x).shape == (4, 1, None)
    assert ex.broadcast_to(ex.placeholder((3, 1)), (2, 3, 5)).shape == (2, 3, 5)
    assert [p.shape for p in ex.split(ex.placeholder((None, 6)), 3, axis=1)] == [(None, 2)] * 3
    assert ex.stack([x, x], axis=1).shape == (None, 2, 1, 4)
    assert ex.concat([x, x], axis=0).shape == (None, 1, 4)
    assert ex.pad(ex.placeholder((None, 3)), ((0, 0), (1, 2))).shape == (None, 6)
    assert ex.conv2d(
        ex.placeholder((None, 3, 9, 9)), ex.constant(np.zeros((8, 3, 3, 3))), 2, "same"
    ).shape == (None, 8, 5, 5)
    assert ex.max_pool2d(ex.placeholder((None, 3, 9, 9)), 2).shape == (None, 3, 4, 4)


def test_expressions_are_hashable_and_have_no_truth_value() -> None:
    x = ex.placeholder((2,))
    assert {x: 1}[x] == 1
    with pytest.raises(TypeError, match="no truth value"):
        bool(x > 0.0)
    with pytest.raises(TypeError, match="not iterable"):
        list(x)


def test_fancy_indexing_is_refused_with_a_pointer_to_take() -> None:
    x = ex.placeholder((3, 4))
    with pytest.raises(nnlayers.ShapeError, match=r"use ex\.take"):
        _ = x[[0, 2]].shape


def test_losses_average_over_the_batch() -> None:
    logits = ex.placeholder((None, 3), name="logits")
    labels = ex.placeholder((None,), "int64", name="labels")
    loss = ex.softmax_cross_entropy(logits, labels)
    big = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]])
    value = float(run(loss, {logits: big, labels: np.array([0, 1])}))
    assert value == pytest.approx(np.log(3) / 2, rel=1e-5)  # stable for huge logits
    bce = ex.sigmoid_cross_entropy(logits, ex.placeholder((None, 3), name="t"))
    value = float(run(bce, {"logits": big, "t": np.ones((2, 3))}))
    assert np.isfinite(value) and value == pytest.approx((1000.0 + 4 * np.log(2)) / 2, rel=1e-5)


def test_argmax_gives_int64_indices_for_accuracy() -> None:
    logits = ex.placeholder((None, 3), name="logits")
    labels = ex.placeholder((None,), "int64", name="labels")
    hits = ex.astype(ex.equal(ex.argmax(logits, axis=1), labels), "float32")
    accuracy = ex.mean(hits)
    assert ex.argmax(logits, 1).dtype == np.int64 and ex.argmin(logits, 1, keepdims=True).shape == (
        None,
        1,
    )
    value = run(
        accuracy, {logits: np.array([[0.1, 0.9, 0.0], [2.0, 1.0, 0.0]]), labels: np.array([1, 2])}
    )
    assert float(value) == 0.5
