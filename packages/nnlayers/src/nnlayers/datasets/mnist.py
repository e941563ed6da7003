"""MNIST and Fashion-MNIST: 28x28 grey images of 10 classes, in the IDX format.

Read from a local folder holding the four official files (gzip-compressed or not), or
downloaded once, checked against the published SHA-256, into the cache folder
(``$NNLAYERS_DATA`` or ``~/.cache/nnlayers``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._files import Dataset, DatasetError, RemoteFiles, cache_dir, check_split, download
from .idx import read_idx

MNIST = RemoteFiles(
    folder="mnist",
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "https://yann.lecun.com/exdb/mnist/",
    ),
    files={
        "train-images-idx3-ubyte.gz": (
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            9912422,
        ),
        "train-labels-idx1-ubyte.gz": (
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            28881,
        ),
        "t10k-images-idx3-ubyte.gz": (
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            1648877,
        ),
        "t10k-labels-idx1-ubyte.gz": (
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            4542,
        ),
    },
)
"""The official MNIST files (LeCun, Cortes, Burges), their SHA-256 and sizes, and mirrors."""

FASHION_MNIST = RemoteFiles(
    folder="fashion-mnist",
    mirrors=(
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    ),
    files={
        "train-images-idx3-ubyte.gz": (
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            26421880,
        ),
        "train-labels-idx1-ubyte.gz": (
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            29515,
        ),
        "t10k-images-idx3-ubyte.gz": (
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            4422102,
        ),
        "t10k-labels-idx1-ubyte.gz": (
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            5148,
        ),
    },
)
"""The official Fashion-MNIST files (Zalando Research), their SHA-256 and sizes, and mirrors."""

FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip
"""Fashion-MNIST's class names, by label."""


def load_mnist(
    root: str | os.PathLike[str] | None = None,
    split: str = "train",
    *,
    download: bool = True,
    normalize: bool = True,
) -> Dataset:
    """MNIST's ``"train"`` (60,000) or ``"test"`` (10,000) split as host arrays.

    ``root``: a folder holding the official files (``train-images-idx3-ubyte.gz``, ... or the
    same without ``.gz``); files missing there are downloaded into it when ``download`` is
    true. Without ``root``, the cache folder ``<cache>/mnist`` is used.

    Returns ``Dataset(inputs, targets)``: images as float32 ``(N, 1, 28, 28)`` in ``[0, 1]``
    (``normalize=False``: the raw uint8 ``(N, 28, 28)``), labels as int64 ``(N,)``.
    """
    return _load(MNIST, "load_mnist", root, split, download, normalize)


def load_fashion_mnist(
    root: str | os.PathLike[str] | None = None,
    split: str = "train",
    *,
    download: bool = True,
    normalize: bool = True,
) -> Dataset:
    """Fashion-MNIST, exactly like :func:`load_mnist` (same file names, shapes and splits);
    the cache folder is ``<cache>/fashion-mnist``. Class names: :data:`FASHION_MNIST_CLASSES`.
    """
    return _load(FASHION_MNIST, "load_fashion_mnist", root, split, download, normalize)


def _load(
    remote: RemoteFiles,
    owner: str,
    root: str | os.PathLike[str] | None,
    split: str,
    fetch: bool,
    normalize: bool,
) -> Dataset:
    check_split(owner, split)
    folder = Path(root) if root is not None else cache_dir() / remote.folder
    prefix = "train" if split == "train" else "t10k"
    names = (f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz")
    paths = [_locate(remote, owner, folder, name, fetch) for name in names]
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise DatasetError(
            f"{owner}: {paths[0]} holds {images.dtype}{list(images.shape)}, expected uint8 "
            f"images of shape (N, 28, 28)"
        )
    if labels.ndim != 1 or labels.dtype != np.uint8:
        raise DatasetError(
            f"{owner}: {paths[1]} holds {labels.dtype}{list(labels.shape)}, expected uint8 "
            f"labels of shape (N,)"
        )
    if len(images) != len(labels):
        raise DatasetError(
            f"{owner}: {len(images)} images in {paths[0].name} but {len(labels)} labels in "
            f"{paths[1].name}"
        )
    if labels.size and labels.max() > 9:
        raise DatasetError(f"{owner}: {paths[1]} has label {labels.max()}, expected 0 to 9")
    targets = labels.astype(np.int64)
    if not normalize:
        return Dataset(images, targets)
    inputs = (images.astype(np.float32) / np.float32(255.0)).reshape(-1, 1, 28, 28)
    return Dataset(inputs, targets)


def _locate(remote: RemoteFiles, owner: str, folder: Path, name: str, fetch: bool) -> Path:
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    if not fetch:
        raise FileNotFoundError(
            f"{owner}: {name} (or {name.removesuffix('.gz')}) is not in {folder}, and "
            f"download=False"
        )
    sha256, size = remote.files[name]
    return download(name, remote.mirrors, sha256, size, folder)
