"""The backend of protocol 1.0 in ``tests/frozenbackend`` stays as it was written (#45).

It stands for every third-party backend published against the first protocol version: arraycore
must keep running it, unchanged, on every later release (CI: ``nox -s "conformance(frozen)"``
and ``nox -s tests_on_frozen``). So it may never be edited to follow arraycore: this test
fails if its source changes. A change to arraycore that breaks it breaks the protocol's promise
(docs/backends.md, "Protocol versions"), and the fix belongs in arraycore.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

import arraycore
from arraycore.backend import BINARY_OPS, UNARY_OPS

SOURCE = Path(__file__).parent / "frozenbackend" / "src" / "arraycore_frozen" / "__init__.py"
#: sha256 of the source as written for protocol 1.0 (line endings as \n). Never update it.
FROZEN_SHA256 = "8c293085f62395ee10da347691775fd1e1aec8e48ebfa43eab39ccaa14ade0de"


def test_the_frozen_backend_is_unchanged() -> None:
    text = SOURCE.read_bytes().replace(b"\r\n", b"\n")
    assert hashlib.sha256(text).hexdigest() == FROZEN_SHA256, (
        f"{SOURCE} changed: it must stay as written for protocol 1.0 (see its docstring)"
    )


def test_it_declares_nothing_and_implements_protocol_1_0_only() -> None:
    from arraycore_frozen import _BINARY, _UNARY, FrozenBackend

    assert "protocol_version" not in vars(FrozenBackend)
    assert "optional_primitives" not in vars(FrozenBackend)
    assert set(_UNARY) == UNARY_OPS and set(_BINARY) == BINARY_OPS
    xp = arraycore.namespace("frozen")
    assert xp._backend.protocol_version == (1, 0)
    x = xp.asarray(np.array([0.5, 2.0, -3.0]))
    np.testing.assert_allclose(xp.to_numpy(xp.atan2(x, 1.0)), np.arctan2([0.5, 2.0, -3.0], 1.0))
    assert xp.to_numpy(xp.asarray(np.array([6, 3])) & 5).tolist() == [4, 1]
