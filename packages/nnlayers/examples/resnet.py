"""A small ResNet: residual blocks on scikit-learn's 8x8 digits (or CIFAR-10 when present locally).

The network is a 3x3 stem, ``--blocks`` stages of two ``ResidualBlock``s each (the first block
of every later stage halves the image and doubles the width, with a projection shortcut),
global average pooling and a linear classifier, the layout of ResNet-18 at a small scale. It
trains on 80% of the digits and reports the accuracy on the 20% it never saw. With
``--cifar DIR`` (the ``cifar-10-batches-py`` folder of the CIFAR-10 site, already downloaded:
this script never downloads) it trains on CIFAR-10's 50,000 training images and reports the
test accuracy. ``--precision mixed_float16`` trains with float32 master weights, float16
products and convolutions and dynamic loss scaling (for GPUs; on a CPU it is slower).

    python resnet.py --epochs 15
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import nnlayers
from nnlayers.datasets import load_digits, train_test_split
from nnlayers.layers import (
    Affine,
    BatchNorm,
    Conv2D,
    GlobalAvgPool2D,
    ResidualBlock,
    Sequential,
)
from nnlayers.optim import Adam, CosineDecay

sys.path.insert(0, __file__.rpartition("/")[0] or ".")
from _common import backend, parser


def network(width: int, stages: int, seed: int) -> Sequential:
    """Stem, ``stages`` stages of two residual blocks, global average pooling, classifier."""
    layers: list[Any] = [Conv2D(width, 3, padding="same", use_bias=False), BatchNorm(), "relu"]
    for stage in range(stages):
        filters = width * 2**stage
        layers += [ResidualBlock(filters, stride=1 if stage == 0 else 2), ResidualBlock(filters)]
    layers += [GlobalAvgPool2D(), Affine(10)]
    return Sequential(layers, seed=seed)


def load_cifar(folder: Path) -> tuple[Any, Any, Any, Any]:
    """CIFAR-10's python batches: (train images, labels, test images, labels), images NCHW
    float32 in [0, 1] less the training mean per channel."""
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise SystemExit(
            f"error: {folder} lacks {', '.join(missing)}: give the cifar-10-batches-py folder "
            "of https://www.cs.toronto.edu/~kriz/cifar.html"
        )
    parts = []
    for name in names:
        with open(folder / name, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        images = np.asarray(batch[b"data"], np.float32).reshape(-1, 3, 32, 32) / 255.0
        parts.append((images, np.asarray(batch[b"labels"], np.int64)))
    x_train = np.concatenate([p[0] for p in parts[:5]])
    y_train = np.concatenate([p[1] for p in parts[:5]])
    mean = x_train.mean(axis=(0, 2, 3), keepdims=True)
    return x_train - mean, y_train, parts[5][0] - mean, parts[5][1]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__.split("\n\n")[0], epochs=15)
    p.add_argument("--width", type=int, default=32, help="filters of the first stage")
    p.add_argument("--blocks", type=int, default=2, help="stages of two residual blocks")
    p.add_argument("--batch-size", type=int, default=32, help="examples per step")
    p.add_argument("--cifar", type=Path, default=None, help="CIFAR-10's cifar-10-batches-py folder")
    p.add_argument(
        "--precision",
        default=None,
        help="mixed_float16: float32 weights, float16 compute, dynamic loss scaling",
    )
    args = p.parse_args(argv)
    if args.cifar is not None:
        x_train, y_train, x_test, y_test = load_cifar(args.cifar)
        what, shape = "CIFAR-10", (3, 32, 32)
    else:
        images, labels = load_digits()
        train, test = train_test_split(images, labels, test_fraction=0.2, seed=args.seed)
        x_train, y_train, x_test, y_test = train.inputs, train.targets, test.inputs, test.targets
        what, shape = "8x8 digits", (1, 8, 8)
    print(f"{what}: {len(y_train):,} training and {len(y_test):,} held-out images")

    with backend(args) as xp:
        start = time.perf_counter()
        net = network(args.width, args.blocks, args.seed)
        model = nnlayers.Classifier(net, shape, seed=args.seed, precision=args.precision)
        feed = nnlayers.Feed(x_train, y_train, batch_size=args.batch_size, seed=args.seed)
        schedule = CosineDecay(3e-3, total_steps=args.epochs * len(feed))
        nnlayers.fit(
            model, feed, epochs=args.epochs, optimizer=Adam(schedule), progress=not args.quiet
        )
        scores = model.evaluate(x_test, y_test)
        seconds = time.perf_counter() - start
        parameters = sum(int(np.prod(p.shape)) for p in net.params)
        print(
            f"ResNet ({args.blocks} stages, {parameters:,} parameters) after {args.epochs} epochs "
            f"on {xp.name}{', ' + args.precision if args.precision else ''}: held-out accuracy {scores['accuracy']:.2%} (loss "
            f"{scores['loss']:.4f}), {seconds:.0f} s"
        )
    scaler = model.loss_scaler
    return {
        "accuracy": scores["accuracy"],
        "loss": scores["loss"],
        "seconds": seconds,
        "skipped_steps": None if scaler is None else scaler.skipped,
    }


if __name__ == "__main__":
    main()
