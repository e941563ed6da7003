"""The typed protocol (arraycore/protocol.py) is what its generator writes from the namespace."""

from __future__ import annotations

import inspect

import arraycore
from arraycore import _protocol_gen, protocol
from arraycore._namespace import Namespace


def test_the_checked_in_protocol_is_up_to_date() -> None:
    assert _protocol_gen.TARGET.read_text() == _protocol_gen.render(), (
        "arraycore/protocol.py is stale: run `python -m arraycore._protocol_gen`"
    )


def test_every_namespace_function_is_in_the_protocol_with_its_signature() -> None:
    for name in arraycore.FUNCTIONS:
        declared = getattr(protocol.ArrayNamespace, name)
        want = inspect.signature(getattr(Namespace, name))
        got = inspect.signature(declared)
        assert list(got.parameters) == [p for p in want.parameters if p != "self"] or list(
            got.parameters
        ) == list(want.parameters), name
        kinds = [p.kind for p in got.parameters.values() if p.name != "self"]
        assert kinds == [p.kind for p in want.parameters.values() if p.name != "self"], name


def test_namespaces_satisfy_the_protocol() -> None:
    xp = arraycore.namespace("numpy")
    assert isinstance(xp, protocol.ArrayNamespace)
    assert isinstance(xp.nn, protocol.NNFunctions)
    assert isinstance(xp.inplace, protocol.InplaceFunctions)
    assert isinstance(xp.random, protocol.RandomFunctions)
    assert isinstance(xp.linalg, protocol.LinalgFunctions)
    assert arraycore.ArrayNamespace is protocol.ArrayNamespace
