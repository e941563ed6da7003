"""The examples in the docstrings of ``nnlayers.train`` run and print what they claim."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import nnlayers.train as package

MODULES = [package.__name__] + [
    f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
