"""A multilayer perceptron on MNIST (28x28 handwritten digits): about 98% on the test set.

MNIST is read from ``--data DIR`` (the four files from the MNIST site, gzipped or not);
``--download`` fetches them there first.

    python mnist_mlp.py --data ~/data/mnist --epochs 10
"""

from __future__ import annotations

import sys
from typing import Any

import nnlayers
from nnlayers.layers import Affine, Dropout, Flatten, Sequential
from nnlayers.optim import Adam

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import add_mnist_options, backend, load_mnist, parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=10)
    add_mnist_options(p)
    args = p.parse_args(argv)
    train, test = load_mnist(args)
    with backend(args) as xp:
        net = Sequential(
            [
                Flatten(),
                Affine(512, activation="relu", init="he_normal"),
                Dropout(0.2),
                Affine(256, activation="relu", init="he_normal"),
                Dropout(0.2),
                Affine(10),
            ],
            seed=args.seed,
        )
        model = nnlayers.Classifier(net, (1, 28, 28), optimizer=Adam(1e-3), seed=args.seed)
        history = nnlayers.fit(
            model,
            nnlayers.Feed(train.inputs, train.targets, batch_size=128, seed=args.seed),
            epochs=args.epochs,
            validation=(test.inputs, test.targets),
            progress=not args.quiet,
        )
        print(
            f"after {args.epochs} epochs on {xp.name} ({len(train.targets):,} training images): "
            f"test accuracy {history.last['val_accuracy']:.2%}"
        )
    return {"accuracy": history.last["val_accuracy"], "history": history}


if __name__ == "__main__":
    main()
