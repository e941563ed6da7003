"""Data sets as host NumPy arrays (a :class:`nnlayers.Feed` moves batches to the device).

- :func:`load_mnist`, :func:`load_fashion_mnist`: IDX files, from a folder or downloaded with
  SHA-256 verification into ``$NNLAYERS_DATA`` / ``~/.cache/nnlayers``;
- :func:`load_cifar10`: the pickle-free binary version, same rules;
- :func:`spirals`: synthetic 2-D classes; :func:`load_digits`: scikit-learn's bundled 8x8
  digits, with :func:`train_test_split`;
- :func:`read_idx` / :func:`write_idx`: the IDX format itself.

Each loader returns a :class:`Dataset` ``(inputs, targets)``.

>>> from nnlayers.datasets import spirals
>>> x, y = spirals(n_per_class=100, classes=3, noise=0.2, seed=0)
>>> x.shape, y.shape
((300, 2), (300,))
"""

from ._files import ENV_DATA, Dataset, DatasetError, RemoteFiles, cache_dir, sha256_file
from .cifar import CIFAR10, CIFAR10_CLASSES, load_cifar10
from .digits import load_digits, train_test_split
from .idx import IDX_TYPES, read_idx, write_idx
from .mnist import FASHION_MNIST, FASHION_MNIST_CLASSES, MNIST, load_fashion_mnist, load_mnist
from .synthetic import spirals

__all__ = [
    "CIFAR10", "CIFAR10_CLASSES", "ENV_DATA", "FASHION_MNIST", "FASHION_MNIST_CLASSES",
    "IDX_TYPES", "MNIST", "Dataset", "DatasetError", "RemoteFiles", "cache_dir",
    "load_cifar10", "load_digits", "load_fashion_mnist", "load_mnist", "read_idx",
    "sha256_file", "spirals", "train_test_split", "write_idx",
]  # fmt: skip
