"""Data augmentation for images, on the backend's device: random crops with padding, flips and
small shifts, applied batch by batch by a :class:`nnlayers.Feed` (``augment=``).

Each transform takes a batch of NCHW images (an arraycore array on any backend) and a random
generator of that backend (``xp.random.default_rng``), and returns a new batch; nothing goes
through the host. A feed draws one generator per epoch from its ``seed`` and the epoch, so an
epoch's crops and flips are the same every run (and after a resume) on a given backend.

>>> import numpy as np
>>> from nnlayers import Feed
>>> from nnlayers.augment import RandomCrop, RandomFlip
>>> x = np.random.default_rng(0).random((8, 3, 32, 32), dtype=np.float32)
>>> y = np.arange(8)
>>> feed = Feed(x, y, batch_size=4, augment=[RandomCrop(32, padding=4), RandomFlip()])
>>> [tuple(b[0].shape) for b in feed]
[(4, 3, 32, 32), (4, 3, 32, 32)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import arraycore
from arraycore import namespace_of

Array = Any


def _pair(value: Any, what: str, owner: str, minimum: int) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if (
        len(pair) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
        or min(pair) < minimum
    ):
        raise ValueError(
            f"{owner}: {what} must be an int or a pair of ints >= {minimum}, got {value!r}"
        )
    return pair[0], pair[1]


def _images(owner: str, x: Array) -> tuple[int, int, int, int]:
    if len(x.shape) != 4:
        raise ValueError(
            f"{owner}: needs a batch of NCHW images (4 axes), got shape {tuple(x.shape)}"
        )
    n, c, h, w = (int(s) for s in x.shape)
    return n, c, h, w


def _offsets(xp: Any, rng: Any, n: int, choices: int) -> Array:
    """``n`` integers drawn uniformly from ``[0, choices)``, as an int64 device array."""
    u = rng.uniform(0.0, 1.0, (n,), dtype=xp.float32)
    k = xp.astype(xp.floor(xp.multiply(u, float(choices))), xp.int64)
    return xp.minimum(k, choices - 1)  # u * choices may round up to choices in float32


class Augment:
    """Base class: ``transform(x, rng) -> x`` on a batch of NCHW images."""

    def __call__(self, x: Array, rng: Any) -> Array:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class RandomCrop(Augment):
    """Pad every image by ``padding`` pixels of ``fill`` on each side, then crop a window of
    ``size`` (``(h, w)``, or one int; default: the image's own size) at an offset drawn
    uniformly per image: torchvision's ``RandomCrop(size, padding)``, the CIFAR-10 recipe
    (``RandomCrop(32, padding=4)``)."""

    def __init__(
        self, size: int | Sequence[int] | None = None, padding: Any = 0, fill: float = 0.0
    ):
        self.size = None if size is None else _pair(size, "size", "RandomCrop", 1)
        self.padding = _pair(padding, "padding", "RandomCrop", 0)
        self.fill = float(fill)

    def __call__(self, x: Array, rng: Any) -> Array:
        xp = namespace_of(x)
        n, c, h, w = _images("RandomCrop", x)
        ph, pw = self.padding
        hp, wp = h + 2 * ph, w + 2 * pw
        oh, ow = self.size if self.size is not None else (h, w)
        if oh > hp or ow > wp:
            raise ValueError(
                f"RandomCrop: a {oh}x{ow} crop does not fit {h}x{w} images padded by "
                f"{self.padding} ({hp}x{wp})"
            )
        if (ph or pw) and n:
            padded = xp.full((n, c, hp, wp), self.fill, dtype=x.dtype)
            padded[:, :, ph : ph + h, pw : pw + w] = x
        else:
            padded = x
        if n == 0:
            return xp.zeros((0, c, oh, ow), dtype=x.dtype)
        top = _offsets(xp, rng, n, hp - oh + 1)
        left = _offsets(xp, rng, n, wp - ow + 1)
        rows = xp.reshape(top, (n, 1, 1, 1)) + xp.reshape(
            xp.arange(oh, dtype=xp.int64), (1, 1, oh, 1)
        )
        cols = xp.reshape(left, (n, 1, 1, 1)) + xp.reshape(
            xp.arange(ow, dtype=xp.int64), (1, 1, 1, ow)
        )
        # rows and columns inside the padded images by construction: arraycore's check of
        # them would only make a device wait for its queue
        with arraycore.checks(False, only="indices"):
            picked = xp.take_along_axis(padded, xp.broadcast_to(rows, (n, c, oh, wp)), axis=2)
            return xp.take_along_axis(picked, xp.broadcast_to(cols, (n, c, oh, ow)), axis=3)


class RandomShift(RandomCrop):
    """Translate every image by up to ``max_shift`` pixels (an int or ``(dy, dx)``) each way,
    drawn uniformly per image, filling the uncovered border with ``fill``: Keras's
    ``RandomTranslation`` in pixels, the same size out as in."""

    def __init__(self, max_shift: Any = 2, fill: float = 0.0):
        super().__init__(None, padding=max_shift, fill=fill)


class RandomFlip(Augment):
    """Mirror each image with probability ``p``: left-right (``horizontal``), and/or top-bottom
    (``vertical``), drawn independently per image and per direction."""

    def __init__(self, horizontal: bool = True, vertical: bool = False, p: float = 0.5):
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"RandomFlip: p must lie in [0, 1], got {p!r}")
        if not (horizontal or vertical):
            raise ValueError("RandomFlip: flips nothing; set horizontal=True or vertical=True")
        self.horizontal = bool(horizontal)
        self.vertical = bool(vertical)
        self.p = float(p)

    def __call__(self, x: Array, rng: Any) -> Array:
        xp = namespace_of(x)
        n = _images("RandomFlip", x)[0]
        for axis, on in ((3, self.horizontal), (2, self.vertical)):
            if on and n:
                flip = rng.uniform(0.0, 1.0, (n,), dtype=xp.float32) < self.p
                x = xp.where(xp.reshape(flip, (n, 1, 1, 1)), xp.flip(x, axis=axis), x)
        return x


class Compose(Augment):
    """Several transforms, applied in order."""

    def __init__(self, transforms: Sequence[Callable[[Array, Any], Array]]):
        self.transforms = list(transforms)
        for t in self.transforms:
            if not callable(t):
                raise TypeError(f"Compose: {t!r} is not a transform (x, rng) -> x")

    def __call__(self, x: Array, rng: Any) -> Array:
        for t in self.transforms:
            x = t(x, rng)
        return x


def as_transform(augment: Any) -> Callable[[Array, Any], Array] | None:
    """``None``, one transform, or a list of them (composed in order) as one transform."""
    if augment is None:
        return None
    if isinstance(augment, list | tuple):
        return Compose(augment)
    if not callable(augment):
        raise TypeError(
            f"Feed: augment must be a transform (x, rng) -> x or a list of them, got {augment!r}"
        )
    return augment  # type: ignore[no-any-return]


def epoch_seed(seed: int, epoch: int) -> int:
    """The augmentation generator's seed for ``epoch`` of a feed seeded ``seed`` (distinct from
    the shuffling stream)."""
    return (int(seed) * 1_000_003 + int(epoch) * 7919 + 17) % (2**31 - 1)


__all__ = ["Augment", "Compose", "RandomCrop", "RandomFlip", "RandomShift", "as_transform"]
