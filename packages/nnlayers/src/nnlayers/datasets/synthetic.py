"""Data that needs no download: interleaved spirals for classifiers in two dimensions."""

from __future__ import annotations

import numpy as np

from ._files import Dataset


def spirals(n_per_class: int = 100, classes: int = 3, noise: float = 0.2, seed: int = 0) -> Dataset:
    """``classes`` interleaved spiral arms of ``n_per_class`` points each (CS231n's data set).

    Arm ``k`` has points at radius ``r`` from 0 to 1 and angle ``4k + 4r`` (plus Gaussian noise
    of standard deviation ``noise``): ``(r sin t, r cos t)``. Returns float32 inputs ``(N, 2)``
    and int64 labels ``(N,)``, ordered by class; the same ``seed`` gives the same points.

    >>> x, y = spirals(50, classes=2, noise=0.1, seed=1)
    >>> x.shape, x.dtype.name, y.tolist().count(1)
    ((100, 2), 'float32', 50)
    """
    for name, value, low in (("n_per_class", n_per_class, 1), ("classes", classes, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"spirals: {name} must be an int >= {low}, got {value!r}")
    if not isinstance(noise, int | float) or isinstance(noise, bool) or not noise >= 0:
        raise ValueError(f"spirals: noise must be a number >= 0, got {noise!r}")
    rng = np.random.default_rng(seed)
    radius = np.linspace(0.0, 1.0, n_per_class)
    inputs = np.empty((n_per_class * classes, 2), dtype=np.float64)
    targets = np.repeat(np.arange(classes, dtype=np.int64), n_per_class)
    for k in range(classes):
        angle = np.linspace(4.0 * k, 4.0 * (k + 1), n_per_class)
        angle = angle + rng.normal(scale=noise, size=n_per_class) if noise else angle
        rows = slice(k * n_per_class, (k + 1) * n_per_class)
        inputs[rows, 0] = radius * np.sin(angle)
        inputs[rows, 1] = radius * np.cos(angle)
    return Dataset(inputs.astype(np.float32), targets)
