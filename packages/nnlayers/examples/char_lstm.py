"""A character-level language model: an LSTM learns to continue a text that ships with Python.

By default the text is the Zen of Python (``import this``); ``--text MODULE`` uses the source of
a standard-library module instead (``--text textwrap``). The model reads 32 characters and
predicts each next one; afterwards it writes a continuation of a prompt one character at a time,
carrying the LSTM's hidden state ``(h, c)`` from step to step.

    python char_lstm.py --epochs 30
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import inspect
import io
import math
import sys
from typing import Any

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import LSTM, Affine, Embedding, Sequential
from nnlayers.optim import Adam

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser


def load_text(name: str) -> str:
    """The Zen of Python (``zen``) or the source of a standard-library module."""
    if name == "zen":
        with contextlib.redirect_stdout(io.StringIO()):  # importing ``this`` prints the Zen
            this = importlib.import_module("this")
        return codecs.decode(this.s, "rot13")
    return inspect.getsource(importlib.import_module(name))


def encode(text: str) -> tuple[list[str], dict[str, int], np.ndarray]:
    """The text's characters sorted (the vocabulary), each one's id, and the text as ids."""
    vocabulary = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocabulary)}
    return vocabulary, index, np.array([index[ch] for ch in text], dtype=np.int64)


def windows(codes: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Every window of ``length`` characters and, shifted by one, the characters to predict."""
    starts = np.arange(len(codes) - length)
    index = starts[:, None] + np.arange(length)
    return codes[index], codes[index + 1]


def fit_char_model(
    network: Any, inputs: np.ndarray, targets: np.ndarray, args: Any, batch_size: int, lr: float
) -> tuple[Any, Any, float]:
    """Train ``network`` (ids (N, T) -> logits (N, T, vocabulary)) to predict every next
    character: ``(model, history, bits per character)``."""
    model = nnlayers.Classifier(
        network,
        (inputs.shape[1],),
        input_dtype="int64",
        target_shape=(inputs.shape[1],),
        seed=args.seed,
    )
    feed = nnlayers.Feed(inputs, targets, batch_size=batch_size, seed=args.seed)
    history = nnlayers.fit(
        model,
        feed,
        epochs=args.epochs,
        optimizer=Adam(lr, clip_norm=1.0),
        progress=not args.quiet,
    )
    return model, history, history.last["loss"] / math.log(2.0)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=30)
    p.add_argument("--text", default="zen", help="'zen' or a standard-library module name")
    p.add_argument("--length", type=int, default=32, help="characters per training window")
    p.add_argument("--units", type=int, default=128, help="LSTM units")
    p.add_argument("--prompt", default="Beautiful is", help="start of the generated text")
    p.add_argument("--generate", type=int, default=160, help="characters to generate")
    args = p.parse_args(argv)
    text = load_text(args.text)
    vocabulary, index, codes = encode(text)
    inputs, targets = windows(codes, args.length)
    print(f"text: {args.text!r}, {len(text):,} characters, {len(vocabulary)} distinct")

    with backend(args) as xp:
        nnlayers.seed(args.seed)
        embed = Embedding(len(vocabulary), 32)
        lstm = LSTM(args.units, return_sequences=True)
        head = Affine(len(vocabulary))
        network = Sequential([embed, lstm, head])
        _, history, bits = fit_char_model(network, inputs, targets, args, 64, 3e-3)
        print(
            f"after {args.epochs} epochs on {xp.name}: {bits:.3f} bits per character "
            f"(uniform: {math.log2(len(vocabulary)):.2f}), next-character accuracy "
            f"{history.last['accuracy']:.1%}"
        )

        # Generation reuses the trained layers on one character at a time, feeding the LSTM's
        # final state back in as the next step's initial state: one step per character, with no
        # limit on the context. (nnlayers.generate(model, ids, n) samples from any sequence
        # model in one line by re-reading a window of the text: see char_transformer.py.)
        char = ex.placeholder((1, 1), "int64", name="char")
        h0 = ex.placeholder((1, args.units), name="h")
        c0 = ex.placeholder((1, args.units), name="c")
        logits = head(lstm(embed(char), initial_state=(h0, c0)))[:, 0]
        h1, c1 = lstm.state
        step = nnlayers.compile([ex.softmax(logits), h1, c1], wrt=[], training=False)
        h = xp.zeros((1, args.units), dtype="float32")
        c = xp.zeros((1, args.units), dtype="float32")
        rng = np.random.default_rng(args.seed)
        prompt = "".join(ch for ch in args.prompt if ch in index) or vocabulary[0]
        out = list(prompt)
        probabilities = None
        for i, ch in enumerate(prompt + " " * args.generate):
            if i >= len(prompt):
                p_host = np.asarray(xp.to_numpy(probabilities), dtype=np.float64)[0]
                ch = vocabulary[rng.choice(len(vocabulary), p=p_host / p_host.sum())]
                out.append(ch)
            probabilities, h, c = step.forward({char: np.array([[index[ch]]]), h0: h, c0: c})
        sample = "".join(out)
        print("generated:\n" + sample)
    return {"bits_per_character": bits, "accuracy": history.last["accuracy"], "sample": sample}


if __name__ == "__main__":
    main()
