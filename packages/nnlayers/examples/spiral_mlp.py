"""A multilayer perceptron separates three interleaved spirals (a classic that no linear
model can do: the best linear boundary gets about half of the points right).

    python spiral_mlp.py --epochs 100
"""

from __future__ import annotations

import sys
from typing import Any

import nnlayers
from nnlayers.datasets import spirals, train_test_split
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import Adam

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=100)
    p.add_argument("--hidden", type=int, default=64, help="units in each of the hidden layers")
    args = p.parse_args(argv)
    x, y = spirals(n_per_class=300, classes=3, noise=0.2, seed=args.seed)
    train, test = train_test_split(x, y, test_fraction=0.25, seed=args.seed)
    with backend(args) as xp:
        net = Sequential(
            [
                Affine(args.hidden, activation="relu"),
                Affine(args.hidden, activation="relu"),
                Affine(3),
            ],
            seed=args.seed,
        )
        model = nnlayers.Classifier(net, (2,), optimizer=Adam(0.01), seed=args.seed)
        history = nnlayers.fit(
            model,
            nnlayers.Feed(train.inputs, train.targets, batch_size=64, seed=args.seed),
            epochs=args.epochs,
            progress=not args.quiet,
        )
        scores = model.evaluate(test.inputs, test.targets)
        print(
            f"after {args.epochs} epochs on {xp.name}: training accuracy "
            f"{history.last['accuracy']:.1%}, held-out accuracy {scores['accuracy']:.1%} "
            f"({len(test.targets)} points)"
        )
    return {"accuracy": scores["accuracy"], "history": history}


if __name__ == "__main__":
    main()
