"""PyTorch's names on a model: ``parameters()``, ``named_parameters()``, ``to("cpu")``."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
from nnlayers.layers import Affine, BatchNorm, Sequential


def _model() -> nnlayers.Classifier:
    net = Sequential([Affine(4), BatchNorm(), "relu", Affine(3, name="head")], seed=0)
    return nnlayers.Classifier(net, (5,))


def test_parameters_are_the_weights_frozen_or_not_and_not_the_statistics() -> None:
    model = _model()
    names = [name for name, _ in model.named_parameters()]
    assert names == [str(p.name) for p in model.parameters()]
    assert "head/weight" in names and "batch_norm/gamma" in names
    assert not any("running" in n or "moving" in n for n in names), names
    assert set(names) < set(model.state_dict()), "the statistics are in the state, not here"
    model.network.layers[-1].freeze()
    assert [n for n, _ in model.named_parameters()] == names, "frozen weights stay, as in PyTorch"
    assert not dict(model.named_parameters())["head/weight"].trainable
    assert sum(p.size for p in model.parameters()) == 4 * 5 + 4 + 4 + 4 + 4 * 3 + 3


def test_to_takes_pytorch_device_strings(other_xp) -> None:
    model = _model()
    x = np.random.default_rng(0).normal(size=(6, 5)).astype("float32")
    before = model.predict_proba(x)
    assert model.to("cpu").xp.name == "numpy"
    np.testing.assert_allclose(model.predict_proba(x), before, rtol=1e-5, atol=1e-6)
    model.to(f"{other_xp.name}:0")
    assert model.xp is other_xp or model.xp.name == other_xp.name
    np.testing.assert_allclose(model.predict_proba(x), before, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="names the device; drop device="):
        model.to("cpu:0", 0)
    with pytest.raises(TypeError, match="no device index in 'numpy:x'"):
        model.to("numpy:x")
