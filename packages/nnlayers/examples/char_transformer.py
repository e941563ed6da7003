"""A character-level transformer language model (a small GPT) on a text that ships with Python.

By default the text is the source of the standard library's ``textwrap`` module; ``--text zen``
takes the Zen of Python, ``--text MODULE`` another module. Characters are embedded, a learnt
position vector is added, and ``--layers`` pre-norm ``TransformerEncoderLayer`` blocks with
causal self-attention (position ``t`` sees positions ``<= t`` only) predict each next character.
The loss is reported in bits per character beside the text's unigram entropy (what a model
that knows only character frequencies would reach). Afterwards the model writes a continuation
of a prompt one character at a time with ``nnlayers.generate``, each step reading the last
``--length`` characters.

    python char_transformer.py --epochs 20
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

import nnlayers
from nnlayers.expr.node import Expr
from nnlayers.expr.spec import Spec
from nnlayers.layers import (
    Affine,
    Embedding,
    Layer,
    LayerNorm,
    PositionalEmbedding,
    TransformerEncoderLayer,
)

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser
from char_lstm import encode, fit_char_model, load_text, windows


class CharGPT(Layer):
    """Token ids (N, T) -> next-token logits (N, T, vocabulary): embedding, positions, causal
    transformer blocks, a final LayerNorm and the classifier."""

    def __init__(
        self,
        vocabulary: int,
        width: int,
        layers: int,
        heads: int,
        max_length: int,
        dropout: float,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed=seed)
        self.settings = (vocabulary, width, layers, heads, max_length, dropout)

    def build(self, spec: Spec) -> None:
        vocabulary, width, layers, heads, max_length, dropout = self.settings
        self.add_sublayer("embed", Embedding(vocabulary, width, seed=self.child_seed(0)))
        self.add_sublayer("positions", PositionalEmbedding(max_length, seed=self.child_seed(1)))
        self.blocks = [
            self.add_sublayer(
                f"block{i}",
                TransformerEncoderLayer(
                    heads,
                    4 * width,
                    dropout=dropout,
                    # exact GELU, x Phi(x), as PyTorch's and Keras's "gelu" (chosen: nnlayers'
                    # "gelu" was the tanh form until it was made to mean what theirs does;
                    # "gelu_tanh" would keep that)
                    activation="gelu",
                    norm_first=True,
                    name=f"block{i}",
                    seed=self.child_seed(2 + i),
                ),
            )
            for i in range(layers)
        ]
        self.add_sublayer("norm", LayerNorm())
        self.add_sublayer("head", Affine(vocabulary, seed=self.child_seed(2 + layers)))

    def forward(self, ids: Expr) -> Expr:
        h = self.positions(self.embed(ids))
        for block in self.blocks:
            h = block(h, causal=True)
        out: Expr = self.head(self.norm(h))
        return out


def unigram_bits(codes: np.ndarray) -> float:
    """The entropy of the text's character frequencies, in bits per character."""
    p = np.bincount(codes) / len(codes)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=20)
    p.add_argument("--text", default="textwrap", help="'zen' or a standard-library module name")
    p.add_argument("--length", type=int, default=64, help="characters per training window")
    p.add_argument("--width", type=int, default=128, help="model width d")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--dropout", type=float, default=0.1, help="dropout in the blocks")
    p.add_argument("--stride", type=int, default=4, help="characters between training windows")
    p.add_argument("--prompt", default="def ", help="start of the generated text")
    p.add_argument("--generate", type=int, default=200, help="characters to generate")
    args = p.parse_args(argv)
    text = load_text(args.text)
    vocabulary, index, codes = encode(text)
    inputs, targets = windows(codes, args.length)
    inputs, targets = inputs[:: args.stride], targets[:: args.stride]
    entropy = unigram_bits(codes)
    print(
        f"text: {args.text!r}, {len(text):,} characters, {len(vocabulary)} distinct, unigram "
        f"entropy {entropy:.2f} bits per character; {len(inputs):,} windows of {args.length}"
    )

    with backend(args) as xp:
        nnlayers.seed(args.seed)
        net = CharGPT(
            len(vocabulary),
            args.width,
            args.layers,
            args.heads,
            args.length,
            args.dropout,
            seed=args.seed,
        )
        model, history, bits = fit_char_model(net, inputs, targets, args, 32, 1e-3)
        print(
            f"after {args.epochs} epochs on {xp.name}: {bits:.3f} bits per character (unigram "
            f"entropy {entropy:.2f}, uniform {math.log2(len(vocabulary)):.2f}), next-character "
            f"accuracy {history.last['accuracy']:.1%}"
        )

        # Generation: nnlayers.generate reads the model's window of ``length`` characters.
        # Causal attention means that what follows position t cannot change its prediction
        # (generate checks that once), so a shorter text is placed at the start of the window
        # and the next character drawn from the prediction at its last position.
        prompt_ids = [index[ch] for ch in args.prompt if ch in index] or [0]
        prompt = "".join(vocabulary[c] for c in prompt_ids)
        out = nnlayers.generate(model, prompt_ids, args.generate, seed=args.seed)
        sample = "".join(vocabulary[c] for c in out)
        print("generated:\n" + sample)
    return {
        "bits_per_character": bits,
        "unigram_bits": entropy,
        "accuracy": history.last["accuracy"],
        "sample": sample,
        "prompt": prompt,
    }


if __name__ == "__main__":
    main()
