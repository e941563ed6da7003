"""ONNX export: every layer kind the export supports, run in onnxruntime and compared with
nnlayers' own eval-phase outputs (float32, 1e-4 relative), on another batch size than the
example's; errors that name what cannot be exported; files written atomically."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.export import CONVERTERS, NOT_EXPORTED, ExportError
from nnlayers.layers import (
    GRU,
    LSTM,
    RNN,
    Affine,
    BatchNorm,
    Bidirectional,
    Conv2D,
    Conv2DTranspose,
    Dropout,
    Embedding,
    Flatten,
    GlobalMaxPool2D,
    GroupNorm,
    LayerNorm,
    MultiHeadAttention,
    Pool2D,
    Sequential,
    SinusoidalPositionalEncoding,
    TransformerEncoderLayer,
)
from nnlayers.ops.base import REGISTRY

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DOCS = Path(__file__).resolve().parents[1] / "docs"
RTOL = 1e-4


@pytest.fixture
def ort() -> Any:
    """onnxruntime (the test skips, saying how to install it, where onnx or it is missing)."""
    for name in ("onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f'{name} is not installed: pip install "nnlayers[onnx]"')
    import onnxruntime

    return onnxruntime


def example(name: str) -> Any:
    """An example script as a module (its functions, without running ``main``)."""
    import importlib.util

    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(
            f"export_example_{name}", EXAMPLES / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


def session(ort: Any, path: Path) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ours(outputs: dict[str, ex.Expr], feeds: dict[Any, np.ndarray]) -> dict[str, np.ndarray]:
    """nnlayers' eval-phase values of ``outputs``, as host arrays."""
    graph = nnlayers.compile(list(outputs.values()), wrt=[], training=False)
    values = graph.forward(feeds, keep_for_backward=False)
    return {k: np.asarray(graph.xp.to_numpy(v)) for k, v in zip(outputs, values, strict=True)}


def compare(
    ort: Any,
    path: Path,
    outputs: dict[str, ex.Expr],
    feeds: dict[ex.Placeholder, np.ndarray],
    label: str,
) -> dict[str, float]:
    """Run the file on ``feeds`` (by input name) and assert it matches nnlayers' outputs;
    prints and returns the largest absolute difference per output."""
    import onnx

    onnx.checker.check_model(str(path), full_check=True)  # strict shape inference agrees
    run = session(ort, path)
    names = [i.name for i in run.get_inputs()]
    by_name = {p.name: v for p, v in feeds.items()}
    assert sorted(names) == sorted(by_name)
    got = dict(zip(outputs, run.run(list(outputs), {n: by_name[n] for n in names}), strict=True))
    want = ours(outputs, dict(feeds))
    differences = {}
    for name, expected in want.items():
        actual = got[name]
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, name
        if expected.dtype.kind != "f":
            np.testing.assert_array_equal(actual, expected, err_msg=f"{label}: {name}")
            differences[name] = 0.0
            continue
        scale = max(float(np.abs(expected).max(initial=0.0)), 1e-3)
        np.testing.assert_allclose(
            actual, expected, rtol=RTOL, atol=RTOL * scale, err_msg=f"{label}: {name}"
        )
        differences[name] = float(np.abs(actual - expected).max(initial=0.0))
    print(
        f"{label}: max |onnxruntime - nnlayers| "
        + ", ".join(f"{k} {v:.2e}" for k, v in differences.items())
    )
    return differences


def batch_axis(ort: Any, path: Path) -> list[Any]:
    """The first dimension of each input of the file, as onnxruntime reports it."""
    return [i.shape[0] for i in session(ort, path).get_inputs()]


def randomize_statistics(model: nnlayers.Model, seed: int = 0) -> None:
    """Batch-norm running statistics away from 0 and 1, as after training."""
    rng = np.random.default_rng(seed)
    for p in model.buffers:
        if p.name.endswith("running_mean"):
            p.assign(rng.normal(0.0, 0.2, p.shape).astype(p.dtype))
        elif p.name.endswith("running_var"):
            p.assign(rng.uniform(0.5, 2.0, p.shape).astype(p.dtype))


