"""Flatten: shapes and the gradient of a reshape."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers.expr as ex
from nnlayers.layers import Flatten


def test_flatten_gradients(gradcheck) -> None:
    gradcheck(Flatten(), np.random.default_rng(0).normal(size=(2, 3, 2, 2)))


def test_flatten_shapes() -> None:
    assert Flatten()(ex.placeholder((None, 3, 4, 5))).shape == (None, 60)
    assert Flatten(2)(ex.placeholder((None, 3, 4, 5))).shape == (None, 3, 20)
    with pytest.raises(ValueError, match="must be known"):
        Flatten()(ex.placeholder((None, None, 4)))
