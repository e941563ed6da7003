"""Fine-tuning: freezing layers and parameters, frozen batch norm, loading pretrained weights
into a model that differs in some layers."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
from nnlayers.checkpoint import CheckpointError
from nnlayers.errors import GraphError
from nnlayers.feeds import Feed
from nnlayers.layers import (
    Affine,
    BatchNorm,
    Conv2D,
    Flatten,
    Pool2D,
    ResidualBlock,
    Sequential,
)
from nnlayers.models import Classifier
from nnlayers.optim import SGD, Adam
from nnlayers.train import fit


def _digits() -> tuple[np.ndarray, np.ndarray]:
    pytest.importorskip("sklearn", reason="the digits come with scikit-learn")
    from nnlayers.datasets import load_digits, train_test_split

    train, test = train_test_split(*load_digits(), test_fraction=0.25, seed=0)
    return (train.inputs, train.targets), (test.inputs, test.targets)  # type: ignore[return-value]


def _backbone(seed: int) -> Sequential:
    return Sequential(
        [Conv2D(16, 3, padding="same"), BatchNorm(), "relu", Pool2D(2), Flatten()],
        name="backbone",
        seed=seed,
    )


def _values(layer: nnlayers.layers.Layer) -> dict[str, np.ndarray]:
    return {str(p.name): p.numpy() for p in [*layer.params, *layer.buffers]}


def test_freeze_marks_every_parameter_of_a_layer_and_its_parts() -> None:
    block = ResidualBlock(4, stride=2, seed=0)
    block(nnlayers.expr.placeholder((None, 3, 8, 8), name="x"))
    weights = block.params
    assert weights and block.trainable
    block.freeze()
    assert not block.trainable and block.params == []
    assert all(p.frozen and not p.trainable for p in weights)
    assert all(not part.trainable for part in block.sublayers())
    # running statistics stay state after an unfreeze; weights train again
    block.trainable = True
    assert {id(p) for p in block.params} == {id(p) for p in weights}
    assert all("running" in str(p.name) for p in block.buffers)


def test_a_layer_frozen_before_it_is_built_makes_frozen_parameters() -> None:
    net = Sequential([Affine(4), "relu", Affine(2)], seed=0).freeze()
    net(nnlayers.expr.placeholder((None, 3), name="x"))
    assert net.params == [] and len(net.buffers) == 4
    assert "frozen" in repr(net.buffers[0])


def test_fine_tune_a_pretrained_digits_cnn_with_its_convolutions_frozen(tmp_path) -> None:
    """Pretrain a CNN, save it, load its backbone into a model with a new head (strict=False
    reports the head), freeze the backbone and train: the convolutions and the batch-norm
    statistics do not move, the head learns, and the accuracy is that of a trained model."""
    (x, y), (x_test, y_test) = _digits()
    pretrained = Classifier(Sequential([_backbone(0), Affine(10, name="head")]), (1, 8, 8))
    fit(pretrained, Feed(x, y, batch_size=64), epochs=5, optimizer=Adam(3e-3), progress=False)
    path = pretrained.save(tmp_path / "pretrained.safetensors")

    backbone = _backbone(1)
    model = Classifier(Sequential([backbone, Affine(10, name="new_head")]), (1, 8, 8))
    with pytest.raises(CheckpointError, match="new_head/weight"):
        model.load_weights(path)  # strict: the head's names differ
    missing, unexpected = model.load_weights(path, strict=False)
    assert missing == ["new_head/bias", "new_head/weight"]
    assert unexpected == ["head/bias", "head/weight"]
    loaded = _values(backbone)
    for name, value in loaded.items():
        np.testing.assert_array_equal(value, dict(pretrained.state_dict())[name])

    backbone.freeze()
    head_before = model.state_dict()["new_head/weight"]
    fit(model, Feed(x, y, batch_size=64), epochs=5, optimizer=Adam(3e-3), progress=False)
    for name, value in _values(backbone).items():
        np.testing.assert_array_equal(value, loaded[name], err_msg=name)
    assert not np.array_equal(model.state_dict()["new_head/weight"], head_before)
    assert model.evaluate(x_test, y_test)["accuracy"] > 0.9


def test_freezing_after_the_model_is_built_takes_effect_at_the_next_step() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    first, second = Affine(8, activation="tanh", name="first"), Affine(2, name="second")
    model = Classifier(Sequential([first, second], seed=0), (5,), optimizer=Adam(0.05))
    model.train_step((x, y))
    assert len(model.params) == 4
    first.freeze()
    frozen = {str(p.name): p.numpy() for p in first.buffers}
    second_before = second.weight.numpy()
    model.train_step((x, y))
    assert [str(p.name) for p in model.params] == ["second/weight", "second/bias"]
    assert len(model.optimizer.params) == 4  # bound to the frozen ones too, which it skips
    for p in first.buffers:
        np.testing.assert_array_equal(p.numpy(), frozen[str(p.name)])
        assert p.grad is None  # no gradient for a frozen parameter (the last one is dropped)
    assert not np.array_equal(second.weight.numpy(), second_before)
    # Adam keeps every moment across freezing and unfreezing
    assert model.optimizer._counts[id(second.weight)] == 2
    first.unfreeze()
    model.train_step((x, y))
    assert not np.array_equal(first.weight.numpy(), frozen["first/weight"])
    assert model.optimizer._counts[id(second.weight)] == 3
    assert model.optimizer._counts[id(first.weight)] == 2  # steps 1 and 3


def test_a_frozen_batch_norm_uses_and_keeps_its_running_statistics() -> None:
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(16, 3, 4, 4)) * 3 + 2).astype("float32")
    bn = BatchNorm(name="bn")
    net = Sequential([Conv2D(3, 1), bn, Flatten(), Affine(2)], seed=0)
    model = Classifier(net, (3, 4, 4), optimizer=SGD(0.1))
    y = rng.integers(0, 2, 16)
    model.train_step((x, y))  # running statistics move while trainable
    bn.freeze()
    stats = [p.numpy() for p in bn.buffers if "running" in str(p.name)]
    for _ in range(3):
        model.train_step((x, y))
    after = [p.numpy() for p in bn.buffers if "running" in str(p.name)]
    for a, b in zip(stats, after, strict=True):
        np.testing.assert_array_equal(a, b)
    # in the train phase the frozen layer normalises as in the eval phase: same loss
    model.train()
    train_loss = float(model.xp.to_numpy(model.forward(x, y)[0]))
    model.eval()
    eval_loss = float(model.xp.to_numpy(model.forward(x, y)[0]))
    assert train_loss == pytest.approx(eval_loss, rel=1e-6)
    bn.unfreeze()
    model.train()
    assert float(model.xp.to_numpy(model.forward(x, y)[0])) != pytest.approx(eval_loss, rel=1e-3)


def test_everything_frozen_is_a_clear_error() -> None:
    net = Sequential([Affine(2)], seed=0)
    model = Classifier(net, (3,), optimizer=SGD(0.1))
    net.freeze()
    with pytest.raises(GraphError, match=r"every parameter .* is frozen"):
        model.train_step((np.ones((4, 3), "float32"), np.zeros(4, "int64")))


def test_load_state_dict_strict_false_and_shape_mismatch() -> None:
    model = Classifier(Sequential([Affine(4, name="a"), Affine(2, name="b")], seed=0), (3,))
    state = model.state_dict()
    before = {k: v.copy() for k, v in state.items()}
    partial = {"a/weight": np.ones((3, 4), "float32"), "extra/weight": np.zeros(2, "float32")}
    missing, unexpected = model.load_state_dict(partial, strict=False)
    assert missing == ["a/bias", "b/bias", "b/weight"] and unexpected == ["extra/weight"]
    np.testing.assert_array_equal(model.state_dict()["a/weight"], np.ones((3, 4)))
    np.testing.assert_array_equal(model.state_dict()["b/weight"], before["b/weight"])
    with pytest.raises(ValueError, match=r"'b/weight' has shape \(4, 3\), expected \(4, 2\)"):
        model.load_state_dict({"b/weight": np.zeros((4, 3), "float32")}, strict=False)
    with pytest.raises(ValueError, match="missing 'a/bias'"):
        model.load_state_dict(partial)
    np.testing.assert_array_equal(model.state_dict()["b/weight"], before["b/weight"])