# -- models -----------------------------------------------------------------------------------
def test_mlp_classifier_on_any_batch_size(ort, tmp_path) -> None:
    rng = np.random.default_rng(0)
    net = Sequential(
        [
            Affine(16, activation="relu"),
            BatchNorm(),
            Dropout(0.5),
            Affine(16, activation="tanh"),
            Affine(3),
        ],
        seed=0,
    )
    model = nnlayers.Classifier(net, (4,))
    randomize_statistics(model)
    path = tmp_path / "mlp.onnx"
    written = nnlayers.export.onnx(model, path, rng.normal(size=(5, 4)).astype("float32"))
    assert written == path and path.is_file()
    assert batch_axis(ort, path) == ["batch"]
    x = rng.normal(size=(9, 4)).astype("float32")  # not the example's batch size
    (inputs,) = [p for p in model.inputs if p.name == "inputs"]
    compare(ort, path, model.outputs, {inputs: x}, "MLP with dense batch norm")
    (probabilities,) = session(ort, path).run(["probabilities"], {"inputs": x})
    np.testing.assert_allclose(probabilities, model.predict_proba(x), rtol=RTOL, atol=1e-6)


def test_mixed_precision_model(ort, tmp_path, xp) -> None:
    if not xp.__array_namespace_info__().dtypes(kind="float16"):
        pytest.skip(f"the {xp.name} device has no float16")
    net = Sequential([Affine(16, activation="relu"), BatchNorm(), Affine(3)], seed=0)
    model = nnlayers.Classifier(net, (4,), precision="mixed_float16")
    x = np.random.default_rng(12).normal(size=(6, 4)).astype("float32")
    path = nnlayers.export.onnx(model, tmp_path / "mixed.onnx", x[:2], check=True)
    (got,) = session(ort, path).run(["probabilities"], {"inputs": x})
    want = model.predict_proba(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3)
    print(f"mixed float16 MLP: max |onnxruntime - nnlayers| {np.abs(got - want).max():.2e}")


def test_parameters_become_initializers_under_their_names(ort, tmp_path) -> None:
    import onnx

    model = nnlayers.Classifier(example("resnet").network(4, 2, seed=0), (1, 8, 8))
    path = nnlayers.export.onnx(model, tmp_path / "resnet.onnx", np.zeros((2, 1, 8, 8)))
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    initializers = {t.name for t in proto.graph.initializer}
    names = {str(p.name) for p in [*model.params, *model.buffers]}
    assert names <= initializers
    assert [i.name for i in proto.graph.input] == ["inputs"]
    assert [o.name for o in proto.graph.output] == ["probabilities"]
    assert proto.opset_import[0].version == nnlayers.export.DEFAULT_OPSET


def test_resnet_with_global_pooling_and_batch_norm(ort, tmp_path) -> None:
    model = nnlayers.Classifier(example("resnet").network(4, 2, seed=1), (1, 8, 8))
    randomize_statistics(model)
    outputs = {"logits": model.logits, "probabilities": model.probabilities}
    path = nnlayers.export.onnx(outputs, tmp_path / "resnet.onnx", np.zeros((2, 1, 8, 8)))
    x = np.random.default_rng(1).normal(size=(5, 1, 8, 8)).astype("float32")
    compare(ort, path, outputs, {model.inputs[0]: x}, "resnet (digits, 2 stages)")


def test_trained_digits_cnn_with_batch_norm_and_pooling(ort, tmp_path) -> None:
    pytest.importorskip("sklearn", reason="the digits need scikit-learn")
    from nnlayers.datasets import load_digits
    from nnlayers.demo import network
    from nnlayers.optim import Adam

    digits = load_digits()
    x, y = digits.inputs[:320], digits.targets[:320]
    model = nnlayers.Classifier(network(0), (1, 8, 8), optimizer=Adam(2e-3))
    nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=32, seed=0), epochs=1, progress=False)
    outputs = {"logits": model.logits, "probabilities": model.probabilities}
    path = nnlayers.export.onnx(model, tmp_path / "digits.onnx", x[:4], check=True)
    path = nnlayers.export.onnx(outputs, path, x[:4])
    compare(ort, path, outputs, {model.inputs[0]: digits.inputs[1000:1037]}, "digits CNN")


