"""A convolutional network on MNIST (28x28 handwritten digits): about 99% on the test set.

MNIST is read from ``--data DIR`` (the four files from the MNIST site, gzipped or not);
``--download`` fetches them there first. On a CPU an epoch takes minutes; ``--limit`` trains on
fewer images.

    python mnist_cnn.py --data ~/data/mnist --epochs 5
"""

from __future__ import annotations

import sys
from typing import Any

import nnlayers
from nnlayers.layers import Affine, BatchNorm, Conv2D, Dropout, Flatten, Pool2D, Sequential
from nnlayers.optim import Adam, CosineDecay

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import add_mnist_options, backend, load_mnist, parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=5)
    add_mnist_options(p)
    args = p.parse_args(argv)
    train, test = load_mnist(args)
    with backend(args) as xp:
        net = Sequential(
            [
                Conv2D(32, 3, padding="same", init="he_normal"),
                BatchNorm(),
                "relu",
                Pool2D(2),
                Conv2D(64, 3, padding="same", init="he_normal"),
                BatchNorm(),
                "relu",
                Pool2D(2),
                Flatten(),
                Dropout(0.3),
                Affine(128, activation="relu", init="he_normal"),
                Affine(10),
            ],
            seed=args.seed,
        )
        feed = nnlayers.Feed(train.inputs, train.targets, batch_size=128, seed=args.seed)
        schedule = CosineDecay(2e-3, total_steps=max(1, args.epochs * len(feed)))
        model = nnlayers.Classifier(net, (1, 28, 28), optimizer=Adam(schedule), seed=args.seed)
        history = nnlayers.fit(
            model,
            feed,
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
