"""The nnlayers demo: a small CNN learns scikit-learn's bundled 8x8 digits.

    python -m nnlayers.demo [--out DIR] [--epochs N]
    ARRAYCORE_BACKEND=opencl python -m nnlayers.demo    # the same on another backend

It trains on 80% of the 1,797 images with a progress bar, reports the accuracy on the 20% it
never trained on, saves a checkpoint (``DIR/digits-cnn.safetensors``: weights, optimiser state,
epoch and history) and the loss and accuracy curves (``DIR/curves.png``), then reloads the
checkpoint into a fresh model to show that it reproduces the same predictions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import arraycore

from .datasets import load_digits, train_test_split
from .feeds import Feed
from .layers import Affine, BatchNorm, Conv2D, Dropout, Flatten, Pool2D, Sequential
from .models import Classifier
from .optim import Adam, CosineDecay
from .train import Checkpoint, PlotCurves, fit

TARGET = 0.97


def network(seed: int) -> Sequential:
    """Two convolution blocks (32 and 64 filters) and a linear classifier: 22k parameters."""
    return Sequential(
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
            Dropout(0.25),
            Affine(10),
        ],
        seed=seed,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (1 if the accuracy misses the 97% target)."""
    p = argparse.ArgumentParser(
        prog="python -m nnlayers.demo",
        description="Train a small CNN on scikit-learn's 8x8 digits on the active arraycore "
        "backend (ARRAYCORE_BACKEND), then save a checkpoint and the training curves.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out", default="nnlayers-demo", help="folder for the checkpoint and PNG")
    p.add_argument("--epochs", type=int, default=15, help="epochs to train")
    p.add_argument("--batch-size", type=int, default=32, help="examples per step")
    p.add_argument("--seed", type=int, default=0, help="seed for weights, shuffling, dropout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    start = time.perf_counter()
    xp = arraycore.namespace()
    images, labels = load_digits()
    train, test = train_test_split(images, labels, test_fraction=0.2, seed=args.seed)
    print(
        f"nnlayers demo: {len(train.targets)} training and {len(test.targets)} held-out 8x8 "
        f"digits, backend {xp.name!r}"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint, curves = out / "digits-cnn.safetensors", out / "curves.png"

    feed = Feed(train.inputs, train.targets, batch_size=args.batch_size, seed=args.seed)
    model = Classifier(network(args.seed), (1, 8, 8), seed=args.seed)
    schedule = CosineDecay(3e-3, total_steps=args.epochs * len(feed))
    history = fit(
        model,
        feed,
        epochs=args.epochs,
        optimizer=Adam(schedule),
        validation=(test.inputs, test.targets),
        callbacks=[Checkpoint(checkpoint), PlotCurves(curves)],
        progress=not args.quiet,
    )
    scores = model.evaluate(test.inputs, test.targets)
    trained = time.perf_counter() - start

    fresh = Classifier(network(args.seed + 1), (1, 8, 8)).restore(checkpoint)
    same = np.array_equal(fresh.predict(test.inputs), model.predict(test.inputs))
    print(
        f"held-out accuracy {scores['accuracy']:.2%} (loss {scores['loss']:.4f}) after "
        f"{model.epoch} epochs, {len(history)} recorded; {model.summary().splitlines()[-1]}"
    )
    print(f"saved {checkpoint} (reloaded: {'same' if same else 'DIFFERENT'} predictions)")
    print(f"saved {curves}")
    print(
        f"total time {time.perf_counter() - start:.1f} s (training and evaluation {trained:.1f} s)"
    )
    if scores["accuracy"] < TARGET or not same:
        print(f"demo: expected at least {TARGET:.0%} held-out accuracy", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
