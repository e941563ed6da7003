"""Image augmentation on the device: random crops with padding, flips, shifts, and a feed whose
augmented epochs are reproducible."""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
from nnlayers import Feed
from nnlayers.augment import Compose, RandomCrop, RandomFlip, RandomShift


def _images(n: int = 16, c: int = 2, h: int = 6, w: int = 7) -> np.ndarray:
    return np.random.default_rng(0).random((n, c, h, w), dtype=np.float32) + 1.0  # never 0


def _run(transform, x: np.ndarray, seed: int = 0) -> np.ndarray:
    xp = arraycore.namespace()
    out = transform(xp.asarray(x), xp.random.default_rng(seed))
    assert arraycore.namespace_of(out) is xp  # computed on the backend's device
    return np.asarray(xp.to_numpy(out))


def _window_offsets(out: np.ndarray, x: np.ndarray, pad: tuple[int, int]) -> list[tuple[int, int]]:
    """For each image, the offset of ``out``'s window in the zero-padded input (brute force)."""
    ph, pw = pad
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = out.shape[2:]
    found = []
    for i in range(len(x)):
        hits = [
            (dy, dx)
            for dy in range(padded.shape[2] - oh + 1)
            for dx in range(padded.shape[3] - ow + 1)
            if np.array_equal(padded[i, :, dy : dy + oh, dx : dx + ow], out[i])
        ]
        assert hits, f"image {i} is no window of its padded input"
        found.append(hits[0])
    return found


@pytest.mark.parametrize(("size", "padding"), [(None, 2), ((4, 5), 0), (6, (1, 3))])
def test_random_crop_takes_a_window_of_the_padded_image(size, padding) -> None:
    x = _images()
    out = _run(RandomCrop(size, padding=padding), x)
    want = (6, 7) if size is None else (size, size) if isinstance(size, int) else size
    assert out.shape == (16, 2, *want) and out.dtype == np.float32
    pad = (padding, padding) if isinstance(padding, int) else padding
    offsets = _window_offsets(out, x, pad)
    assert len(set(offsets)) > 3  # drawn per image


def test_random_crop_fill_and_errors() -> None:
    out = _run(RandomCrop(padding=3, fill=-1.0), _images(8))
    assert (out == -1.0).any()  # some of the padding shows
    with pytest.raises(ValueError, match=r"RandomCrop: a 9x9 crop does not fit 6x7 images"):
        _run(RandomCrop(9), _images())
    with pytest.raises(ValueError, match="RandomCrop: padding must be an int or a pair"):
        RandomCrop(padding=-1)
    with pytest.raises(ValueError, match=r"needs a batch of NCHW images \(4 axes\)"):
        _run(RandomCrop(2), np.zeros((3, 4, 4), np.float32))


def test_random_shift_keeps_the_size_and_moves_by_at_most_the_shift() -> None:
    x = _images()
    out = _run(RandomShift(1), x)
    assert out.shape == x.shape
    for dy, dx in _window_offsets(out, x, (1, 1)):
        assert 0 <= dy <= 2 and 0 <= dx <= 2


def test_random_flip() -> None:
    x = _images()
    np.testing.assert_array_equal(_run(RandomFlip(p=1.0), x), x[..., ::-1])
    np.testing.assert_array_equal(_run(RandomFlip(p=0.0), x), x)
    both = _run(RandomFlip(horizontal=False, vertical=True, p=1.0), x)
    np.testing.assert_array_equal(both, x[:, :, ::-1])
    out = _run(RandomFlip(), x)
    flipped = [np.array_equal(o, i[..., ::-1]) for o, i in zip(out, x, strict=True)]
    kept = [np.array_equal(o, i) for o, i in zip(out, x, strict=True)]
    assert all(f or k for f, k in zip(flipped, kept, strict=True))
    assert any(flipped) and any(kept)
    with pytest.raises(ValueError, match="RandomFlip: p must lie in"):
        RandomFlip(p=2)


def test_a_feed_augments_reproducibly_per_epoch() -> None:
    x, y = _images(10), np.arange(10)
    aug = [RandomCrop(padding=2), RandomFlip()]

    def epoch(feed: Feed) -> list[np.ndarray]:
        xp = arraycore.namespace()
        return [np.asarray(xp.to_numpy(b[0])) for b in feed]

    first, again = Feed(x, y, batch_size=4, seed=3, augment=aug), Feed(x, y, 4, seed=3, augment=aug)
    e1, e1_again = epoch(first), epoch(again)
    for a, b in zip(e1, e1_again, strict=True):
        np.testing.assert_array_equal(a, b)
    e2 = epoch(first)
    assert not all(np.array_equal(a, b) for a, b in zip(e1, e2, strict=True))
    again.set_epoch(2)
    for a, b in zip(e2, epoch(again), strict=True):
        np.testing.assert_array_equal(a, b)
    # labels are untouched and the unaugmented feed yields the data itself
    plain = Feed(x, y, batch_size=10, shuffle=False)
    xp = arraycore.namespace()
    ((bx, by),) = list(plain)
    np.testing.assert_array_equal(xp.to_numpy(by), y)
    np.testing.assert_array_equal(xp.to_numpy(bx), x)
    assert "augment=Compose" in repr(first)
    with pytest.raises(TypeError, match="augment must be a transform"):
        Feed(x, y, augment=3)


def test_training_with_augmentation() -> None:
    pytest.importorskip("sklearn")
    from nnlayers.datasets import load_digits, train_test_split
    from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential
    from nnlayers.models import Classifier
    from nnlayers.optim import Adam
    from nnlayers.train import fit

    train, test = train_test_split(*load_digits(), seed=0)
    net = Sequential([Conv2D(16, 3, padding="same", activation="relu"), Pool2D(2), Flatten(),
                      Affine(10)], seed=0)  # fmt: skip
    model = Classifier(net, (1, 8, 8))
    feed = Feed(train.inputs, train.targets, batch_size=64, augment=Compose([RandomShift(1)]))
    history = fit(model, feed, epochs=8, optimizer=Adam(3e-3), progress=False)
    losses = history["loss"]
    assert losses[-1] < losses[0]
    assert model.evaluate(test.inputs, test.targets)["accuracy"] > 0.85