def test_conv_transpose_group_norm_and_pooling_variants(ort, tmp_path) -> None:
    net = Sequential(
        [
            Conv2D(4, 3, padding=1, stride=2),
            BatchNorm(),
            "leaky_relu",
            Conv2D(6, 3, padding="same", dilation=2, activation="elu"),
            Pool2D(3, stride=1, padding=1),
            Pool2D(2, mode="avg", stride=1, padding=1),
            Pool2D(2, mode="avg"),
            Conv2DTranspose(5, 3, stride=2, padding=1, output_padding=1),
            GroupNorm(5),
            "gelu",
            Conv2DTranspose(3, 2, stride=2, activation="softplus"),
            GlobalMaxPool2D(),
            Affine(4),
        ],
        seed=2,
    )
    model = nnlayers.Classifier(net, (2, 12, 12))
    randomize_statistics(model, 2)
    path = nnlayers.export.onnx(
        {"logits": model.logits}, tmp_path / "conv.onnx", np.zeros((1, 2, 12, 12))
    )
    x = np.random.default_rng(2).normal(size=(3, 2, 12, 12)).astype("float32")
    compare(ort, path, {"logits": model.logits}, {model.inputs[0]: x}, "conv-transpose/group-norm")


def test_average_pooling_without_padded_zeros(ort, tmp_path) -> None:
    x = ex.placeholder((None, 2, 7, 7), name="images")
    y = ex.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
    z = ex.avg_pool2d(x, 3, stride=2, padding=1)
    outputs = {"without": y, "with": z, "max": ex.max_pool2d(x, 3, 2, 1)}
    path = nnlayers.export.onnx(outputs, tmp_path / "pool.onnx")
    feed = np.random.default_rng(3).normal(size=(2, 2, 7, 7)).astype("float32")
    compare(ort, path, outputs, {x: feed}, "pooling")


def test_char_lstm_and_its_generation_step(ort, tmp_path) -> None:
    rng = np.random.default_rng(4)
    nnlayers.seed(4)
    embed, lstm, head = Embedding(20, 8), LSTM(16, return_sequences=True), Affine(20)
    model = nnlayers.Classifier(
        Sequential([embed, lstm, head]), (7,), input_dtype="int64", target_shape=(7,)
    )
    ids = rng.integers(0, 20, (3, 7))
    path = nnlayers.export.onnx(model, tmp_path / "char_lstm.onnx", ids)
    feeds = {model.inputs[0]: rng.integers(0, 20, (6, 7))}
    compare(ort, path, model.outputs, feeds, "char LSTM")

    # char_lstm.py's generation step: one character and the carried state (h, c) in and out
    char = ex.placeholder((None, 1), "int64", name="char")
    h0 = ex.placeholder((None, 16), name="h")
    c0 = ex.placeholder((None, 16), name="c")
    logits = head(lstm(embed(char), initial_state=(h0, c0)))[:, 0]
    h1, c1 = lstm.state
    step = {"probabilities": ex.softmax(logits), "h_next": h1, "c_next": c1}
    path = nnlayers.export.onnx(step, tmp_path / "step.onnx")
    state = {
        h0: rng.normal(size=(2, 16)).astype("float32"),
        c0: rng.normal(size=(2, 16)).astype("float32"),
    }
    compare(ort, path, step, {char: np.array([[3], [11]]), **state}, "LSTM step with state")


