"""Sequence models whose time axis is unknown when built (``input_shape=(None,)``): every length
runs, each compiled once, and gives what a model built for that length gives."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
from nnlayers.errors import ShapeError
from nnlayers.graph.graph import _MAX_PLANS
from nnlayers.layers import (
    GRU,
    LSTM,
    RNN,
    Affine,
    Embedding,
    Layer,
    LayerNorm,
    PositionalEmbedding,
    Sequential,
    SinusoidalPositionalEncoding,
    TransformerEncoderLayer,
)
from nnlayers.optim import Adam

VOCAB = 11


class CausalBlock(Layer):
    """Embedding, learnt positions and one causal pre-norm transformer block (a tiny GPT)."""

    def __init__(self, positions: str = "learnt", seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.embed = Embedding(VOCAB, 16)
        self.positions = (
            PositionalEmbedding(32) if positions == "learnt" else SinusoidalPositionalEncoding()
        )
        self.block = TransformerEncoderLayer(2, 32, dropout=0.0, norm_first=True)
        self.norm = LayerNorm()
        self.head = Affine(VOCAB)

    def forward(self, ids):
        return self.head(self.norm(self.block(self.positions(self.embed(ids)), causal=True)))


NETWORKS = {
    "lstm": lambda: Sequential([Embedding(VOCAB, 8), LSTM(12, return_sequences=True), Affine(VOCAB)], seed=3),
    "gru": lambda: Sequential([Embedding(VOCAB, 8), GRU(12, return_sequences=True), Affine(VOCAB)], seed=3),
    "rnn": lambda: Sequential([Embedding(VOCAB, 8), RNN(12, return_sequences=True), Affine(VOCAB)], seed=3),
    "rnn-relu-last": lambda: Sequential([Embedding(VOCAB, 8), RNN(12, activation="relu"), Affine(VOCAB)], seed=3),
    "transformer": lambda: CausalBlock(seed=3),
    "sinusoidal": lambda: CausalBlock("sinusoidal", seed=3),
}  # fmt: skip


def _model(name: str, length: int | None) -> nnlayers.Classifier:
    target = () if name.endswith("-last") else (length,)
    return nnlayers.Classifier(
        NETWORKS[name](), (length,), target_shape=target, input_dtype="int64", seed=0
    )


def _ids(n: int, t: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (n, t))


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_any_length_predicts_what_a_model_built_for_it_predicts(name: str) -> None:
    free = _model(name, None)
    assert free.inputs[0].shape == (None, None)
    for t in (7, 3, 1):
        fixed = _model(name, t)
        x = _ids(5, t, seed=t)
        np.testing.assert_allclose(
            free.predict_proba(x), fixed.predict_proba(x), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_any_length_trains_as_a_model_built_for_the_length(name: str) -> None:
    """The loss is the mean per position whatever the length is known as, so both train alike;
    the free model then also reads another length."""
    x = _ids(8, 6)
    y = x[:, -1] if name.endswith("-last") else np.roll(x, -1, axis=1)
    runs = []
    for length in (None, 6):
        model = _model(name, length)
        feed = nnlayers.Feed(x, y, batch_size=4, shuffle=False)
        history = nnlayers.fit(model, feed, epochs=3, optimizer=Adam(1e-2), progress=False)
        runs.append((model, history["loss"]))
    (free, free_loss), (_, fixed_loss) = runs
    np.testing.assert_allclose(free_loss, fixed_loss, rtol=1e-5)
    assert free_loss[-1] < free_loss[0]
    want = (2, VOCAB) if name.endswith("-last") else (2, 9, VOCAB)
    assert free.predict_proba(_ids(2, 9)).shape == want


def test_each_length_is_compiled_once_and_the_plans_are_bounded() -> None:
    model = _model("lstm", None)
    graph = model._prediction_graph()
    for t in (4, 5, 4):
        model.predict_proba(_ids(2, t))
    assert len(graph._plans) == 2, "lengths 4 and 5, the second 4 reusing its plan"
    for t in range(6, 6 + 2 * _MAX_PLANS):
        model.predict_proba(_ids(2, t))
    assert len(graph._plans) == _MAX_PLANS, "the least recently used plans are dropped"


@pytest.mark.parametrize(
    ("layer", "match"),
    [
        (lambda: LSTM(8, fused=False), r"unrolled loop needs the time axis .*\(None, None, 4\).*leave fused=True"),
        (lambda: RNN(8, fused=False), r"unrolled loop needs the time axis .*leave fused=True"),
        (lambda: RNN(8, activation="gelu"), r"runs as one op, for the activations tanh, relu, sigmoid; got 'gelu'"),
    ],
    ids=["lstm-unrolled", "rnn-unrolled", "rnn-gelu"],
)  # fmt: skip
def test_an_unrolled_loop_names_what_takes_any_length(layer, match) -> None:
    with pytest.raises(ValueError, match=match):
        nnlayers.Classifier(Sequential([Embedding(VOCAB, 4), layer(), Affine(3)], seed=0), (None,),
                            target_shape=(None,), input_dtype="int64")  # fmt: skip


def test_a_padded_batch_needs_its_length_known() -> None:
    lstm = LSTM(4)
    x = nnlayers.expr.placeholder((None, None, 3))
    with pytest.raises(ValueError, match=r"lengths= \(a padded batch\) needs the time axis"):
        lstm(x, lengths=nnlayers.expr.placeholder((None,), "int64"))


def test_positions_past_the_table_are_refused_naming_max_length() -> None:
    model = nnlayers.Classifier(
        Sequential([Embedding(VOCAB, 4), PositionalEmbedding(5), Affine(3)], seed=0),
        (None,),
        target_shape=(None,),
        input_dtype="int64",
    )
    assert model.predict_proba(_ids(2, 5)).shape == (2, 5, 3)
    with pytest.raises(
        ShapeError, match=r"add_positions.*6 positions are longer than the table's 5 \(max_length\)"
    ):
        model.predict_proba(_ids(2, 6))  # fmt: skip
    sinus = SinusoidalPositionalEncoding(max_length=4)
    out = sinus(nnlayers.expr.placeholder((None, None, 6)))
    assert out.shape == (None, None, 6)


@pytest.mark.parametrize("check_finite", [False, True], ids=["fused", "guarded"])
def test_lstm_state_and_last_output_at_any_length(check_finite: bool) -> None:
    """Both parts of the LSTM's packed output (every hidden state and the last cell state),
    with and without the plan's fusion (a guarded plan does not fuse), at unknown length."""
    x = nnlayers.expr.placeholder((None, None, 3))
    lstm = LSTM(4, return_sequences=True, return_state=True, seed=0)
    hs, (_, c) = lstm(x)
    loss = nnlayers.expr.sum(hs) + nnlayers.expr.sum(c * c)
    graph = nnlayers.compile([loss, hs, c], wrt=lstm.params, check_finite=check_finite)
    fixed_x = nnlayers.expr.placeholder((None, 5, 3))
    fixed = LSTM(4, return_sequences=True, return_state=True, seed=0)
    fhs, (_, fc) = fixed(fixed_x)
    fixed_loss = nnlayers.expr.sum(fhs) + nnlayers.expr.sum(fc * fc)
    fixed_graph = nnlayers.compile([fixed_loss, fhs, fc], wrt=fixed.params)
    value = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")
    got = graph.forward({x: value})
    want = fixed_graph.forward({fixed_x: value})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(graph.xp.to_numpy(g), fixed_graph.xp.to_numpy(w), rtol=1e-5)
    grads = graph.backward()
    fixed_grads = fixed_graph.backward()
    assert len(grads) == len(fixed_grads) == 3
    for g, w in zip(grads.values(), fixed_grads.values(), strict=True):
        np.testing.assert_allclose(
            graph.xp.to_numpy(g), fixed_graph.xp.to_numpy(w), rtol=1e-4, atol=1e-6
        )


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_exported_once_runs_every_length_in_onnxruntime(name: str, tmp_path) -> None:
    ort = pytest.importorskip("onnxruntime", reason="runs the exported model")
    model = _model(name, None)
    path = tmp_path / "model.onnx"
    nnlayers.export.onnx(model, path, example_inputs=(_ids(2, 5),), check=True)
    session = ort.InferenceSession(str(path))
    for t in (5, 9):
        x = _ids(2, t, seed=t)
        (got,) = session.run(None, {session.get_inputs()[0].name: x})
        np.testing.assert_allclose(got, model.predict_proba(x), rtol=1e-4, atol=1e-5)
