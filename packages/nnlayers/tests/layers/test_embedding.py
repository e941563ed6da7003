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