def test_gru_and_rnn_layers_fused_and_unrolled(ort, tmp_path) -> None:
    import onnx

    rng = np.random.default_rng(5)
    nnlayers.seed(5)
    net = Sequential([Embedding(20, 8), GRU(12, return_sequences=True), GRU(6), Affine(5)])
    model = nnlayers.Classifier(net, (7,), input_dtype="int64")
    path = nnlayers.export.onnx(model, tmp_path / "gru.onnx", rng.integers(0, 20, (2, 7)))
    kinds = [n.op_type for n in onnx.load(str(path)).graph.node]
    # the GRUs take x and their input weights: the head's is the one MatMul left
    assert kinds.count("GRU") == 2 and kinds.count("MatMul") == 1
    compare(ort, path, model.outputs, {model.inputs[0]: rng.integers(0, 20, (4, 7))}, "GRU")

    x = ex.placeholder((None, 6, 3), name="x")
    h0 = ex.placeholder((None, 5), name="h0")
    outputs = {
        "rnn": RNN(4, return_sequences=True, seed=0)(x),
        "gru_unrolled": GRU(5, fused=False, seed=1)(x, initial_state=h0),
        "gru_state": GRU(5, seed=2)(x, initial_state=h0),
        "lstm_unrolled": LSTM(4, fused=False, return_sequences=True, seed=3)(x),
        # a projection that is not x @ weight + bias: the GRU op reads it through an identity
        "gru_sequence": ex.gru_sequence(
            ex.tanh(x @ np.full((3, 15), 0.1, "float32")),
            np.eye(5, 15, dtype="float32"),
            np.linspace(-1, 1, 15, dtype="float32"),
        ),
    }
    path = nnlayers.export.onnx(outputs, tmp_path / "recurrent.onnx")
    feeds = {
        x: rng.normal(size=(3, 6, 3)).astype("float32"),
        h0: rng.normal(size=(3, 5)).astype("float32"),
    }
    compare(ort, path, outputs, feeds, "RNN and unrolled GRU/LSTM")


def test_bidirectional_lstm_over_padded_sequences(ort, tmp_path) -> None:
    rng = np.random.default_rng(6)
    tokens = ex.placeholder((None, 9), "int64", name="tokens")
    lengths = ex.placeholder((None,), "int64", name="lengths")
    h = Embedding(11, 8, seed=0)(tokens)
    last = Bidirectional(LSTM(6, seed=1))(h, lengths=lengths)
    every = Bidirectional(GRU(4, return_sequences=True, seed=2), merge_mode="sum")(h)
    outputs = {"logits": Affine(2, seed=3)(last), "every": every}
    examples = {tokens: rng.integers(0, 11, (2, 9)), lengths: np.array([9, 4])}
    path = nnlayers.export.onnx(outputs, tmp_path / "bilstm.onnx", examples)
    assert batch_axis(ort, path) == ["batch", "batch"]
    feeds = {tokens: rng.integers(0, 11, (5, 9)), lengths: np.array([9, 3, 1, 5, 8])}
    compare(ort, path, outputs, feeds, "bidirectional LSTM/GRU")


@pytest.mark.parametrize("opset", [nnlayers.export.MIN_OPSET, nnlayers.export.DEFAULT_OPSET])
def test_char_transformer(ort, tmp_path, opset) -> None:
    gpt = example("char_transformer").CharGPT(30, 16, 2, 4, 12, 0.1, seed=0)
    model = nnlayers.Classifier(gpt, (12,), input_dtype="int64", target_shape=(12,))
    rng = np.random.default_rng(7)
    path = nnlayers.export.onnx(
        model, tmp_path / "gpt.onnx", rng.integers(0, 30, (1, 12)), opset=opset
    )
    outputs = {"logits": model.logits, "probabilities": model.probabilities}
    path = nnlayers.export.onnx(outputs, path, opset=opset)
    compare(
        ort,
        path,
        outputs,
        {model.inputs[0]: rng.integers(0, 30, (3, 12))},
        f"char transformer (causal, pre-norm, opset {opset})",
    )


