"""A GAN learns a ring of eight Gaussians, generator and discriminator trained in turn.

The data are points in the plane around eight centres on a circle of radius 2 (the classic
mode-collapse test). Afterwards the script counts how many of the eight modes the generator's
samples cover and how many samples land close to a centre, and with ``--out`` saves a scatter
plot of real and generated points.

    python gan.py --epochs 30 --out gan.png
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import nnlayers
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import Adam

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser

CENTRES = 2.0 * np.stack(
    [np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)], axis=1
)
SPREAD = 0.05


def ring(n: int, seed: int) -> np.ndarray:
    """``n`` points around the eight centres."""
    rng = np.random.default_rng(seed)
    points = CENTRES[rng.integers(0, 8, n)] + rng.normal(0.0, SPREAD, (n, 2))
    return points.astype(np.float32)


def quality(samples: np.ndarray) -> tuple[int, float]:
    """Modes covered (a centre with at least 1% of the samples within 0.25 of it) and the
    fraction of samples within 0.25 of some centre."""
    distance = np.linalg.norm(samples[:, None, :] - CENTRES[None], axis=2)
    nearest, close = distance.argmin(axis=1), distance.min(axis=1) < 0.25
    counts = np.bincount(nearest[close], minlength=8)
    return int((counts >= 0.01 * len(samples)).sum()), float(close.mean())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=30)
    p.add_argument("--examples", type=int, default=8192, help="real points per epoch")
    p.add_argument("--out", default=None, help="save a scatter plot of the samples here (PNG)")
    args = p.parse_args(argv)
    with backend(args) as xp:
        generator = Sequential(
            [Affine(128, activation="relu"), Affine(128, activation="relu"), Affine(2)],
            seed=args.seed,
        )
        discriminator = Sequential(
            [Affine(128, activation="leaky_relu"), Affine(128, activation="leaky_relu"), Affine(1)],
            seed=args.seed + 1,
        )
        gan = nnlayers.GAN(
            generator,
            discriminator,
            (2,),
            noise_dim=8,
            optimizer=Adam(1e-3, beta1=0.5),
            seed=args.seed,
        )
        feed = nnlayers.Feed(ring(args.examples, args.seed), batch_size=128, seed=args.seed)
        history = nnlayers.fit(gan, feed, epochs=args.epochs, progress=not args.quiet)
        samples = gan.generate(2000, seed=args.seed + 1)
        modes, close = quality(samples)
        print(
            f"after {args.epochs} epochs on {xp.name}: the generator covers {modes}/8 modes; "
            f"{close:.0%} of its samples lie within 0.25 of a centre (discriminator accuracy "
            f"{history.last['discriminator_accuracy']:.0%})"
        )
    if args.out:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5, 5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        real = ring(2000, args.seed + 2)
        ax.scatter(real[:, 0], real[:, 1], s=2, alpha=0.4, label="real")
        ax.scatter(samples[:, 0], samples[:, 1], s=2, alpha=0.4, label="generated")
        ax.set_aspect("equal")
        ax.legend(loc="upper right")
        fig.savefig(args.out, dpi=100)
        print(f"saved {args.out}")
    return {"modes": modes, "close": close, "history": history}


if __name__ == "__main__":
    main()
