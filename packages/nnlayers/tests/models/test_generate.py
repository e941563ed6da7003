"""``nnlayers.generate``: sampling from sequence models, on the active backend."""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io

import numpy as np
import pytest

import nnlayers
from nnlayers.layers import (
    LSTM,
    Affine,
    Bidirectional,
    Embedding,
    Layer,
    LayerNorm,
    PositionalEmbedding,
    Sequential,
    TransformerEncoderLayer,
)
from nnlayers.optim import Adam


def _zen() -> str:
    with contextlib.redirect_stdout(io.StringIO()):
        this = importlib.import_module("this")
    return codecs.decode(this.s, "rot13")


TEXT = _zen()
VOCABULARY = sorted(set(TEXT))
INDEX = {ch: i for i, ch in enumerate(VOCABULARY)}
CODES = np.array([INDEX[ch] for ch in TEXT], dtype=np.int64)


class TinyGPT(Layer):
    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.embed = Embedding(len(VOCABULARY), 32)
        self.positions = PositionalEmbedding(64)
        self.block = TransformerEncoderLayer(2, 64, dropout=0.0, norm_first=True)
        self.norm = LayerNorm()
        self.head = Affine(len(VOCABULARY))

    def forward(self, ids):
        return self.head(self.norm(self.block(self.positions(self.embed(ids)), causal=True)))


def _windows(length: int) -> tuple[np.ndarray, np.ndarray]:
    starts = np.arange(0, len(CODES) - length - 1, 3)
    index = starts[:, None] + np.arange(length)
    return CODES[index], CODES[index + 1]


def _trained(kind: str, length: int | None) -> nnlayers.Classifier:
    """A character model trained briefly on the Zen of Python (windows of 24)."""
    if kind == "lstm":
        net = Sequential(
            [Embedding(len(VOCABULARY), 16), LSTM(64, return_sequences=True),
             Affine(len(VOCABULARY))], seed=0,
        )  # fmt: skip
    else:
        net = TinyGPT(seed=0)
    model = nnlayers.Classifier(net, (length,), target_shape=(length,), input_dtype="int64", seed=0)
    x, y = _windows(24)
    nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=32, seed=0), epochs=3,
                 optimizer=Adam(1e-2), progress=False)  # fmt: skip
    return model


@pytest.fixture(scope="module", params=[("lstm", None), ("lstm", 24), ("transformer", None),
                                        ("transformer", 24)], ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def trained(request):
    return _trained(*request.param)


def test_samples_200_characters_from_a_trained_character_model(trained) -> None:
    prompt = [INDEX[ch] for ch in "Beautiful is"]
    out = nnlayers.generate(trained, prompt, 200, temperature=0.8, top_k=10, seed=1)
    assert out.dtype == np.int64 and out.shape == (len(prompt) + 200,)
    assert out[: len(prompt)].tolist() == prompt
    text = "".join(VOCABULARY[i] for i in out)
    assert len(text) == 212
    again = nnlayers.generate(trained, prompt, 200, temperature=0.8, top_k=10, seed=1)
    assert again.tolist() == out.tolist(), "a seed gives the same text"
    other = nnlayers.generate(trained, prompt, 200, temperature=0.8, top_k=10, seed=2)
    assert other.tolist() != out.tolist()
    # trained for three epochs, the model writes mostly letters and spaces, as the text does
    letters = sum(ch.isalpha() or ch == " " for ch in text[len(prompt) :])
    assert letters > 0.7 * 200, text


def test_temperature_zero_is_the_most_likely_character_each_step(trained) -> None:
    """Greedy decoding against the model's own predictions over the same contexts."""
    prompt = [INDEX[ch] for ch in "Simple is"]
    out = nnlayers.generate(trained, prompt, 12, temperature=0)
    assert nnlayers.generate(trained, prompt, 12, top_k=1, seed=5).tolist() == out.tolist()
    window = trained.inputs[0].shape[1]
    for n in range(len(prompt), len(out)):
        context = out[:n][-window:] if window else out[:n]
        ids = np.zeros((1, window or len(context)), dtype=np.int64)
        ids[0, : len(context)] = context
        p = trained.predict_proba(ids)[0, len(context) - 1]
        assert out[n] == int(np.argmax(p))


def test_top_k_draws_only_the_k_most_likely(trained) -> None:
    prompt = [INDEX[ch] for ch in "Flat is"]
    ids = np.asarray([prompt], dtype=np.int64)
    if trained.inputs[0].shape[1] is not None:
        ids = np.zeros((1, 24), dtype=np.int64)
        ids[0, : len(prompt)] = prompt
    p = trained.predict_proba(ids)[0, len(prompt) - 1]
    top = set(np.argsort(p)[-3:].tolist())
    drawn = {int(nnlayers.generate(trained, prompt, 1, top_k=3, temperature=5.0, seed=s)[-1])
             for s in range(40)}  # fmt: skip
    assert drawn <= top and len(drawn) > 1


def test_a_model_that_is_not_causal_is_refused_for_a_short_prompt() -> None:
    net = Sequential(
        [Embedding(5, 4), Bidirectional(LSTM(6, return_sequences=True)), Affine(5)], seed=0
    )
    model = nnlayers.Classifier(net, (8,), target_shape=(8,), input_dtype="int64")
    with pytest.raises(ValueError, match=r"not causal.*at least 8 tokens.*input_shape=\(None,\)"):
        nnlayers.generate(model, [1, 2, 3], 4)
    assert nnlayers.generate(model, [0, 1, 2, 3, 4, 1, 2, 3], 2, seed=0).shape == (10,)


def test_bad_arguments_are_named() -> None:
    net = Sequential([Embedding(5, 4), LSTM(6, return_sequences=True), Affine(5)], seed=0)
    model = nnlayers.Classifier(net, (None,), target_shape=(None,), input_dtype="int64")
    for kwargs, match in [
        ({"prompt": []}, "non-empty 1-D sequence of token ids"),
        ({"prompt": [1.5]}, "token ids, got float64"),
        ({"prompt": [7]}, r"ids must lie in \[0, 5\)"),
        ({"temperature": -1}, "temperature must be >= 0"),
        ({"top_k": 0}, r"top_k must lie in \[1, 5\]"),
        ({"context": 0}, "context must be positive"),
    ]:
        args = {"prompt": [1, 2], **kwargs}
        with pytest.raises(ValueError, match=match):
            nnlayers.generate(model, args.pop("prompt"), 3, **args)
    images = nnlayers.Classifier(Sequential([Affine(3)], seed=0), (4,))
    with pytest.raises(ValueError, match=r"needs a model over token ids \(N, T\)"):
        nnlayers.generate(images, [1], 2)
    with pytest.raises(TypeError, match="needs a Classifier"):
        nnlayers.generate(object(), [1], 2)  # type: ignore[arg-type]


def test_context_caps_what_the_model_reads() -> None:
    """With context=3 the draws depend on the last three tokens only."""
    net = Sequential([Embedding(5, 4), LSTM(6, return_sequences=True), Affine(5)], seed=0)
    model = nnlayers.Classifier(net, (None,), target_shape=(None,), input_dtype="int64")
    a = nnlayers.generate(model, [4, 4, 4, 1, 2, 3], 5, temperature=0, context=3)
    b = nnlayers.generate(model, [0, 1, 2, 3], 5, temperature=0, context=3)
    assert a[-5:].tolist() == b[-5:].tolist()