def test_encoder_layer_with_masks_and_cross_attention(ort, tmp_path) -> None:
    rng = np.random.default_rng(8)
    x = ex.placeholder((None, 5, 8), name="x")
    memory = ex.placeholder((None, 3, 6), name="memory")
    padding = ex.placeholder((None, 5), "bool", name="padding")
    encoder = TransformerEncoderLayer(2, 16, activation="gelu_exact", seed=0)
    y = encoder(SinusoidalPositionalEncoding()(x), key_padding_mask=padding)
    attend = MultiHeadAttention(2, units=4, seed=1)
    z, weights = attend(y, memory, return_attention_scores=True)
    allowed = ex.scaled_dot_product_attention(
        ex.reshape(x, (-1, 1, 5, 8)),
        ex.reshape(x, (-1, 1, 5, 8)),
        ex.reshape(x, (-1, 1, 5, 8)),
        np.tril(np.ones((5, 5), dtype=bool)),
        scale=0.3,
    )
    q = ex.placeholder((None, 2, None, 4), name="q")  # a length known only when fed
    causal = ex.scaled_dot_product_attention(q, q * 0.5, q, causal=True)
    outputs = {
        "encoded": y,
        "attended": z,
        "weights": weights,
        "masked": allowed,
        "causal": causal,
    }
    path = nnlayers.export.onnx(outputs, tmp_path / "encoder.onnx")
    mask = np.zeros((4, 5), dtype=bool)
    mask[:, 4] = True
    mask[1, 2:] = True
    feeds = {
        x: rng.normal(size=(4, 5, 8)).astype("float32"),
        memory: rng.normal(size=(4, 3, 6)).astype("float32"),
        padding: mask,
        q: rng.normal(size=(4, 2, 7, 4)).astype("float32"),
    }
    compare(ort, path, outputs, feeds, "encoder layer with masks, cross-attention")


@pytest.mark.parametrize(
    "opset",
    [nnlayers.export.MIN_OPSET, 18, nnlayers.export.DEFAULT_OPSET, nnlayers.export.MAX_OPSET],
)
def test_every_elementwise_reduction_and_shape_op(ort, tmp_path, opset) -> None:
    rng = np.random.default_rng(9)
    x = ex.placeholder((None, 4, 6), name="x")
    ids = ex.placeholder((None, 3), "int32", name="ids")
    w = nnlayers.Parameter(rng.normal(size=(6, 6)), name="w")
    positive = ex.exp(x) + 0.5
    h = x @ w
    outputs = {
        "activations": ex.concat(
            [
                ex.leaky_relu(x, 0.2),
                ex.elu(x, 0.7),
                ex.softplus(x),
                ex.log_sigmoid(x),
                ex.sigmoid(x),
                ex.tanh(x),
                ex.relu(x),
                ex.gelu(x),
                ex.gelu(x, approximate="none"),
                ex.softmax(x, axis=1),
                ex.log_softmax(x, axis=-1),
            ],
            axis=-1,
        ),
        "arithmetic": ex.stack(
            [
                x + 1.0,
                2.0 - x,
                x * h,
                x / positive,
                positive**x,
                ex.maximum(x, h),
                ex.minimum(x, 0.1),
                ex.clip(x, -0.5, 0.5),
                ex.clip(x, low=0.0),
                ex.sqrt(positive),
                ex.abs(x),
                ex.log(positive),
                ex.log1p(positive),
                ex.sin(x),
                ex.cos(x),
                -x,
                ex.square(x),
                positive**3,
                positive**0.5,
                positive**-1.5,
                ex.where(x > h, x, h),
                ex.stop_gradient(x),
            ],
            axis=1,
        ),
        "float64": ex.astype(x, "float64") * np.float64(1.5),
        "compare": ex.stack(
            [x < h, x <= 0.0, x > 0.0, x >= h, ex.equal(x, x), ex.not_equal(x, h)], axis=0
        ),
        "reduce": ex.concat(
            [
                ex.sum(x, axis=1),
                ex.mean(x, axis=(1, 2), keepdims=False)[:, None],
                ex.max(x, axis=-1),
                ex.min(x, axis=1),
                ex.norm(x, axis=2),
                ex.sum(x, axis=(), keepdims=False)[:, 0],
            ],
            axis=1,
        ),
        "argmax": ex.concat([ex.argmax(x, axis=1), ex.argmin(x, axis=1)], axis=1),
        "batch_mean": ex.mean(x),
        "over_the_batch": ex.mean(h, axis=0),
        "shapes": ex.reshape(ex.transpose(x, (0, 2, 1)), (-1, 3, 8))[:, ::-1, 1:7:2],
        "indexing": x[:, -1, None, ::-2]
        + x[
            :,
            1:-1,
            -1:,
        ][..., 0:1][:, None, 1],
        "split": ex.concat([ex.split(x, [1, 3], axis=1)[1], ex.split(x, 2, axis=2)[0][:, 1:3]], 2),
        "pad": ex.pad(x, ((0, 0), (1, 2), (3, 0)), value=-1.0),
        "broadcast": ex.broadcast_to(ex.sum(x, axis=2, keepdims=True), (None, 4, 6))
        + ex.broadcast_to(np.arange(6, dtype=np.float32), (2, 4, 6))[0],
        "gather": ex.take(x, ids, axis=1),
        "one_hot": ex.one_hot(ids, 5),
        "reverse": ex.reverse_sequence(x),
        "layer_norm": ex.concat(
            [
                ex.layer_norm(x, axis=(1, 2)),
                ex.layer_norm(x, np.linspace(0.5, 2, 6, dtype="float32"), None),
                ex.layer_norm(x, None, np.ones((4, 1), "float32"), axis=1),
                ex.layer_norm(x, np.full((1, 6), 2.0, "float32"), np.full((6,), -1.0, "float32")),
                LayerNorm()(x),
            ],
            axis=-1,
        ),
    }
    path = nnlayers.export.onnx(outputs, tmp_path / "ops.onnx", opset=opset)
    feeds = {
        x: rng.normal(size=(3, 4, 6)).astype("float32"),
        ids: np.array([[0, 3, 1], [2, 2, 1], [1, 0, 3]], dtype=np.int32),
    }
    compare(ort, path, outputs, feeds, f"element-wise, reductions and shapes (opset {opset})")


