"""``xp.inplace.fuse(fn, scalar_operands=True)`` on OpenCL (``arraycore_opencl._fuse``): update
chains made of ``xp.inplace`` calls become one kernel with the plain calls' numbers, to the bit;
everything it does not express runs as it is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.backend import BackendUnavailable
from arraycore_opencl import OpenCLBackend
from arraycore_opencl._fuse import Fused

try:
    OpenCLBackend.probe()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)

NAMES = ("value", "grad", "m", "v", "tmp")


@pytest.fixture(scope="module")
def xp() -> Any:
    return arraycore.namespace("opencl", device=0)


def _adam(xp: Any) -> Any:
    """Adam's update as nnlayers writes it: in-place calls, scalars passed in."""
    ip = xp.inplace

    def adam(value, grad, m, v, tmp, b1, one_minus_b1, b2, one_minus_b2, c2, eps, step):  # type: ignore[no-untyped-def]
        ip.multiply(m, b1, out=m)
        ip.multiply(grad, one_minus_b1, out=tmp)
        ip.add(m, tmp, out=m)
        ip.multiply(grad, grad, out=tmp)
        ip.multiply(tmp, one_minus_b2, out=tmp)
        ip.multiply(v, b2, out=v)
        ip.add(v, tmp, out=v)
        ip.sqrt(v, out=tmp)
        ip.multiply(tmp, c2, out=tmp)
        ip.add(tmp, eps, out=tmp)
        ip.divide(m, tmp, out=tmp)
        ip.multiply(tmp, step, out=tmp)
        ip.subtract(value, tmp, out=value)
        ip.maximum(value, -1e6, out=value)  # a constant inside the chain

    return adam


def _arrays(xp: Any, dtype: str, shape: tuple[int, ...] = (37, 11)) -> tuple[dict, dict]:
    rng = np.random.default_rng(1)
    host = {k: rng.standard_normal(shape).astype(dtype) for k in NAMES}
    host["v"] = np.abs(host["v"])
    return (
        {k: xp.asarray(a.copy()) for k, a in host.items()},
        {k: xp.asarray(a.copy()) for k, a in host.items()},
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_update_chain_is_one_kernel_with_the_plain_calls_numbers(xp: Any, dtype: str) -> None:
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"this OpenCL device has no {dtype}")
    fused_args, plain_args = _arrays(xp, dtype)
    fused, plain = xp.inplace.fuse(_adam(xp), scalar_operands=True), _adam(xp)
    assert isinstance(fused, Fused)
    rt = xp._backend.rt
    for step in range(4):
        scalars = (0.9, 0.1, 0.999, 0.001, 1.0 / (1 + step), 1e-8, 0.01 * (step + 1))
        builds = rt.builds
        fused(*(fused_args[k] for k in NAMES), *scalars)
        plain(*(plain_args[k] for k in NAMES), *scalars)
        if step:  # new scalars reuse the kernel
            assert rt.builds == builds
    assert list(fused._kernels.values()) != [False]
    for k in NAMES:
        np.testing.assert_array_equal(
            xp.to_numpy(fused_args[k]), xp.to_numpy(plain_args[k]), err_msg=k
        )


def test_what_a_kernel_does_not_express_runs_as_it_is(xp: Any) -> None:
    """A temporary, an operator, a return value, aliased or strided arguments, mixed dtypes,
    and keywords: the function runs its plain calls, with their results."""
    ip = xp.inplace

    def with_temporary(value: Any, grad: Any, lr: float) -> None:
        ip.subtract(value, grad * lr, out=value)

    def returning(value: Any, grad: Any, lr: float) -> Any:
        ip.multiply(grad, lr, out=grad)
        return grad

    for fn in (with_temporary, returning):
        host = np.arange(6.0, dtype=np.float32)
        value, grad = xp.asarray(host.copy()), xp.asarray(np.ones(6, np.float32))
        fused = xp.inplace.fuse(fn, scalar_operands=True)
        fused(value, grad, 0.5)
        assert list(fused._kernels.values()) == [False], fn.__name__

    def axpy(y: Any, x: Any, a: float) -> None:
        ip.multiply(x, a, out=x)
        ip.add(y, x, out=y)

    fused = xp.inplace.fuse(axpy, scalar_operands=True)
    base = xp.asarray(np.arange(8.0, dtype=np.float32))
    fused(base[:4], base[2:6], 2.0)  # overlapping views: the plain calls' answer
    want = np.arange(8.0, dtype=np.float32)
    want[2:6] *= 2.0
    want[:4] += want[2:6]
    np.testing.assert_array_equal(xp.to_numpy(base), want)
    strided = xp.asarray(np.ones(8, np.float32))[::2]
    fused(strided, xp.asarray(np.ones(4, np.float32)), 1.0)
    np.testing.assert_array_equal(xp.to_numpy(strided), np.full(4, 2.0, np.float32))
    assert fused._kernels == {}  # none of these calls asked for a kernel
    assert xp.inplace.fuse(axpy) is axpy  # no promise, no tracing


def test_tracing_leaves_the_namespace_as_it_was(xp: Any) -> None:
    before = dict(vars(xp.inplace))
    fused = xp.inplace.fuse(_adam(xp), scalar_operands=True)
    args, _ = _arrays(xp, "float32", (5,))
    fused(*(args[k] for k in NAMES), 0.9, 0.1, 0.999, 0.001, 1.0, 1e-8, 0.01)
    assert {k: v for k, v in vars(xp.inplace).items() if k in before} == before
    out = xp.asarray(np.zeros(3, np.float32))
    xp.inplace.add(xp.asarray(np.ones(3, np.float32)), 2.0, out=out)
    np.testing.assert_array_equal(xp.to_numpy(out), np.full(3, 3.0, np.float32))
