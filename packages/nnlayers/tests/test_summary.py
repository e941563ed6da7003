"""``nnlayers.summary``: counts by hand, shapes as running the network gives them, nesting and
depth, shared and non-trainable parameters, graphs, errors, and that nothing runs."""

from __future__ import annotations

import doctest
import importlib
import math
import threading
from pathlib import Path

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.graph.graph import Graph
from nnlayers.layers import (
    LSTM,
    Affine,
    BatchNorm,
    Conv2D,
    Embedding,
    Flatten,
    GlobalAvgPool2D,
    Layer,
    LayerNorm,
    Pool2D,
    ResidualBlock,
    Sequential,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from nnlayers.summary import Summary

CALL = Layer.__dict__["__call__"]


def _cnn() -> Sequential:
    return Sequential(
        [Conv2D(8, 3, padding="same"), BatchNorm(), "relu", Pool2D(2), Flatten(), Affine(10)],
        seed=0,
    )


def _all_layers(layer: Layer) -> list[Layer]:
    out = [layer]
    for part in layer.sublayers():
        out += _all_layers(part)
    return out


def _shapes_when_run(network: Layer, inputs: list[np.ndarray], **kwargs) -> list[tuple]:
    """Each layer application's output shapes, in the order the layers are applied (a parent
    before its parts), from running the network on ``inputs``."""
    placeholders = [ex.placeholder(a.shape, a.dtype, name=f"x{i}") for i, a in enumerate(inputs)]
    network(*placeholders, **kwargs)  # builds the parts, so that all of them can be watched
    applied: list[list] = []
    for layer in _all_layers(network):

        def watched(*args, _layer=layer, _forward=layer.forward, **kw):
            slot: list = []
            applied.append(slot)
            out = _forward(*args, **kw)
            slot.extend(_flatten(out))
            return out

        layer.forward = watched  # type: ignore[method-assign]
    try:
        network(*placeholders, **kwargs)
    finally:
        for layer in _all_layers(network):
            del layer.forward
    flat = [e for slot in applied for e in slot]
    graph = nnlayers.compile([ex.sum(flat[0]), *flat], wrt=[], training=False)
    values = graph.forward(dict(zip(placeholders, inputs)))[1:]
    shapes = [tuple(v.shape) for v in values]
    out, i = [], 0
    for slot in applied:
        out.append(tuple(shapes[i : i + len(slot)]))
        i += len(slot)
    return out


def _flatten(value) -> list:
    if isinstance(value, list | tuple):
        return [e for item in value for e in _flatten(item)]
    return [value]


def _as_run(shapes: tuple, batch: int) -> tuple:
    return tuple(tuple(batch if d is None else d for d in s) for s in shapes)


# -- counts and shapes ---------------------------------------------------------------------------
def test_small_cnn_counts_by_hand_and_shapes_as_running_it_gives(capsys) -> None:
    net = _cnn()
    model = nnlayers.Classifier(net, (3, 8, 8))
    s = nnlayers.summary(model)

    conv = 8 * 3 * 3 * 3 + 8  # O*C*KH*KW weights + O biases
    norm_weights, norm_stats = 8 + 8, 8 + 8  # gamma, beta; running mean and variance
    affine = (8 * 4 * 4) * 10 + 10
    assert [(r.name, r.type, r.depth, r.params) for r in s.rows] == [
        ("sequential", "Sequential", 0, 0),
        ("conv2d", "Conv2D", 1, conv),
        ("batch_norm", "BatchNorm", 1, norm_weights + norm_stats),
        ("pool2d", "Pool2D", 1, 0),
        ("flatten", "Flatten", 1, 0),
        ("affine", "Affine", 1, affine),
    ]
    assert s.total_params == conv + norm_weights + norm_stats + affine == 1546
    assert s.trainable_params == conv + norm_weights + affine
    assert s.non_trainable_params == norm_stats
    assert s.rows[2].non_trainable_params == norm_stats
    actual = [*model.params, *model.buffers]
    assert s.total_params == sum(math.prod(p.shape) for p in actual)
    assert {id(p) for p in s.parameters} == {id(p) for p in actual}
    assert s.param_bytes == 4 * s.total_params and s.trainable_param_bytes == 4 * s.trainable_params
    # conv, batch norm (8, 8, 8); pool, flatten 128; logits 10: float32, one example
    assert s.activation_bytes == 4 * (512 + 512 + 128 + 128 + 10)
    assert s.input_bytes == 4 * 3 * 8 * 8
    assert s.inputs[0].shape == (None, 3, 8, 8)

    x = np.random.default_rng(0).normal(size=(5, 3, 8, 8)).astype(np.float32)
    run = _shapes_when_run(net, [x])
    assert [_as_run(r.output_shapes, 5) for r in s.rows] == run
    assert s.rows[0].output_shape == (None, 10)
    assert model.predict_proba(x).shape == _as_run(s.rows[0].output_shapes, 5)[0]

    text = str(s)
    assert text == repr(s)
    assert "conv2d (Conv2D)" in text and "(None, 8, 8, 8)" in text and "1,290" in text
    assert "Total params: 1,546 (6.04 KiB)" in text
    assert "Non-trainable params: 16 (64 B)" in text
    assert model.summary() is None  # prints, as Keras does
    assert capsys.readouterr().out == text + "\n"
    lines: list[str] = []
    model.summary(depth=0, print_fn=lines.append)
    assert lines == [str(nnlayers.summary(model, depth=0))]


def test_nested_layers_depth_and_the_param_column_summing_to_the_total() -> None:
    inner = Sequential([Affine(6), LayerNorm()], name="inner")
    net = Sequential(
        [Conv2D(4, 3, padding="same"), ResidualBlock(8, stride=2), GlobalAvgPool2D(), inner],
        seed=1,
    )
    every = {}
    for depth in (0, 1, 2, 3):
        s = nnlayers.summary(net, (3, 8, 8), depth=depth)
        every[depth] = s
        assert sum(r.params for r in s.rows) == s.total_params
        assert max(r.depth for r in s.rows) == min(depth, 2)
    actual = [*net.params, *net.buffers]
    assert every[0].total_params == sum(math.prod(p.shape) for p in actual)
    assert [r.name for r in every[0].rows] == ["sequential"]
    assert every[0].rows[0].params == every[0].total_params
    top = every[1]
    assert [r.name for r in top.rows] == [
        "sequential", "conv2d", "residual_block", "global_pool2d", "inner",
    ]  # fmt: skip
    block = 4 * 8 * 9 + 8 * 8 * 9 + 4 * 8 + 3 * (8 + 8 + 8 + 8)  # convs (no bias), 3 batch norms
    assert top.rows[2].params == block
    assert top.rows[4].params == 8 * 6 + 6 + 6 + 6
    deep = every[2]
    assert [(r.name, r.depth) for r in deep.rows[2:9]] == [
        ("residual_block", 1),
        ("residual_block/conv1", 2),
        ("residual_block/norm1", 2),
        ("residual_block/conv2", 2),
        ("residual_block/norm2", 2),
        ("residual_block/shortcut_conv", 2),
        ("residual_block/shortcut_norm", 2),
    ]
    assert deep.rows[2].params == 0 and deep.rows[3].params == 4 * 8 * 9
    assert "    conv1 (Conv2D)" in str(deep)  # indented under its block, named without it
    assert [r.name for r in every[3].rows] == [r.name for r in deep.rows]  # nothing deeper
    # the totals and activations do not depend on what is shown
    assert {s.total_params for s in every.values()} == {top.total_params}
    assert {s.activation_bytes for s in every.values()} == {top.activation_bytes}

    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert [_as_run(r.output_shapes, 2) for r in deep.rows] == _shapes_when_run(net, [x])


def test_transformer_layers() -> None:
    d, ff = 32, 64
    block = TransformerEncoderLayer(4, dim_feedforward=ff, seed=0)
    s = nnlayers.summary(block, (10, d))
    attention = d * 3 * d + 3 * d + d * d + d  # in_weight, in_bias, out_weight, out_bias
    assert [(r.name, r.type, r.params) for r in s.rows] == [
        ("transformer_encoder_layer", "TransformerEncoderLayer", 0),
        ("transformer_encoder_layer/self_attn", "MultiHeadAttention", attention),
        ("transformer_encoder_layer/norm1", "LayerNorm", 2 * d),
        ("transformer_encoder_layer/linear1", "Affine", d * ff + ff),
        ("transformer_encoder_layer/linear2", "Affine", ff * d + d),
        ("transformer_encoder_layer/norm2", "LayerNorm", 2 * d),
    ]
    assert s.total_params == sum(math.prod(p.shape) for p in block.params)
    assert [r.output_shape for r in s.rows] == [(None, 10, d)] * 3 + [(None, 10, ff)] + [
        (None, 10, d)
    ] * 2
    assert "  self_attn (MultiHeadAttention)" in str(s)
    x = np.random.default_rng(2).normal(size=(3, 10, d)).astype(np.float32)
    assert [_as_run(r.output_shapes, 3) for r in s.rows] == _shapes_when_run(block, [x])

    stack = TransformerEncoder(TransformerEncoderLayer(4, ff, norm_first=True, seed=0), 2)
    deep = nnlayers.summary(stack, (7, d), call_kwargs={"causal": True})
    assert [r.name for r in deep.rows if r.depth == 1] == [
        "transformer_encoder/layers.0",
        "transformer_encoder/layers.1",
    ]
    assert deep.total_params == 2 * s.total_params
    assert nnlayers.summary(stack, depth=1).total_params == deep.total_params  # built: knows


def test_non_trainable_parameters_running_statistics_and_frozen_weights() -> None:
    first, norm = Affine(5), BatchNorm()
    net = Sequential([first, norm, Affine(2)], seed=3)
    before = nnlayers.summary(net, (4,))
    assert before.non_trainable_params == 5 + 5  # running mean and variance
    if hasattr(first, "freeze"):
        first.freeze()
    else:  # parameters without freeze(): a parameter that is not trainable counts the same
        for p in first.params:
            p.trainable = False
    after = nnlayers.summary(net, (4,))
    assert after.total_params == before.total_params
    assert after.non_trainable_params == 4 * 5 + 5 + 10
    assert after.rows[1].trainable_params == 0 and after.rows[1].non_trainable_params == 25
    assert f"Non-trainable params: {after.non_trainable_params:,}" in str(after)
    assert after.param_bytes - after.trainable_param_bytes == 4 * after.non_trainable_params


def test_shared_layers_and_tied_weights_are_counted_once() -> None:
    shared, other = Affine(3), Affine(3)

    def twice(h):
        return shared(other(shared(h)))

    s = nnlayers.summary(twice, (3,))
    assert [(r.name, r.params, r.shared) for r in s.rows] == [
        ("affine", 12, False),
        ("affine_1", 12, False),
        ("affine", 0, True),
    ]
    assert s.total_params == 24
    assert "(shared)" in str(s).splitlines()[6]


def test_multiple_outputs_dtypes_and_unknown_lengths() -> None:
    lstm = LSTM(8, return_sequences=True, return_state=True, seed=0)
    s = nnlayers.summary(lstm, (5, 3))
    assert s.rows[0].output_shapes == ((None, 5, 8), (None, 8), (None, 8))
    assert s.rows[0].params == 4 * 8 * (3 + 8) + 4 * 8
    assert "[(None, 5, 8), (None, 8), (None, 8)]" in str(s)
    assert s.activation_bytes == 4 * (40 + 8 + 8)

    words = nnlayers.summary(Embedding(100, 16), (7,), input_dtype="int64")
    assert words.inputs[0].dtype == np.dtype("int64") and words.input_bytes == 8 * 7
    assert words.rows[0].output_shape == (None, 7, 16)

    varying = nnlayers.summary(
        Sequential([Embedding(50, 4), Affine(2)]), (None,), input_dtype="int64"
    )
    assert varying.rows[0].output_shape == (None, None, 2)
    assert varying.activation_bytes is None
    assert "unknown (a size other than the batch is known only when fed)" in str(varying)


def test_graphs_of_plain_models_and_expressions_op_by_op() -> None:
    x = ex.placeholder((None, 3), name="x")
    y = ex.placeholder((None, 1), name="y")
    prediction = Affine(1, seed=0)(ex.relu(Affine(4, seed=0)(x)))
    model = nnlayers.Model(ex.squared_error(prediction, y), inputs=[x, y], outputs=prediction)
    layers = nnlayers.summary(model)  # by default, the layers it holds
    assert [(r.name, r.output_shape, r.params) for r in layers.rows] == [
        ("affine", (None, 4), 16),
        ("affine_1", (None, 1), 5),
    ]
    s = nnlayers.summary(model, ops=True)
    assert s.total_params == 3 * 4 + 4 + 4 + 1 == sum(p.size for p in model.params)
    assert sum(r.params for r in s.rows) == s.total_params
    assert [r.type for r in s.rows][:5] == ["matmul", "add", "relu", "matmul", "add"]
    assert s.rows[0].name == "affine/weight" and s.rows[3].name == "affine_1/weight"
    assert s.title.startswith("Model (graph), inputs (None, 3) float32, (None, 1) float32")

    e = nnlayers.summary(prediction)
    assert e.total_params == s.total_params and len(e.rows) == 5
    assert e.activation_bytes == 4 * (4 + 4 + 4 + 1 + 1)


def test_a_network_that_makes_new_layers_when_called_is_summarised_by_its_layers() -> None:
    nnlayers.seed(5)
    model = nnlayers.Classifier(lambda h: Affine(3)(h), (4,))
    nnlayers.seed(7)
    s = nnlayers.summary(model)
    after = nnlayers.init.next_seed()
    nnlayers.seed(7)
    assert after == nnlayers.init.next_seed()  # the summary drew no seed
    assert s.title.startswith("Classifier (layers)")
    assert [(r.name, r.output_shape) for r in s.rows] == [("affine", (None, 3))]
    assert {id(p) for p in s.parameters} == {id(p) for p in model.params}
    assert s.total_params == 4 * 3 + 3


# -- nothing runs ----------------------------------------------------------------------------
def test_nothing_is_compiled_or_run(monkeypatch) -> None:
    model = nnlayers.Classifier(_cnn(), (3, 8, 8))

    def refuse(*args, **kwargs):
        raise AssertionError("summary compiled or ran a graph")

    monkeypatch.setattr(Graph, "__init__", refuse)
    monkeypatch.setattr(Graph, "forward", refuse)
    assert nnlayers.summary(model).total_params == 1546
    values = {id(p): p.value for p in model.params}
    nnlayers.summary(Sequential([Affine(3)]), (2,))  # builds an unapplied layer, runs nothing
    assert all(p.value is values[id(p)] for p in model.params)
    assert Layer.__dict__["__call__"] is CALL


def test_other_threads_applying_layers_meanwhile_are_not_recorded() -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []

    class Slow(Layer):
        def forward(self, x):
            started.set()
            release.wait(5)
            return x * 2.0

    def apply_elsewhere() -> None:
        started.wait(5)
        out = Affine(2)(ex.placeholder((None, 3)))  # runs while the summary is recording
        seen.append(out.shape[1])
        release.set()

    worker = threading.Thread(target=apply_elsewhere)
    worker.start()
    s = nnlayers.summary(Slow(), (3,))
    worker.join(10)
    assert seen == [2]
    assert [r.type for r in s.rows] == ["Slow"]


# -- conveniences and errors ---------------------------------------------------------------------
def test_layer_summary_prints_and_a_built_layer_knows_its_input(capsys) -> None:
    net = _cnn()
    net(ex.placeholder((None, 3, 8, 8)))
    assert net.summary() is None
    printed = capsys.readouterr().out
    assert printed == str(nnlayers.summary(net, (3, 8, 8))) + "\n"
    assert printed.startswith("Sequential 'sequential', input (None, 3, 8, 8) float32")
    lines: list[str] = []
    Affine(2).summary((5,), depth=0, print_fn=lines.append)
    assert "Total params: 12 (48 B)" in lines[0]


def test_errors_name_the_layer_and_what_to_do() -> None:
    with pytest.raises(
        ValueError, match=r"Sequential 'sequential' has not been applied.*input_shape="
    ):
        nnlayers.summary(Sequential([Affine(2)]))
    with pytest.raises(ValueError, match=r"function .*<lambda>.* is no layer.*input_shape="):
        nnlayers.summary(lambda h: h)
    with pytest.raises(
        nnlayers.ShapeError,
        match=r"summary of Sequential 'net': cannot infer the output of Conv2D 'conv2d' "
        r"\(inside Sequential 'net'\) for input \(None, 5\) float32:\n  Conv2D 'conv2d': needs",
    ):
        nnlayers.summary(Sequential([Flatten(), Conv2D(3, 3)], name="net"), (5,))
    assert Layer.__dict__["__call__"] is CALL  # the hook is gone after an error too

    # an op whose shapes clash is found by inference, and blamed on the innermost layer
    wrong = Sequential([Affine(4), lambda h: h @ ex.constant(np.ones((5, 2)))], name="outer")
    with pytest.raises(
        nnlayers.ShapeError,
        match=r"output of Sequential 'outer' \(inside Sequential 'sequential'\) for input "
        r"\(None, 5\) float32:\n  matmul: shapes \(None, 4\) and \(5, 2\)",
    ):
        nnlayers.summary(Sequential([wrong]), (5,))

    model = nnlayers.Classifier(Affine(2), (3,))
    with pytest.raises(ValueError, match="Classifier knows its input shapes"):
        nnlayers.summary(model, (3,))
    with pytest.raises(ValueError, match="depth must be a non-negative integer"):
        nnlayers.summary(model, depth=-1)
    with pytest.raises(TypeError, match="give a model, a layer"):
        nnlayers.summary(42)


def test_docstring_examples() -> None:
    module = importlib.import_module("nnlayers.summary")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
    assert isinstance(nnlayers.summary(Affine(1), (1,)), Summary)


def test_the_documented_example_prints_what_the_docs_show(capsys) -> None:
    text = (Path(__file__).parents[1] / "docs" / "training.md").read_text(encoding="utf-8")
    section = text.split("### Summary:", 1)[1].split("\n### ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("prints\n\n```\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "training.md", "exec"), {})
    assert capsys.readouterr().out == shown