def test_exports_a_layer_called_on_the_example(ort, tmp_path) -> None:
    net = Sequential([Conv2D(3, 3, activation="relu"), Flatten(), Affine(2)], seed=3)
    x = np.random.default_rng(10).normal(size=(2, 1, 5, 5))  # float64: the input is float32
    path = nnlayers.export.onnx(net, tmp_path / "layer.onnx", x, check=True)
    run = session(ort, path)
    assert [(i.name, i.type) for i in run.get_inputs()] == [("inputs", "tensor(float)")]
    (got,) = run.run(None, {"inputs": x.astype("float32")})
    images = ex.placeholder((None, 1, 5, 5), name="images")
    want = ours({"y": net(images)}, {images: x.astype("float32")})["y"]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-6)


def test_check_compares_onnxruntime_with_nnlayers(ort, tmp_path, monkeypatch) -> None:
    net = Sequential([Affine(8, activation="relu"), Affine(2)], seed=0)
    model = nnlayers.Classifier(net, (3,))
    x = np.random.default_rng(11).normal(size=(4, 3)).astype("float32")
    nnlayers.export.onnx(model, tmp_path / "good.onnx", x, check=True)
    # relu exported as a sigmoid: onnxruntime runs the file, which computes something else
    monkeypatch.setitem(CONVERTERS, "relu", lambda b, node, xs: b.node("Sigmoid", xs))
    with pytest.raises(ExportError, match="onnxruntime's 'probabilities' differs from nnlayers'"):
        nnlayers.export.onnx(model, tmp_path / "bad.onnx", x, check=True)
    assert not (tmp_path / "bad.onnx").exists()
    with pytest.raises(ValueError, match="check=True needs example_inputs"):
        nnlayers.export.onnx(model, tmp_path / "bad.onnx", check=True)


# -- errors ---------------------------------------------------------------------------------------
def test_every_op_exports_but_the_losses() -> None:
    missing = sorted(set(REGISTRY) - set(CONVERTERS))
    assert missing == sorted(NOT_EXPORTED), (
        f"ops without an ONNX converter: {missing}; add one to nnlayers/export/onnx_ops.py "
        "(or to NOT_EXPORTED, with the reason)"
    )


def test_an_unsupported_op_is_named_with_its_node_and_layer(ort, tmp_path, monkeypatch) -> None:
    model = nnlayers.Classifier(Sequential([Affine(4), Affine(2, name="head")], seed=0), (3,))
    loss = model.loss.named("loss")
    with pytest.raises(ExportError) as info:
        nnlayers.export.onnx({"loss": loss}, tmp_path / "loss.onnx")
    text = str(info.value)
    assert "op 'softmax_cross_entropy' has no ONNX converter" in text
    assert "export the model's outputs, not its loss" in text
    assert "softmax_cross_entropy 'loss'" in text and "ops that export: " in text

    monkeypatch.delitem(CONVERTERS, "conv2d")
    net = Sequential([Conv2D(2, 3, name="stem"), Flatten(), Affine(2)], seed=0)
    model = nnlayers.Classifier(net, (1, 6, 6))
    with pytest.raises(ExportError) as info:
        nnlayers.export.onnx(model, tmp_path / "conv.onnx")
    text = str(info.value)
    assert text.startswith("ONNX export: op 'conv2d' has no ONNX converter (conv2d ")
    assert "in layer 'stem' (Conv2D)" in text
    assert "input 1: parameter 'stem/weight' (2, 1, 3, 3) float32" in text
    assert not list(tmp_path.iterdir())


