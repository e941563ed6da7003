"""What every example shares: its command line (--epochs, --backend, --device, --seed, --quiet)
and running its body on the chosen backend."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

import arraycore


def parser(description: str, epochs: int) -> argparse.ArgumentParser:
    """An argument parser with the options every example takes."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--epochs", type=int, default=epochs, help="epochs to train")
    p.add_argument(
        "--backend",
        default=argparse.SUPPRESS,
        help="arraycore backend: numpy, cuda, opencl or a third-party one (default: "
        "$ARRAYCORE_BACKEND, else numpy)",
    )
    p.add_argument(
        "--device",
        default=argparse.SUPPRESS,
        help="device within the backend, e.g. an index (default: $ARRAYCORE_DEVICE)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for weights, shuffling and dropout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


@contextlib.contextmanager
def backend(args: argparse.Namespace) -> Iterator[Any]:
    """Run the block on ``--backend``/``--device`` (else the default); yields the namespace."""
    name, device = getattr(args, "backend", None), getattr(args, "device", None)
    if device is not None and device.isdigit():
        device = int(device)
    try:
        # Resolved here, so that a backend that cannot run is one line, not a traceback.
        xp = arraycore.namespace(name, device)
    except arraycore.BackendError as exc:
        raise SystemExit(f"error: {exc}") from exc
    with arraycore.use(xp.name, xp.device.id) as active:
        yield active


def add_mnist_options(p: argparse.ArgumentParser) -> None:
    """``--data DIR``, ``--download`` and ``--limit N`` for the MNIST examples."""
    from nnlayers.datasets import cache_dir

    p.add_argument(
        "--data",
        default=str(cache_dir() / "mnist"),
        help="folder with the four MNIST files (train-images-idx3-ubyte.gz, ...)",
    )
    p.add_argument(
        "--download", action="store_true", help="download missing files (SHA-256 checked)"
    )
    p.add_argument("--limit", type=int, default=None, help="train on the first N images only")


def load_mnist(args: argparse.Namespace) -> tuple[Any, Any]:
    """MNIST's train and test splits from ``--data``; without the files (and ``--download``)
    exit with a message naming them and where to get them."""
    from pathlib import Path

    from nnlayers.datasets import MNIST
    from nnlayers.datasets import load_mnist as load

    folder = Path(args.data)
    missing = [
        name
        for name in MNIST.files
        if not (folder / name).is_file() and not (folder / name.removesuffix(".gz")).is_file()
    ]
    if missing and not args.download:
        url = MNIST.mirrors[0]
        raise SystemExit(
            f"MNIST is not in {folder}: missing {', '.join(missing)}.\n"
            f"Download the four files from {url} (for example "
            f"`curl -O {url}{missing[0]}`) into that folder, point --data at a folder that "
            f"has them, or pass --download to fetch them (and check their SHA-256) there."
        )
    train = load(folder, "train", download=args.download)
    test = load(folder, "test", download=args.download)
    if args.limit is not None:
        train = type(train)(train.inputs[: args.limit], train.targets[: args.limit])
    return train, test
