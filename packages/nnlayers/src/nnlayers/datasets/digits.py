"""scikit-learn's bundled 8x8 digits (1,797 images, no download) and a deterministic split."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ._files import Dataset

_INSTALL = 'pip install "nnlayers[datasets]"'


def load_digits() -> Dataset:
    """The UCI optical digits that ship with scikit-learn: 1,797 images of 8x8 pixels.

    Returns float32 inputs ``(1797, 1, 8, 8)`` in ``[0, 1]`` (the 0-16 grey levels divided by
    16) and int64 labels ``(1797,)`` from 0 to 9. Needs scikit-learn (an optional extra).
    """
    try:
        sklearn_datasets = importlib.import_module("sklearn.datasets")
    except ImportError as exc:
        raise ImportError(
            f"load_digits needs scikit-learn, which is not installed: {_INSTALL}"
        ) from exc
    bunch: Any = sklearn_datasets.load_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    inputs = images.astype(np.float32).reshape(-1, 1, 8, 8)
    return Dataset(inputs, np.asarray(bunch.target, dtype=np.int64))


def train_test_split(
    inputs: np.ndarray,
    targets: np.ndarray,
    test_fraction: float = 0.25,
    seed: int = 0,
    *,
    stratify: bool = True,
) -> tuple[Dataset, Dataset]:
    """Split examples into ``(train, test)`` datasets, the same way for the same ``seed``.

    With ``stratify`` (the default), each class contributes ``round(test_fraction * count)``
    of its examples to the test set, so both keep the class proportions. Examples keep their
    original order within each part.

    >>> x, y = np.arange(20).reshape(10, 2), np.array([0] * 6 + [1] * 4)
    >>> train, test = train_test_split(x, y, test_fraction=0.5, seed=0)
    >>> len(train.targets), len(test.targets), test.targets.tolist().count(1)
    (5, 5, 2)
    """
    x, y = np.asarray(inputs), np.asarray(targets)
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y):
        raise ValueError(
            f"train_test_split: inputs and targets need the same first axis, got shapes "
            f"{x.shape} and {y.shape}"
        )
    if not isinstance(test_fraction, int | float) or not 0.0 < test_fraction < 1.0:
        raise ValueError(
            f"train_test_split: test_fraction must lie in (0, 1), got {test_fraction!r}"
        )
    rng = np.random.default_rng(seed)
    n = len(y)
    if stratify:
        if y.ndim != 1 or y.dtype.kind not in "iub":
            raise ValueError("train_test_split: stratify needs 1-D integer class labels")
        chosen = []
        for label in np.unique(y):
            members = np.flatnonzero(y == label)
            count = round(test_fraction * len(members))
            chosen.append(rng.permutation(members)[:count])
        test_index = np.sort(np.concatenate(chosen))
    else:
        test_index = np.sort(rng.permutation(n)[: round(test_fraction * n)])
    mask = np.zeros(n, dtype=bool)
    mask[test_index] = True
    if mask.all() or not mask.any():
        raise ValueError(
            f"train_test_split: test_fraction {test_fraction} of {n} examples leaves one part empty"
        )
    return Dataset(x[~mask], y[~mask]), Dataset(x[mask], y[mask])