def test_inputs_that_do_not_fit_are_refused(ort, tmp_path) -> None:
    model = nnlayers.Classifier(Sequential([Affine(2)], seed=0), (3,))
    with pytest.raises(ExportError, match=r"has shape \(4, 5\), expected \(None, 3\)"):
        nnlayers.export.onnx(model, tmp_path / "m.onnx", np.zeros((4, 5)))
    with pytest.raises(ExportError, match="2 example arrays for 1 inputs"):
        nnlayers.export.onnx(model, tmp_path / "m.onnx", [np.zeros((4, 3))] * 2)
    with pytest.raises(ExportError, match="example input 'labels' is not an input"):
        nnlayers.export.onnx(model, tmp_path / "m.onnx", {"labels": np.zeros(4)})
    with pytest.raises(ValueError, match="opset must be an int from 17 to"):
        nnlayers.export.onnx(model, tmp_path / "m.onnx", opset=16)
    with pytest.raises(TypeError, match="needs example_inputs"):
        nnlayers.export.onnx(Affine(2), tmp_path / "m.onnx")
    with pytest.raises(TypeError, match="model must be an nnlayers Model"):
        nnlayers.export.onnx(3, tmp_path / "m.onnx")
    empty = nnlayers.Model(model.loss, inputs=model.inputs)
    with pytest.raises(ExportError, match="has no outputs to export"):
        nnlayers.export.onnx(empty, tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())


def test_without_onnx_the_error_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # an import of it now fails
    model = nnlayers.Classifier(Sequential([Affine(2)], seed=0), (3,))
    with pytest.raises(ImportError, match=re.escape('pip install "nnlayers[onnx]"')):
        nnlayers.export.onnx(model, tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir())


# -- files ----------------------------------------------------------------------------------------
def test_the_file_is_written_atomically(ort, tmp_path, monkeypatch) -> None:
    import onnx

    model = nnlayers.Classifier(Sequential([Affine(2)], seed=0), (3,))
    path = tmp_path / "model.onnx"
    path.write_bytes(b"the previous export")
    os.chmod(path, 0o640)

    def broken(proto: Any, target: str, *args: Any, **kwargs: Any) -> None:
        Path(target).write_bytes(b"half a model")
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(onnx, "save_model", broken)
        with pytest.raises(OSError, match="disk full"):
            nnlayers.export.onnx(model, path)
    assert path.read_bytes() == b"the previous export"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]  # no temporaries left

    monkeypatch.delitem(CONVERTERS, "matmul")  # an export that fails before writing
    with pytest.raises(ExportError):
        nnlayers.export.onnx(model, path)
    assert path.read_bytes() == b"the previous export"
    monkeypatch.undo()

    nnlayers.export.onnx(model, path)
    assert onnx.load(str(path)).graph.output[0].name == "probabilities"
    assert path.stat().st_mode & 0o777 == 0o640  # the replaced file's mode is kept
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        nnlayers.export.onnx(model, tmp_path / "missing" / "model.onnx")
    with pytest.raises(IsADirectoryError):
        nnlayers.export.onnx(model, tmp_path)


def test_docstring_examples(ort) -> None:
    import doctest

    for module in (nnlayers.export, sys.modules["nnlayers.export.onnx"]):
        assert doctest.testmod(module).failed == 0


def test_the_documented_example_runs(ort, tmp_path, monkeypatch) -> None:
    text = (DOCS / "training.md").read_text(encoding="utf-8")
    section = text.split("## Export to ONNX", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "training.md", "exec"), {})
    assert (tmp_path / "classifier.onnx").is_file()
