"""Conformance of NumPy's array methods on the backend's arrays (``x.sum()``, ``x.reshape(2, 3)``,
``x.astype("float32")``, ``x.item()``, ...): each call of :data:`arraycore.testing.array_methods.
CASES` on the backend's arrays (contiguous and strided) gives what it gives on NumPy's, with
NumPy's shapes and dtypes, and the same Python objects where NumPy returns them.

On a device without float64, a result NumPy gives as float64 (``x.mean()`` of integers) is the
device's default float, float32; ``x.astype(float)`` is skipped there.

Arrays built on :class:`arraycore.ArrayBase` are also checked for what NumPy's arrays do not
have: the ``AttributeError`` of NumPy-only methods (naming the portable call), of unknown names
(with a close match), and strict mode (``arraycore.strict()``). The NumPy backend's arrays are
``numpy.ndarray``: those tests skip there.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import ArrayBase
from arraycore.testing import strategies as acst
from arraycore.testing.array_methods import (
    CASES,
    FLOAT64_CASES,
    assert_same,
    host_input,
    script,
)

LAYOUTS = ("contiguous", "transposed", "reversed")


def _has_float64(xp: Any) -> bool:
    return "float64" in xp.__array_namespace_info__().dtypes()


def _own_arrays(xp: Any) -> None:
    if not isinstance(xp.asarray(0.0), ArrayBase):
        pytest.skip(f"backend {xp.name!r} hands out {type(xp.asarray(0.0)).__name__} arrays")


@pytest.mark.parametrize("label", sorted(CASES))
def test_method(xp: Any, label: str) -> None:
    inputs, call = CASES[label]
    has_float64 = _has_float64(xp)
    if label in FLOAT64_CASES and not has_float64:
        pytest.skip(f"the device of backend {xp.name!r} has no float64 (NumPy's result)")
    for name in inputs:
        host = host_input(name)
        want = call(host.copy())
        for layout in LAYOUTS:
            x = acst.on_device(xp, host, layout)
            got = call(x)
            assert_same(got, want, has_float64=has_float64, label=f"{label} on {name}, {layout}")
            assert_same(x, host, label=f"{label} changed its input {name}")


def test_script(xp: Any) -> None:
    """A user's script written with NumPy's methods gives NumPy's results."""
    want = script(arraycore.namespace("numpy"))
    got = script(xp)
    assert got.keys() == want.keys()
    for key in want:
        assert_same(got[key], want[key], label=key)


def test_options_numpy_has_and_arraycore_refuses(xp: Any) -> None:
    """``out=``, ``order='F'`` and NumPy's other options are errors, never ignored."""
    _own_arrays(xp)
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=xp.float32)
    with pytest.raises(TypeError, match=r"x\.sum\(out=\.\.\.\).*return new arrays"):
        x.sum(out=xp.zeros(()))
    with pytest.raises(TypeError, match=r"x\.max\(where=\).*NumPy-only"):
        x.max(where=True)
    with pytest.raises(TypeError, match=r"x\.sum\(\) got an unexpected keyword argument 'axs'"):
        x.sum(axs=0)
    with pytest.raises(ValueError, match=r"order='F'.*C order"):
        x.reshape(4, order="F")
    with pytest.raises(ValueError, match=r"order='F'"):
        x.flatten("F")
    with pytest.raises(TypeError, match=r"cannot cast float32 to int8 with casting='safe'"):
        x.astype("int8", casting="safe")
    with pytest.raises(ValueError, match="size 1"):
        x.item()
    with pytest.raises(np.exceptions.AxisError):
        x.swapaxes(0, 2)


def test_numpy_only_names_the_portable_call(xp: Any) -> None:
    _own_arrays(xp)
    x = xp.asarray([1.0, 2.0])
    kind = type(x).__name__
    with pytest.raises(AttributeError) as info:
        x.tofile("x.bin")
    assert str(info.value) == (
        f"{kind!r} (backend {xp.name!r}) has no method 'tofile' (NumPy-only); "
        f"write xp.to_numpy(x).tofile(...)"
    )
    with pytest.raises(AttributeError, match=r"'view' \(NumPy-only\); write xp\.astype"):
        x.view("int32")
    assert not hasattr(x, "flags")
    assert getattr(x, "ctypes", None) is None


def test_unknown_names_suggest_a_close_one(xp: Any) -> None:
    _own_arrays(xp)
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(
        AttributeError, match=r"has no attribute 'reshap'\. Did you mean: 'reshape'"
    ):
        x.reshap(2, 1)
    with pytest.raises(AttributeError) as info:
        x.qwertyuiop  # noqa: B018
    assert str(info.value) == f"{type(x).__name__!r} object has no attribute 'qwertyuiop'"


def test_protocol_probes_and_copies(xp: Any) -> None:
    """Dunder and private names are plain AttributeErrors (``hasattr`` of protocols stays
    false); ``copy``, ``deepcopy`` copy the data."""
    _own_arrays(xp)
    x = xp.asarray([1.0, 2.0])
    for name in ("__cuda_array_interface__", "__array_interface__", "__array_struct__", "_nope"):
        assert not hasattr(x, name)
        with pytest.raises(AttributeError, match=f"object has no attribute {name!r}$"):
            getattr(x, name)
    y, z = copy.copy(x), copy.deepcopy(x)
    x[0] = 5.0
    assert y.tolist() == z.tolist() == [1.0, 2.0]
    try:
        restored = pickle.loads(pickle.dumps(x))
    except (TypeError, pickle.PicklingError, AttributeError) as error:
        assert "__getattr__" not in str(error)  # device buffers may not pickle; never our hook
    else:
        assert restored.tolist() == [5.0, 2.0]


def test_strict_mode(xp: Any) -> None:
    """``arraycore.strict()``: NumPy's methods are gone (``hasattr`` is false) and their errors
    name the standard's call; the standard's attributes and operators stay."""
    _own_arrays(xp)
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert not arraycore.strict.enabled()
    with arraycore.strict():
        assert arraycore.strict.enabled()
        assert not hasattr(x, "sum") and not hasattr(x, "nbytes")
        with pytest.raises(AttributeError, match=r"'sum' in arraycore's strict mode.*xp\.sum\(x"):
            x.sum()
        with pytest.raises(AttributeError, match=r"strict mode.*xp\.reshape\(x, shape\)"):
            x.reshape(4)
        assert float(xp.sum(x)) == 10.0
        assert (x.T @ x).shape == (2, 2) and x.mT.shape == (2, 2) and x.ndim == 2
        with arraycore.strict(False):
            assert float(x.sum()) == 10.0
        assert not hasattr(x, "sum")
    assert not arraycore.strict.enabled()
    assert float(x.sum()) == 10.0
