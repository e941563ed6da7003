"""A variational autoencoder learns scikit-learn's 8x8 digits: it compresses each image to a
few numbers and draws new digits from random codes.

It reports the held-out negative evidence lower bound (the Bernoulli cross-entropy of the grey
levels plus the KL term, in nats per image and bits per pixel) next to that of the untrained
model, and with ``--out`` saves test images, their reconstructions and new samples as a PNG.

    python vae.py --epochs 60 --out vae.png
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import nnlayers
from nnlayers.datasets import load_digits, train_test_split
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import Adam

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=60)
    p.add_argument("--latent", type=int, default=8, help="size of the code")
    p.add_argument("--out", default=None, help="save images, reconstructions and samples here")
    args = p.parse_args(argv)
    images, labels = load_digits()
    pixels = images.reshape(len(images), 64)  # grey levels in [0, 1]: Bernoulli means
    train, test = train_test_split(pixels, labels, test_fraction=0.2, seed=args.seed)
    with backend(args) as xp:
        encoder = Sequential([Affine(256, activation="relu")], seed=args.seed)
        decoder = Sequential([Affine(256, activation="relu"), Affine(64)], seed=args.seed + 1)
        vae = nnlayers.VAE(
            encoder, decoder, (64,), args.latent, optimizer=Adam(2e-3), seed=args.seed
        )
        before = vae.evaluate(test.inputs)["loss"]
        history = nnlayers.fit(
            vae,
            nnlayers.Feed(train.inputs, batch_size=64, seed=args.seed),
            epochs=args.epochs,
            validation=(test.inputs,),
            progress=not args.quiet,
        )
        scores = vae.evaluate(test.inputs)
        bits = vae.bits_per_dim(test.inputs)
        print(
            f"after {args.epochs} epochs on {xp.name}: held-out negative ELBO "
            f"{scores['loss']:.1f} nats per image ({bits:.3f} bits per pixel; untrained "
            f"{before:.1f}), of which KL {scores['kl']:.1f}"
        )
        shown = test.inputs[:10]
        rows = [shown, vae.reconstruct(shown), vae.sample(10, seed=args.seed)]
    if args.out:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 3.3))
        FigureCanvasAgg(fig)
        axes = fig.subplots(3, 10)
        for r, (row, title) in enumerate(zip(rows, ("test", "reconstructed", "sampled"))):
            for c in range(10):
                axes[r, c].imshow(np.asarray(row[c]).reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                axes[r, c].axis("off")
            axes[r, 0].set_title(title, fontsize=8, loc="left")
        fig.savefig(args.out, dpi=100)
        print(f"saved {args.out}")
    return {"loss": scores["loss"], "untrained": before, "history": history}


if __name__ == "__main__":
    main()
