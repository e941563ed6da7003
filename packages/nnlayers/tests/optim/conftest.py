"""Fixtures for the optimiser tests: duck-typed parameters on the active backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


class Param:
    """The smallest object the optimisers accept: name, value, grad (+ optional settings)."""

    def __init__(self, name: str, value: Any, grad: Any = None, **settings: Any) -> None:
        self.name = name
        self.value = value
        self.grad = grad
        for key, val in settings.items():
            setattr(self, key, val)


@pytest.fixture
def make_param(xp):
    """``make_param(name, host_value, **settings)``: a float64 parameter on the active backend."""

    def make(name: str, value: Any, **settings: Any) -> Param:
        return Param(name, xp.asarray(np.asarray(value, dtype=np.float64)), None, **settings)

    return make


@pytest.fixture
def host(xp):
    """``host(array)``: a float64 NumPy copy of a backend array."""

    def to_host(x: Any) -> np.ndarray:
        return np.asarray(xp.to_numpy(x), dtype=np.float64)

    return to_host
