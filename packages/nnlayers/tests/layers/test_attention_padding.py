"""Attention over a padded batch: a sequence that is all padding (its key-padding mask True
throughout), left out of the loss with ``where``, gives a finite loss and finite gradients, and
the gradients of the batch without it: it contributes nothing (before, every attention weight's
gradient was NaN, as a query without keys gave NaN)."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import (
    Affine,
    Embedding,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TransformerEncoderLayer,
)
from nnlayers.testing.oracle import ORACLE_TOLERANCES

T, VOCAB, WIDTH = 6, 11, 8


@pytest.fixture
def dtype(xp) -> str:
    """float64 where the backend has it (the comparisons are then tight), else float32."""
    return "float64" if "float64" in xp.__array_namespace_info__().dtypes() else "float32"


def _batch():
    """Token ids (N, T) with 0 as padding, the key-padding mask (True = padding) and which
    sequences count in the loss: sequence 1 is all padding (an empty document)."""
    tokens = np.array(
        [
            [3, 5, 7, 2, 0, 0],
            [0, 0, 0, 0, 0, 0],
            [4, 1, 9, 9, 6, 8],
            [2, 10, 0, 0, 0, 0],
        ],
        dtype=np.int64,
    )
    return tokens, tokens == 0, ~(tokens == 0).all(axis=1)


class _Model:
    """Embedding, positions, two pre-norm encoder layers, mean pooling and a linear head: one
    regression target per sequence. The layers are built once and shared by every graph."""

    def __init__(self, dtype: str, norm_first: bool) -> None:
        self.embed = Embedding(VOCAB, WIDTH, dtype=dtype, seed=1)
        self.blocks = [
            TransformerEncoderLayer(
                2, dim_feedforward=16, dropout=0.0, norm_first=norm_first, seed=2 + i
            )
            for i in range(2)
        ]
        self.head = Affine(3, seed=9)
        self.dtype = dtype

    def params(self) -> list:
        layers = [self.embed, *self.blocks, self.head]
        return [p for layer in layers for p in layer.params]

    def grads(self, tokens, padding, counts, target) -> tuple[float, dict[str, np.ndarray]]:
        """The loss ``sum(where(counts, per-sequence loss, 0)) / counts.sum()`` and every
        parameter's gradient, by name, float64 on the host."""
        n = tokens.shape[0]
        ids = ex.placeholder((n, T), "int64", name="tokens")
        pad = ex.placeholder((n, T), "bool", name="padding")
        keep = ex.placeholder((n,), "bool", name="counts")
        want = ex.placeholder((n, 3), self.dtype, name="target")
        h = SinusoidalPositionalEncoding()(self.embed(ids))
        for block in self.blocks:
            h = block(h, key_padding_mask=pad)
        y = self.head(ex.mean(h, axis=1))
        per_sequence = ex.sum((y - want) ** 2, axis=-1)
        zero = ex.constant(0.0, dtype=self.dtype)
        loss = ex.sum(ex.where(keep, per_sequence, zero)) * (1.0 / float(counts.sum()))
        graph = nnlayers.compile(loss, wrt=self.params(), seed=0)
        feeds = {ids: tokens, pad: padding, keep: counts, want: target.astype(self.dtype)}
        value = float(np.asarray(graph.xp.to_numpy(graph.forward(feeds))))
        graph.backward()
        return value, {
            p.name: np.asarray(graph.xp.to_numpy(p.grad), np.float64) for p in self.params()
        }


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_an_all_padding_sequence_adds_nothing_to_the_gradients(dtype, norm_first) -> None:
    tokens, padding, counts = _batch()
    target = np.random.default_rng(3).normal(size=(len(tokens), 3))
    model = _Model(dtype, norm_first)
    loss, grads = model.grads(tokens, padding, counts, target)
    assert np.isfinite(loss)
    for name, g in grads.items():
        assert np.isfinite(g).all(), f"the gradient of {name} is not finite"
    rest = counts.nonzero()[0]
    loss_rest, grads_rest = model.grads(tokens[rest], padding[rest], counts[rest], target[rest])
    tol = ORACLE_TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(loss, loss_rest, rtol=tol.rtol, atol=tol.atol)
    assert grads.keys() == grads_rest.keys()
    for name, g in grads.items():
        np.testing.assert_allclose(g, grads_rest[name], rtol=tol.rtol, atol=tol.atol, err_msg=name)


