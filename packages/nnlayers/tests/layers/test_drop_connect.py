"""DropConnect: weights (not activations) dropped in the train phase, the weight itself in eval."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.errors import ShapeError
from nnlayers.layers import Affine


def host(xp, a):
    return np.asarray(xp.to_numpy(a), dtype=np.float64)


def test_affine_drop_connect_drops_weights_in_training_only() -> None:
    layer = Affine(5, drop_connect=0.5, use_bias=False, seed=0)
    x = ex.placeholder((None, 4), name="x")
    y = layer(x)
    graph = nnlayers.compile(ex.sum(y * y), wrt=[layer.weight])
    eye = np.eye(4, dtype=np.float32)  # each output row is one row of the used weight
    w = layer.weight.numpy().astype(np.float64)
    masks = []
    for _ in range(3):
        graph.forward({x: eye})
        grad = host(graph.xp, graph.backward()[layer.weight])
        used = grad / 4  # d sum((x @ (w * m * 2))**2) / dw = 2 * (2 m w) * 2 m = 8 m w (m in 0/1)
        kept = np.isclose(used, 2 * w, rtol=1e-5, atol=1e-7)
        dropped = np.isclose(used, 0, atol=1e-7)
        assert (kept | dropped).all()  # every weight either kept (scaled by 2) or dropped
        assert 0 < kept.sum() < w.size
        masks.append(kept)
    assert not all((m == masks[0]).all() for m in masks[1:])  # a new mask every step
    graph.eval()
    out = graph.forward({x: eye}, keep_for_backward=False)
    assert float(host(graph.xp, out)) == pytest.approx(float((w**2).sum()), rel=1e-5)


def test_drop_connect_rate_is_checked() -> None:
    with pytest.raises(ValueError, match=r"drop_connect must be in \[0, 1\)"):
        Affine(3, drop_connect=1.0)


def test_placeholder_without_a_shape_says_how_to_give_one() -> None:
    with pytest.raises(ShapeError, match=r"placeholder 'x': the shape must be a tuple.*got None"):
        ex.placeholder(None, name="x")
