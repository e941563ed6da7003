"""A primitives-only arraycore backend over host memory, for testing the third-party path.

It wraps NumPy buffers in its own array class so that nothing can silently take NumPy's own
functions: every namespace function reaches the data only through the primitives below.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arraycore import ArrayBase
from arraycore.backend import ELEMENTWISE, Array, Backend, Device, Key, Shape

__version__ = "0.1.0"


class TinyArray(ArrayBase):
    """An array of the tiny backend: a private host buffer plus shape, dtype and device."""

    __slots__ = ("_data", "_device")

    def __init__(self, data: np.ndarray, device: str) -> None:
        self._data = data
        self._device = device

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        return self._data.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        return self._device


def _d(x: TinyArray) -> np.ndarray:
    return x._data


#: Every primitive of the op table, by the NumPy function its entry names.
_OPS = {op.name: getattr(np, op.reference) for op in ELEMENTWISE if op.primitive}


class TinyBackend(Backend):
    """Only the required primitives; arraycore derives the rest.

    It declares the current protocol but none of its optional primitives, so the conformance
    kit on it checks arraycore's derived defaults of them (``arraycore._optional``), on a device
    with float64 and on one without. (Its ``unary`` and ``binary`` could compute them: arraycore
    never asks.)
    """

    name = "tiny"
    protocol_version = (1, 1)
    install_hint = "pip install packages/arraycore/tests/tinybackend"

    @classmethod
    def version(cls) -> str:
        return f"arraycore-tiny {__version__}"

    @classmethod
    def devices(cls) -> list[Device]:
        # Two devices, so that arraycore's device checks are exercised: the second lacks float64
        # and float16, like many GPUs and OpenCL devices.
        return [
            Device("tiny", "tiny0", "host memory (tiny test backend)", {"float64": True}),
            Device(
                "tiny",
                "tiny1",
                "host memory without float64 (tiny test backend)",
                {"float64": False, "float16": False},
            ),
        ]

    def owns(self, x: Any) -> bool:
        return isinstance(x, TinyArray)

    def device_of(self, x: Array) -> str:
        return str(x._device)

    def from_numpy(self, a: np.ndarray) -> TinyArray:
        return TinyArray(np.array(a, copy=True), self.device.id)

    def to_numpy(self, x: Array) -> np.ndarray:
        return np.array(_d(x), copy=True)

    def full(self, shape: Shape, fill_value: bool | int | float, dtype: np.dtype) -> TinyArray:
        return TinyArray(np.full(shape, fill_value, dtype=dtype), self.device.id)

    def unary(self, op: str, x: Array, out: Array | None = None) -> TinyArray:
        if out is not None:
            _OPS[op](_d(x), out=_d(out))
            return out
        return TinyArray(np.asarray(_OPS[op](_d(x))), self.device.id)

    def binary(self, op: str, x1: Array, x2: Array, out: Array | None = None) -> TinyArray:
        if out is not None:
            _OPS[op](_d(x1), _d(x2), out=_d(out))
            return out
        return TinyArray(np.asarray(_OPS[op](_d(x1), _d(x2))), self.device.id)

    def where(self, condition: Array, x1: Array, x2: Array) -> TinyArray:
        return TinyArray(np.where(_d(condition), _d(x1), _d(x2)), self.device.id)

    def astype(self, x: Array, dtype: np.dtype) -> TinyArray:
        return TinyArray(_d(x).astype(dtype, copy=True), self.device.id)

    def reduce(self, op: str, x: Array, axes: tuple[int, ...], keepdims: bool) -> TinyArray:
        fn = getattr(np, op)
        # NumPy's sum/prod widen small integers; the primitive keeps the input dtype.
        kwargs = {"dtype": _d(x).dtype} if op in ("sum", "prod") else {}
        return TinyArray(
            np.asarray(fn(_d(x), axis=axes, keepdims=keepdims, **kwargs)), self.device.id
        )

    def arg_reduce(self, op: str, x: Array, axis: int, keepdims: bool) -> TinyArray:
        fn = np.argmax if op == "argmax" else np.argmin
        return TinyArray(
            np.asarray(fn(_d(x), axis=axis, keepdims=keepdims), dtype=np.int64), self.device.id
        )

    def matmul(self, x1: Array, x2: Array) -> TinyArray:
        return TinyArray(np.matmul(_d(x1), _d(x2)), self.device.id)

    def reshape(self, x: Array, shape: Shape) -> TinyArray:
        return TinyArray(np.reshape(_d(x), shape), self.device.id)

    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> TinyArray:
        return TinyArray(np.transpose(_d(x), axes), self.device.id)

    def broadcast_to(self, x: Array, shape: Shape) -> TinyArray:
        return TinyArray(np.broadcast_to(_d(x), shape), self.device.id)

    def getitem(self, x: Array, key: Key) -> TinyArray:
        return TinyArray(np.asarray(_d(x)[key]), self.device.id)

    def setitem(self, x: Array, key: Key, value: Array) -> None:
        _d(x)[key] = _d(value)

    def take(self, x: Array, indices: Array, axis: int) -> TinyArray:
        return TinyArray(np.take(_d(x), _d(indices), axis=axis), self.device.id)

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        key = (slice(None),) * axis + (_d(indices),)
        np.add.at(_d(out), key, _d(values))

    def rng_state(self, seed: int) -> np.random.Generator:
        return np.random.Generator(np.random.Philox(seed))

    def rng_uniform(self, state: Any, shape: Shape, dtype: np.dtype) -> TinyArray:
        return TinyArray(state.random(shape).astype(dtype), self.device.id)
