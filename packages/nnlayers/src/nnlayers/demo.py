"""The nnlayers demo: a small CNN learns scikit-learn's bundled 8x8 digits.

    python -m nnlayers.demo [--out DIR] [--epochs N] [--threads N]
    ARRAYCORE_BACKEND=opencl python -m nnlayers.demo    # the same on another backend

It trains on 80% of the 1,797 images with a progress bar, reports the accuracy on the 20% it
never trained on, saves a checkpoint (``DIR/digits-cnn.safetensors``: weights, optimiser state,
epoch and history) and the loss and accuracy curves (``DIR/curves.png``), then reloads the
checkpoint into a fresh model to show that it reproduces the same predictions.

It prints how many BLAS threads it runs with: ``--threads N`` sets them for the run
(``arraycore.threads``), otherwise ``ARRAYCORE_NUM_THREADS``, ``OMP_NUM_THREADS`` or the BLAS
library's default of one per core decides. On a machine that other work keeps busy, one thread
can be ten times faster (arraycore warns there, once, when nothing was chosen).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

import arraycore

from .datasets import Dataset, load_digits, train_test_split
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


def positive_int(text: str) -> int:
    """``argparse`` type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def thread_count() -> str:
    """The BLAS/OpenMP thread count(s) in force now, e.g. ``"2 (openblas)"``."""
    pools = arraycore.thread_info()
    if not pools:
        return "unknown (no BLAS or OpenMP pool found)"
    counts = "/".join(str(n) for n in sorted({pool["num_threads"] for pool in pools}))
    names = ", ".join(sorted({str(pool["internal_api"]) for pool in pools}))
    return f"{counts} ({names})"


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
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="BLAS/OpenMP threads for the run (default: ARRAYCORE_NUM_THREADS, OMP_NUM_THREADS "
        "or one per core); 1 is often fastest on a busy machine",
    )
    args = p.parse_args(argv)

    start = time.perf_counter()
    xp = arraycore.namespace()
    images, labels = load_digits()  # loads scikit-learn (and SciPy's BLAS) before the limit
    train, test = train_test_split(images, labels, test_fraction=0.2, seed=args.seed)
    limit = contextlib.nullcontext() if args.threads is None else arraycore.threads(args.threads)
    with limit:
        setting = f"--threads {args.threads}" if args.threads else arraycore.thread_setting()
        threads = thread_count()
        print(
            f"nnlayers demo: {len(train.targets)} training and {len(test.targets)} held-out 8x8 "
            f"digits, backend {xp.name!r}, BLAS threads {threads} from {setting}"
        )
        return _run(args, train, test, start, threads)


def _run(
    args: argparse.Namespace, train: Dataset, test: Dataset, start: float, threads: str
) -> int:
    """Train, evaluate, save and reload: the body of :func:`main`."""
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
        f"{model.epoch} epochs, {len(history)} recorded; "
        f"{sum(p.size for p in model.params):,} trainable parameters"
    )
    print(f"saved {checkpoint} (reloaded: {'same' if same else 'DIFFERENT'} predictions)")
    print(f"saved {curves}")
    print(
        f"total time {time.perf_counter() - start:.1f} s (training and evaluation {trained:.1f} s) "
        f"with BLAS threads {threads}"
    )
    if scores["accuracy"] < TARGET or not same:
        print(f"demo: expected at least {TARGET:.0%} held-out accuracy", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
