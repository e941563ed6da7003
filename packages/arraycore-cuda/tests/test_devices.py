"""Device ids and the override table: these need the ``cupy`` module, not a GPU."""

from __future__ import annotations

import operator
from typing import Any

import pytest

import arraycore
from arraycore_cuda import backend


def test_override_names_exist_in_the_namespace() -> None:
    """Every name the backend may override is one arraycore has (checked without CuPy)."""
    ns = arraycore.namespace("numpy")
    for dotted in sorted(backend.OVERRIDE_NAMES):
        owner: Any = ns
        *path, attr = dotted.split(".")
        for part in path:
            owner = getattr(owner, part)
        assert hasattr(owner, attr), dotted


def test_overrides_switch() -> None:
    assert backend.ENV_OVERRIDES == "ARRAYCORE_CUDA_OVERRIDES"
    with pytest.MonkeyPatch.context() as mp:
        for value, expected in (
            ("", True),
            ("all", True),
            ("1", True),
            ("none", False),
            ("0", False),
        ):
            mp.setenv(backend.ENV_OVERRIDES, value)
            assert backend.overrides_enabled() is expected
        mp.setenv(backend.ENV_OVERRIDES, "some")
        with pytest.raises(ValueError, match="ARRAYCORE_CUDA_OVERRIDES"):
            backend.overrides_enabled()


def test_override_table_binds_existing_cupy_functions() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    table = backend.override_table(cupy, 0)
    assert set(table) == backend.CUPY_OVERRIDE_NAMES <= backend.OVERRIDE_NAMES
    for name in backend.SAME_AS_CUPY:
        assert table[name] is getattr(cupy, name)
    assert table["pow"] is cupy.power
    assert table["inplace.add"] is cupy.add
    for name in backend.FLOAT_ADAPTED:  # arraycore-cuda's kernels for floats
        assert table[name] is not getattr(cupy, name) and table[name].__name__ == name
        assert table[f"inplace.{name}"] is table[name]


def test_device_ids_equal_cupy_devices_and_indices() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    device_id = backend.device_id_type()
    d0, d1 = device_id(0), device_id(1)
    assert isinstance(d0, cupy.cuda.Device)
    # what arrays report (x.device) and what users pass (an index) match, in both orders
    for a, b in ((d0, cupy.cuda.Device(0)), (cupy.cuda.Device(0), d0), (d0, 0), (0, d0)):
        assert operator.eq(a, b), (a, b)
        assert not operator.ne(a, b), (a, b)
    for a, b in ((d0, d1), (d0, 1), (1, d0), (d1, cupy.cuda.Device(0)), (d0, "no-such-device")):
        assert operator.ne(a, b), (a, b)
        assert not operator.eq(a, b), (a, b)
    assert not operator.eq(d0, None)
    assert str(d0) == "0"
    # hashable like its index: arraycore keys namespaces by (backend, device id)
    assert {("cuda", d0): "ns"}[("cuda", 0)] == "ns"
    assert {("cuda", 0): "ns"}[("cuda", d0)] == "ns"
    assert d0 in [cupy.cuda.Device(0)] and cupy.cuda.Device(0) in [d0]


def test_nn_overrides_are_namespace_functions() -> None:
    """The ``nn`` table (cuDNN/im2col convolutions, batch-norm, the shared kernels) covers
    exactly :data:`NN_OVERRIDES`, each an ``xp.nn`` function (needs CuPy, not a GPU)."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    from arraycore_cuda._nn_cuda import NN_OVERRIDES, CudaNN

    table = CudaNN(cupy).table()
    assert set(table) == {f"nn.{name}" for name in NN_OVERRIDES}
    ns = arraycore.namespace("numpy")
    for name in NN_OVERRIDES:
        assert callable(getattr(ns.nn, name)), name
