"""Parts assigned as attributes (the PyTorch and Keras 3 way): tracked, named, seeded, frozen,
trained and saved; ``name=`` and ``seed=`` on every layer; built-in networks keep their names."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
import nnlayers.layers as L
from nnlayers.feeds import Feed
from nnlayers.layers import (
    Affine,
    BatchNorm,
    Conv2D,
    GlobalAvgPool2D,
    Layer,
    LayerNorm,
    ResidualBlock,
    Sequential,
)
from nnlayers.models import Classifier
from nnlayers.ops.math.activation import relu
from nnlayers.optim import Adam
from nnlayers.parameter import Parameter
from nnlayers.train import fit


class ResBlock(Layer):
    """A residual block written as in PyTorch: parts made in ``__init__``."""

    def __init__(self, filters: int, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.conv1 = Conv2D(filters, 3, padding="same", use_bias=False)
        self.bn1 = BatchNorm()
        self.conv2 = Conv2D(filters, 3, padding="same", use_bias=False)
        self.bn2 = BatchNorm()

    def forward(self, x: ex.Expr) -> ex.Expr:
        h = relu(self.bn1(self.conv1(x)))
        return relu(x + self.bn2(self.conv2(h)))


BLOCK = [
    "conv1/weight",
    "bn1/gamma",
    "bn1/beta",
    "bn1/running_mean",
    "bn1/running_var",
    "conv2/weight",
    "bn2/gamma",
    "bn2/beta",
    "bn2/running_mean",
    "bn2/running_var",
]


def _classifier(seed: int = 0) -> tuple[Classifier, ResBlock, ResBlock]:
    first, second = ResBlock(4), ResBlock(4)
    net = Sequential([Conv2D(4, 3, padding="same"), first, second, GlobalAvgPool2D(), Affine(3)])
    net.seed = seed
    return Classifier(net, (1, 6, 6), optimizer=Adam(0.02)), first, second


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 1, 6, 6)).astype("float32")
    y = (x[:, 0, :3].mean(axis=(1, 2)) > 0).astype("int64") + (x[:, 0, 3:].mean(axis=(1, 2)) > 0)
    return x, y


def test_parts_assigned_in_init_are_tracked_and_named_per_instance() -> None:
    model, first, _ = _classifier()
    assert [str(p.name) for p in first.params + first.buffers] == [
        f"res_block/{n}" for n in BLOCK if "running" not in n
    ] + [f"res_block/{n}" for n in BLOCK if "running" in n]
    assert first.sublayers() == [first.conv1, first.bn1, first.conv2, first.bn2]
    names = [str(p.name) for p in model.params + model.buffers]
    for prefix in ("res_block", "res_block_1"):
        assert [n for n in names if n.startswith(f"{prefix}/")] == [
            f"{prefix}/{n}" for n in BLOCK if "running" not in n
        ] + [f"{prefix}/{n}" for n in BLOCK if "running" in n]
    assert not any("conv1_1" in n for n in names)
    assert len(set(names)) == len(names) == 4 + 2 * 10


def test_summary_shows_the_parts_under_their_block() -> None:
    model, _, _ = _classifier()
    rows = [(row.name, row.depth, row.params) for row in nnlayers.summary(model).rows]
    assert ("res_block_1", 1, 0) in rows
    assert [r for r in rows if r[0].startswith("res_block_1/")] == [
        ("res_block_1/conv1", 2, 144),
        ("res_block_1/bn1", 2, 16),
        ("res_block_1/conv2", 2, 144),
        ("res_block_1/bn2", 2, 16),
    ]


def test_freezing_one_block_freezes_exactly_its_weights() -> None:
    model, first, second = _classifier()
    x, y = _data()
    first.freeze()
    assert first.params == [] and not first.conv1.trainable
    assert len(first.buffers) == 10 and len(second.params) == 6
    before = {str(p.name): p.numpy() for p in first.buffers + second.params}
    model.train_step((x, y))
    trained = {str(p.name) for p in model.params}
    assert not any(n.startswith("res_block/") for n in trained)
    assert {f"res_block_1/{n}" for n in BLOCK if "running" not in n} <= trained
    for p in first.buffers:
        np.testing.assert_array_equal(p.numpy(), before[str(p.name)], err_msg=str(p.name))
    assert not np.array_equal(second.conv1.weight.numpy(), before["res_block_1/conv1/weight"])
    first.unfreeze()
    assert len(first.params) == 6


def test_the_block_trains_and_its_checkpoint_loads(tmp_path) -> None:
    model, _, _ = _classifier()
    x, y = _data()
    start = model.evaluate(x, y)["loss"]
    fit(model, Feed(x, y, batch_size=16), epochs=8, progress=False)
    assert model.evaluate(x, y)["loss"] < 0.8 * start
    path = model.save(tmp_path / "blocks.safetensors")
    assert {"res_block/conv2/weight", "res_block_1/bn2/running_var"} <= model.state_dict().keys()
    again, _, _ = _classifier(seed=1)  # other initial weights, same names
    again.load_weights(path)
    assert again.state_dict().keys() == model.state_dict().keys()
    np.testing.assert_allclose(again.predict_proba(x), model.predict_proba(x), rtol=1e-5)


class Heads(Layer):
    def __init__(self, *, name: str | None = None, seed: int | None = None) -> None:
        super().__init__(name=name, seed=seed)
        self.blocks = [Affine(4, activation="tanh"), Affine(4, activation="tanh")]
        self.heads = {"small": Affine(2), "large": Affine(3)}
        self.scale = Parameter(np.ones(4))
        self.stem = Affine(4, name="stem")  # a name of its own: kept

    def forward(self, x: ex.Expr) -> ex.Expr:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h) * self.scale
        return ex.concat([self.heads["small"](h), self.heads["large"](h)], axis=-1)


def test_lists_dicts_and_parameters_are_tracked() -> None:
    layer = Heads(seed=0)
    assert layer(ex.placeholder((None, 3))).shape == (None, 5)
    assert [str(p.name) for p in layer.params] == [
        "heads/scale",
        "heads/blocks/0/weight",
        "heads/blocks/0/bias",
        "heads/blocks/1/weight",
        "heads/blocks/1/bias",
        "heads/heads/small/weight",
        "heads/heads/small/bias",
        "heads/heads/large/weight",
        "heads/heads/large/bias",
        "stem/weight",
        "stem/bias",
    ]  # its own parameters, then its parts in the order they were assigned
    layer.freeze()
    assert layer.params == [] and layer.scale.frozen and layer.heads["large"].weight.frozen
    layer.unfreeze()
    # reassigning an attribute replaces the part; a part appended to a list is tracked
    old = layer.heads["large"]
    layer.heads = {"small": layer.heads["small"]}
    assert old not in layer.sublayers() and len(layer.params) == 9
    extra = Affine(4)
    layer.blocks.append(extra)
    assert extra in layer.sublayers()
    del layer.stem
    assert not any(str(p.name).startswith("stem/") for p in layer.params)


def test_two_models_of_nested_blocks_are_named_by_their_outermost_block() -> None:
    class Outer(Layer):
        def __init__(self) -> None:
            super().__init__()
            self.inner = ResBlock(2)
            self.body = Sequential([Affine(3), "relu", Affine(2)])

        def forward(self, x: ex.Expr) -> ex.Expr:
            return self.body(ex.mean(self.inner(x), axis=(2, 3)))

    first, second = Outer(), Outer()
    model = Classifier(lambda x: ex.concat([first(x), second(x)], axis=-1), (2, 4, 4))
    names = [str(p.name) for p in model.params]
    assert names[:2] == ["outer/inner/conv1/weight", "outer/inner/bn1/gamma"]
    assert "outer_1/inner/conv1/weight" in names
    assert names[6:10] == ["outer/body/0/weight", "outer/body/0/bias", "outer/body/2/weight",
                           "outer/body/2/bias"]  # fmt: skip
    assert names[-1] == "outer_1/body/2/bias"


def test_seeds_derive_from_the_parent() -> None:
    x = ex.placeholder((None, 1, 5, 5))

    def weights(block: ResBlock) -> list[np.ndarray]:
        block(x)
        return [p.numpy() for p in block.params]

    a, b = weights(ResBlock(1, seed=3)), weights(ResBlock(1, seed=3))
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], a[3])  # conv1 and conv2 start differently
    assert not np.array_equal(a[0], weights(ResBlock(1, seed=4))[0])
    block = ResBlock(1, seed=3)
    block(x)
    assert block.conv1.seed is not None and block.conv1.seed != block.conv2.seed
    # an unseeded block leaves its parts to nnlayers.seed's sequence
    nnlayers.seed(11)
    first = weights(ResBlock(1))
    nnlayers.seed(11)
    again = ResBlock(1)
    second = weights(again)
    assert again.conv1.seed is None
    np.testing.assert_array_equal(first[0], second[0])


def test_forgetting_super_init_is_a_clear_error() -> None:
    class Forgot(Layer):
        def __init__(self) -> None:
            self.dense = Affine(2)

    with pytest.raises(AttributeError, match=r"before Layer.__init__\(\) call"):
        Forgot()

    class Quiet(Layer):
        def __init__(self) -> None:
            self.units = 2

        def forward(self, x: ex.Expr) -> ex.Expr:
            return x

    with pytest.raises(TypeError, match=r"did not call super\(\).__init__\(\)"):
        Quiet()(ex.placeholder((None, 2)))


def _make(kind: str, obj: object, **keywords: object) -> object:
    rnn = lambda: L.LSTM(4, return_sequences=True)
    positional = {
        "Affine": (3,), "Linear": (3,), "Conv2D": (2, 3), "Conv2DTranspose": (2, 3),
        "Embedding": (5, 2), "GroupNorm": (2,), "GRU": (3,), "LSTM": (3,), "RNN": (3,),
        "Recurrent": (3,), "MultiHeadAttention": (2,), "PositionalEmbedding": (8,),
        "ResidualBlock": (4,), "TransformerEncoderLayer": (2,), "TransformerDecoderLayer": (2,),
        "Bidirectional": (rnn(),), "RNNStack": ([rnn()],),
        "TransformerEncoder": (L.TransformerEncoderLayer(2), 2),
        "TransformerDecoder": (L.TransformerDecoderLayer(2), 2),
    }  # fmt: skip
    return obj(*positional.get(kind, ()), **keywords)  # type: ignore[operator]


def _layer_makers() -> list[str]:
    found = []
    for name in L.__all__:
        obj = getattr(L, name)
        layer_class = inspect.isclass(obj) and issubclass(obj, Layer)
        if layer_class or (inspect.isfunction(obj) and name[0].isupper()):  # also MaxPool2D
            found.append(name)
    return found


@pytest.mark.parametrize("name", _layer_makers())
def test_every_layer_accepts_name_and_seed(name: str) -> None:
    layer = _make(name, getattr(L, name), name="mine", seed=5)
    assert isinstance(layer, Layer)
    assert layer.name == "mine" and layer.seed == 5


def test_add_sublayer_in_build_still_works_with_the_new_keywords() -> None:
    class Built(Layer):
        def build(self, spec: object) -> None:
            def named(i: int) -> dict[str, object]:
                return {"name": f"{self.name}/part{i}", "seed": self.child_seed(i)}

            self.add_sublayer("part0", Affine(4, **named(0)))  # type: ignore[arg-type]
            self.add_sublayer("part1", BatchNorm(**named(1)))  # type: ignore[arg-type]
            self.add_sublayer("part2", LayerNorm(**named(2)))  # type: ignore[arg-type]
            self.add_sublayer("plain", Affine(2))
            self.again = [self.plain]  # an attribute holding it neither renames nor seeds it

        def forward(self, x: ex.Expr) -> ex.Expr:
            return self.part2(self.part1(self.part0(x)))

    layer = Built(seed=1)
    layer(ex.placeholder((None, 3)))
    assert layer.plain.name == "affine" and layer.plain.seed is None
    assert [str(p.name) for p in layer.params] == [
        "built/part0/weight", "built/part0/bias", "built/part1/gamma", "built/part1/beta",
        "built/part2/gamma", "built/part2/beta",
    ]  # fmt: skip
    assert layer.part1.seed == 1 * 7919 + 1


def _model_names(net: Layer, shape: tuple[int, ...], dtype: str | None = None) -> list[str]:
    nnlayers.seed(0)
    return [str(p.name) for p in Classifier(net, shape, input_dtype=dtype)._everything]


def test_built_in_networks_keep_their_parameter_names() -> None:
    """Pinned before attribute tracking came: checkpoints of these networks must still load."""
    resnet = Sequential(
        [
            Conv2D(8, 3, padding=1, seed=1),
            ResidualBlock(8, seed=2),
            ResidualBlock(8),
            ResidualBlock(16, stride=2, norm="group", groups=4, seed=3),
            GlobalAvgPool2D(),
            Affine(3),
        ]
    )
    norms = ["gamma", "beta", "running_mean", "running_var"]
    block = lambda i: (
        [f"residual_block/conv1{i}/weight"]
        + [f"residual_block/norm1{i}/{n}" for n in norms]
        + [f"residual_block/conv2{i}/weight"]
        + [f"residual_block/norm2{i}/{n}" for n in norms]
    )
    got = _model_names(resnet, (3, 8, 8))
    assert got == ["conv2d/weight", "conv2d/bias", *block(""), *block("_1"),
                   "residual_block/conv1_2/weight", "residual_block/norm1_2/gamma",
                   "residual_block/norm1_2/beta", "residual_block/conv2_2/weight",
                   "residual_block/norm2_2/gamma", "residual_block/norm2_2/beta",
                   "residual_block/shortcut_conv/weight", "residual_block/shortcut_norm/gamma",
                   "residual_block/shortcut_norm/beta", "affine/weight", "affine/bias"]  # fmt: skip
    # the same initial values as before too (seeds unchanged)
    conv1 = next(p for p in resnet.sublayers()[1].params if str(p.name).endswith("conv1/weight"))
    assert round(float(np.abs(conv1.numpy().astype(np.float64)).sum()), 3) == 77.944

    def encoder() -> L.TransformerEncoder:
        layer = L.TransformerEncoderLayer(2, 16, norm_first=True, seed=4)
        return L.TransformerEncoder(layer, 2, norm=LayerNorm())

    net = Sequential([L.Embedding(11, 8, seed=1), encoder(), encoder(), L.Flatten(), Affine(3)])
    got = _model_names(net, (6,), "int64")
    assert got[:4] == ["embedding/weight", "transformer_encoder/layers.0/norm1/gamma",
                       "transformer_encoder/layers.0/norm1/beta",
                       "transformer_encoder/layers.0/self_attn/in_weight"]  # fmt: skip
    assert got[25:29] == ["transformer_encoder/norm/gamma", "transformer_encoder/norm/beta",
                          "transformer_encoder/layers.0/norm1_1/gamma",
                          "transformer_encoder/layers.0/norm1_1/beta"]  # fmt: skip
    assert got[-4:] == ["transformer_encoder/norm_1/gamma", "transformer_encoder/norm_1/beta",
                        "affine/weight", "affine/bias"]  # fmt: skip

    rnns = Sequential(
        [
            L.RNNStack.of("lstm", 4, 2, bidirectional=True, seed=0),
            L.Bidirectional(L.GRU(4, return_sequences=True)),
            L.Bidirectional(L.LSTM(4, return_sequences=True, seed=3)),
            L.LSTM(4, seed=1),
        ]
    )
    got = _model_names(rnns, (5, 3))
    assert got[:3] == ["rnn_stack/0/forward/weight", "rnn_stack/0/forward/recurrent_weight",
                       "rnn_stack/0/forward/bias"]  # fmt: skip
    assert got[9:14] == ["rnn_stack/1/backward/weight", "rnn_stack/1/backward/recurrent_weight",
                         "rnn_stack/1/backward/bias", "bidirectional/forward/weight",
                         "bidirectional/forward/bias"]  # fmt: skip
    assert "bidirectional/backward_1/recurrent_weight" in got
    assert got[-3:] == ["lstm/weight", "lstm/recurrent_weight", "lstm/bias"]
    nested = Sequential([Sequential([Affine(4), Affine(4)], seed=1), LayerNorm(), Affine(3)])
    assert _model_names(nested, (4,)) == [
        "affine/weight", "affine/bias", "affine_1/weight", "affine_1/bias", "layer_norm/gamma",
        "layer_norm/beta", "affine_2/weight", "affine_2/bias",
    ]  # fmt: skip
