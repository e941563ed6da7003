"""scikit-learn's bundled digits and the deterministic train/test split."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from nnlayers.datasets import load_digits, train_test_split


def test_digits_as_images_in_unit_range():
    pytest.importorskip("sklearn")
    x, y = load_digits()
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    assert sorted(np.unique(y).tolist()) == list(range(10))
    np.testing.assert_allclose(x * 16, np.round(x * 16), atol=1e-5)


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r'pip install "nnlayers\[datasets\]"'):
        load_digits()


def test_split_is_deterministic_stratified_and_complete():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(103, 3))
    y = np.repeat(np.arange(4), [40, 30, 20, 13])
    train, test = train_test_split(x, y, test_fraction=0.25, seed=5)
    again = train_test_split(x, y, test_fraction=0.25, seed=5)
    np.testing.assert_array_equal(train.inputs, again[0].inputs)
    np.testing.assert_array_equal(test.targets, again[1].targets)
    assert np.bincount(test.targets).tolist() == [10, 8, 5, 3]
    assert len(train.targets) + len(test.targets) == 103
    rows = {tuple(r) for r in np.concatenate([train.inputs, test.inputs])}
    assert len(rows) == 103
    other = train_test_split(x, y, test_fraction=0.25, seed=6)[1]
    assert not np.array_equal(other.inputs, test.inputs)
    plain = train_test_split(x, y, test_fraction=0.2, seed=0, stratify=False)[1]
    assert len(plain.targets) == 21


def test_split_errors():
    x, y = np.zeros((10, 2)), np.zeros(10, dtype=np.int64)
    with pytest.raises(ValueError, match="same first axis"):
        train_test_split(x, y[:9])
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_split(x, y, test_fraction=1.0)
    with pytest.raises(ValueError, match="leaves one part empty"):
        train_test_split(x, y, test_fraction=0.01)
    with pytest.raises(ValueError, match="integer class labels"):
        train_test_split(x, np.zeros(10))


def test_docstring_examples_run():
    import doctest

    import nnlayers.datasets as datasets

    for module in (datasets, datasets.idx, datasets.synthetic, datasets.digits):
        assert doctest.testmod(module).failed == 0, module.__name__
