"""Embedding: lookups, gradients accumulating on repeated ids, integer ids only."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Embedding


def test_embedding_gradients_with_repeated_ids(gradcheck, tol) -> None:
    ids = np.array([[0, 2, 2], [1, 0, 3]])
    gradcheck(Embedding(4, 3, dtype=tol.dtype, seed=0), ids)


def test_embedding_looks_up_rows() -> None:
    emb = Embedding(5, 2, seed=0)
    ids = ex.placeholder((None, 3), "int64", name="ids")
    graph = nnlayers.compile(ex.sum(emb(ids)))
    data = np.array([[4, 0, 4]])
    out = graph.xp.to_numpy(graph.forward({ids: data}))
    table = emb.weight.numpy()
    assert out == pytest.approx(table[[4, 0, 4]].sum(), rel=1e-6)
    graph.backward()
    np.testing.assert_array_equal(graph.xp.to_numpy(emb.weight.grad)[:, 0], [1, 0, 0, 0, 2])


def test_embedding_needs_integer_ids() -> None:
    with pytest.raises(TypeError, match="Embedding 'embedding': needs integer ids"):
        Embedding(5, 2)(ex.placeholder((None, 3)))


def test_ids_are_checked_once_a_step_and_bad_ones_still_raise(monkeypatch) -> None:
    """The forward lookup checks the ids (on a device backend that waits for the queue); the
    gradient scatters by the very same ids without checking them again. An id out of range is
    still the lookup's IndexError, before any gradient."""
    from arraycore import _checks

    checked: list[int] = []
    real = _checks._bounds

    def bounds(xp, a):  # noqa: ANN001, ANN202 - counts the checks, not the host step inside one
        if not getattr(bounds, "inside", False):
            checked.append(a.size)
        bounds.inside = True
        try:
            return real(xp, a)
        finally:
            bounds.inside = False

    monkeypatch.setattr(_checks, "_bounds", bounds)
    emb = Embedding(5, 2, seed=0)
    ids = ex.placeholder((None, 3), "int64", name="ids")
    graph = nnlayers.compile(ex.sum(emb(ids)))
    data = graph.xp.asarray(np.array([[4, 0, -1], [1, 1, 2]]))  # ids already on the backend
    graph.forward({ids: data})
    graph.backward()
    assert checked == [6]
    grad = graph.xp.to_numpy(emb.weight.grad)[:, 0]
    np.testing.assert_array_equal(grad, [1, 2, 1, 0, 2])  # -1 is the last row, as in forward
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        graph.forward({ids: graph.xp.asarray(np.array([[5, 0, 0]]))})
