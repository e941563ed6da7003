"""``summary`` of a model of one's own (a ``Model`` subclass, ``Model(loss, ...)``, a VAE): the
layers it holds, nested, with output shapes and counts, at most 100 columns; ``ops=True`` for the
op-by-op view of its graph."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.graph.graph import Graph
from nnlayers.layers import Affine, BatchNorm, Conv2D, Flatten, Layer, Sequential
from nnlayers.summary import WIDTH


class ResBlock(Layer):
    def __init__(self, filters, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.conv1 = Conv2D(filters, 3, padding="same", use_bias=False)
        self.bn1 = BatchNorm()
        self.conv2 = Conv2D(filters, 3, padding="same", use_bias=False)
        self.bn2 = BatchNorm()

    def forward(self, x):
        h = ex.relu(self.bn1(self.conv1(x)))
        return ex.relu(x + self.bn2(self.conv2(h)))


class Pair(Layer):
    """A layer of two inputs: applied again to one, it cannot be traced."""

    def __init__(self):
        super().__init__()
        self.left = Affine(4)

    def forward(self, x, y):
        return self.left(x) + y


class Net(nnlayers.Model):
    """A custom model written as a PyTorch user would: layers as attributes."""

    def __init__(self):
        self.stem = Conv2D(8, 3, padding="same", seed=0)
        self.blocks = [ResBlock(8, seed=1), ResBlock(8, seed=2)]
        self.flatten = Flatten()
        self.head = Affine(10, seed=3)
        self.unused = Affine(7)  # never applied: shown, without a shape
        x = ex.placeholder((None, 1, 8, 8), name="x")
        y = ex.placeholder((None,), "int64", name="y")
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        logits = self.head(self.flatten(h))
        super().__init__(ex.softmax_cross_entropy(logits, y), inputs=[x, y], outputs=logits)


def _sizes(layer: Layer) -> int:
    return sum(p.size for p in layer._all_parameters())


def test_a_custom_model_shows_its_layers_nested_with_shapes_and_counts() -> None:
    model = Net()
    s = nnlayers.summary(model)
    rows = {row.name: row for row in s.rows}
    assert list(rows) == [
        "conv2d",
        "res_block",
        "res_block/conv1",
        "res_block/bn1",
        "res_block/conv2",
        "res_block/bn2",
        "res_block_1",
        "res_block_1/conv1",
        "res_block_1/bn1",
        "res_block_1/conv2",
        "res_block_1/bn2",
        "flatten",
        "affine",
        "affine_1",
    ]
    assert rows["res_block/conv1"].depth == 1 and rows["res_block"].depth == 0
    assert rows["conv2d"].output_shape == (None, 8, 8, 8)
    assert rows["res_block_1"].output_shape == (None, 8, 8, 8)
    assert rows["flatten"].output_shape == (None, 512)
    assert rows["affine"].output_shape == (None, 10)
    assert rows["affine_1"].output_shapes == ()  # never applied
    assert rows["conv2d"].params == _sizes(model.stem) == 80
    assert rows["affine"].params == _sizes(model.head) == 5130
    assert rows["res_block/conv1"].params == 8 * 8 * 9
    assert rows["res_block/bn1"].params == 4 * 8 and rows["res_block/bn1"].non_trainable_params
    block = model.blocks[1]
    assert sum(r.params for r in s.rows if r.name.startswith("res_block_1")) == _sizes(block)
    everything = [*model.params, *model.buffers]
    assert s.total_params == sum(p.size for p in everything) == sum(r.params for r in s.rows)
    assert s.trainable_params == sum(p.size for p in model.params)
    assert s.non_trainable_params == sum(p.size for p in model.buffers) == 4 * 16
    assert s.title.startswith("Net (layers), inputs (None, 1, 8, 8) float32, (None,) int64")

    text = str(s)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    for label in ("res_block (ResBlock)", "  conv1 (Conv2D)", "affine (Affine)", "(None, 512)"):
        assert label in text
    assert "matmul" not in text and "5,130" in text
    unused = next(line for line in text.splitlines() if line.startswith("affine_1 "))
    assert unused.split()[2:] == ["?", "--"]


def test_trainable_counts_follow_freeze_at_once() -> None:
    model = Net()
    model.blocks[0].freeze()
    s = nnlayers.summary(model)
    frozen = _sizes(model.blocks[0])
    total = sum(p.size for p in [*model.params, *model.buffers])
    assert s.total_params == total
    assert s.non_trainable_params == frozen + 2 * 8 * 2  # the other block's running statistics
    assert s.trainable_params == total - s.non_trainable_params
    row = next(r for r in s.rows if r.name == "res_block/conv1")
    assert row.trainable_params == 0 and row.non_trainable_params == 576
    model.blocks[0].unfreeze()
    assert nnlayers.summary(model).non_trainable_params == 2 * 8 * 2 * 2


def test_the_op_dump_is_asked_for_by_name() -> None:
    model = Net()
    ops = nnlayers.summary(model, ops=True)
    assert ops.title.startswith("Net (graph)")
    assert "conv2d" in [r.type for r in ops.rows] and "matmul" in [r.type for r in ops.rows]
    assert ops.total_params == nnlayers.summary(model).total_params
    printed: list[str] = []
    model.summary(ops=True, print_fn=printed.append)
    assert printed == [str(ops)]
    model.summary(print_fn=printed.append, depth=0)
    assert "conv1" not in printed[1] and "res_block (ResBlock)" in printed[1]


def test_a_plain_model_and_a_vae_show_the_layers_owning_their_parameters() -> None:
    x = ex.placeholder((None, 3), name="x")
    y = ex.placeholder((None, 4), name="y")
    pair = Pair()
    out = pair(Affine(5, seed=0)(x), y)
    model = nnlayers.Model(ex.mean(out * out), inputs=[x, y], outputs=out)
    s = nnlayers.summary(model)
    # the model holds no layer: those owning its parameters, under their full names
    assert [(r.name, r.output_shapes, r.depth) for r in s.rows] == [
        ("affine", ((None, 5),), 0),
        ("pair/left", ((None, 4),), 0),
    ]
    assert s.total_params == 5 * 3 + 5 + 5 * 4 + 4

    class Held(nnlayers.Model):
        def __init__(self):
            self.pair = pair
            super().__init__(ex.mean(out * out), inputs=[x, y], outputs=out)

    held = nnlayers.summary(Held())
    assert [(r.name, r.output_shapes, r.depth, r.params) for r in held.rows] == [
        ("affine", ((None, 5),), 0, 20),
        ("pair", (), 0, 0),  # two inputs: not traced again, its parts listed without shapes
        ("pair/left", (), 1, 24),
    ]
    assert any(line.split() == ["pair", "(Pair)", "?", "--"] for line in str(held).splitlines())

    encoder = Sequential([Affine(16, activation="relu")], seed=0)
    decoder = Sequential([Affine(16, activation="relu"), Affine(6)], seed=1)
    vae = nnlayers.VAE(encoder, decoder, (6,), 2)
    v = nnlayers.summary(vae)
    names = [(r.name, r.depth, r.output_shape) for r in v.rows]
    assert ("latent_mean", 0, (None, 2)) in names
    assert names[-3:] == [
        ("sequential", 0, (None, 6)),  # the decoder, which the VAE keeps
        ("affine_1", 1, (None, 16)),
        ("affine_2", 1, (None, 6)),
    ]
    assert v.total_params == sum(p.size for p in vae.params)


def test_nothing_runs_no_seed_is_drawn_and_wide_names_wrap(monkeypatch) -> None:
    model = Net()
    x = ex.placeholder((None, 2), name="x")
    wide = nnlayers.Model(ex.sum(Affine(3, name="a_rather_long_layer_name_" * 3)(x)), inputs=[x])

    def refuse(*args, **kwargs):
        raise AssertionError("summary compiled or ran a graph")

    monkeypatch.setattr(Graph, "__init__", refuse)
    monkeypatch.setattr(Graph, "forward", refuse)
    values = {id(p): p.value for p in model.params}
    nnlayers.seed(11)
    nnlayers.summary(model)
    after = nnlayers.init.next_seed()
    nnlayers.seed(11)
    assert after == nnlayers.init.next_seed()
    assert all(p.value is values[id(p)] for p in model.params)
    text = str(nnlayers.summary(wide))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert any(line.strip() == "(Affine)" for line in lines)  # the label's end, wrapped
    np.testing.assert_equal(nnlayers.summary(wide).total_params, 9)