def test_attention_to_an_all_padding_sequence_is_zero_with_its_weights(dtype) -> None:
    """MultiHeadAttention: a query whose keys are all padding gets the output bias alone (its
    heads' output is 0) and attention weights 0; the other queries' weights sum to 1."""
    rng = np.random.default_rng(4)
    x = ex.placeholder((3, 4, WIDTH), dtype, name="x")
    pad = np.zeros((3, 4), bool)
    pad[1] = True
    pad[2, 3] = True
    mha = MultiHeadAttention(2, seed=0)
    y, weights = mha(x, key_padding_mask=ex.constant(pad), return_attention_scores=True)
    loss = ex.sum(y * y)
    graph = nnlayers.compile([loss, y, weights], wrt=mha.params)
    values = graph.forward({x: rng.normal(size=(3, 4, WIDTH)).astype(dtype)})
    graph.backward()
    y_, w_ = (np.asarray(graph.xp.to_numpy(v), np.float64) for v in values[1:])
    bias = np.asarray(graph.xp.to_numpy(mha.out_bias.value), np.float64)
    np.testing.assert_array_equal(y_[1], np.broadcast_to(bias, y_[1].shape))
    np.testing.assert_array_equal(w_[1], 0.0)
    tol = ORACLE_TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(w_[[0, 2]].sum(axis=-1), 1.0, rtol=tol.rtol, atol=tol.atol)
    np.testing.assert_array_equal(w_[2, ..., 3], 0.0)
    for p in mha.params:
        assert np.isfinite(np.asarray(graph.xp.to_numpy(p.grad))).all(), p.name


def test_onnx_export_gives_zero_for_an_all_padding_sequence(tmp_path) -> None:
    """The exported attention gives what the op gives: 0 for a query without keys, not NaN."""
    for name in ("onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f'{name} is not installed: pip install "nnlayers[onnx]"')
    import onnxruntime

    x = ex.placeholder((None, 4, WIDTH), name="x")
    pad = ex.placeholder((None, 4), "bool", name="padding")
    mha = MultiHeadAttention(2, seed=0)
    y, weights = mha(x, key_padding_mask=pad, return_attention_scores=True)
    q = ex.reshape(x, (-1, 1, 4, WIDTH))
    keep = ex.placeholder((None, 1, 1, 4), "bool", name="keep")
    direct = ex.scaled_dot_product_attention(q, q, q, keep, causal=True)
    outputs = {"y": y, "weights": weights, "direct": direct}
    path = nnlayers.export.onnx(outputs, tmp_path / "padded.onnx")
    mask = np.zeros((3, 4), bool)
    mask[1] = True
    mask[2, :2] = True  # with causal, queries 0 and 1 of sequence 2 have no key either
    feeds = {
        "x": np.random.default_rng(5).normal(size=(3, 4, WIDTH)).astype("float32"),
        "padding": mask,
        "keep": ~mask.reshape(3, 1, 1, 4),
    }
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    run = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    got = dict(zip(outputs, run.run(list(outputs), feeds), strict=True))
    graph = nnlayers.compile(list(outputs.values()), wrt=[], training=False)
    values = graph.forward({x: feeds["x"], pad: mask, keep: feeds["keep"]}, keep_for_backward=False)
    for name, v in zip(outputs, values, strict=True):
        want = np.asarray(graph.xp.to_numpy(v))
        assert np.isfinite(want).all() and np.isfinite(got[name]).all(), name
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(got["weights"][1], 0.0)
    np.testing.assert_array_equal(got["direct"][1], 0.0)
    np.testing.assert_array_equal(got["direct"][2, :, :2], 0.0)
