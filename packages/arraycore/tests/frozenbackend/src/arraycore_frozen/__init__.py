"""An arraycore backend written against backend protocol 1.0, as a third party would have from
docs/backends.md then, and frozen: NEVER EDIT THIS FILE to follow a new arraycore release.

Its arrays are its own class holding a host buffer; its element-wise ops are its own table of
the names protocol 1.0 lists (an op it does not know is a KeyError, as in a backend whose
library lacks a function). It declares no protocol version (so 1.0) and no optional primitive.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arraycore import ArrayBase
from arraycore.backend import Backend, Device

__version__ = "1.0.0"

_UNARY = {
    "negative": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "logical_not": np.logical_not, "isnan": np.isnan, "isinf": np.isinf,
}  # fmt: skip
_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal,
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}  # fmt: skip


class FrozenArray(ArrayBase):
    """A buffer on the (pretend) device: shape, dtype and device, nothing else."""

    __slots__ = ("buf", "dev")

    def __init__(self, buf: np.ndarray, dev: str) -> None:
        self.buf = buf
        self.dev = dev

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return tuple(int(n) for n in self.buf.shape)

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        return self.buf.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        return self.dev


class FrozenBackend(Backend):
    name = "frozen"
    install_hint = "pip install -e packages/arraycore/tests/frozenbackend"

    @classmethod
    def version(cls) -> str:
        return f"arraycore-frozen {__version__}"

    @classmethod
    def devices(cls) -> list[Device]:
        return [
            Device("frozen", "frozen0", "host memory (protocol 1.0 backend)", {"float64": True})
        ]

    def owns(self, x: Any) -> bool:
        return isinstance(x, FrozenArray)

    def _new(self, buf: Any) -> FrozenArray:
        return FrozenArray(np.asarray(buf), self.device.id)

    def from_numpy(self, a: np.ndarray) -> FrozenArray:
        return self._new(a.copy())

    def to_numpy(self, x: Any) -> np.ndarray:
        return x.buf.copy()

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: np.dtype) -> FrozenArray:
        return self._new(np.full(shape, fill_value, dtype))

    def unary(self, op: str, x: Any, out: Any = None) -> FrozenArray:
        if out is None:
            return self._new(_UNARY[op](x.buf))
        _UNARY[op](x.buf, out=out.buf)
        return out

    def binary(self, op: str, x1: Any, x2: Any, out: Any = None) -> FrozenArray:
        if out is None:
            return self._new(_BINARY[op](x1.buf, x2.buf))
        _BINARY[op](x1.buf, x2.buf, out=out.buf)
        return out

    def where(self, condition: Any, x1: Any, x2: Any) -> FrozenArray:
        return self._new(np.where(condition.buf, x1.buf, x2.buf))

    def astype(self, x: Any, dtype: np.dtype) -> FrozenArray:
        return self._new(x.buf.astype(dtype))

    def reduce(self, op: str, x: Any, axes: tuple[int, ...], keepdims: bool) -> FrozenArray:
        extra = {"dtype": x.dtype} if op in ("sum", "prod") else {}
        return self._new(getattr(np, op)(x.buf, axis=axes, keepdims=keepdims, **extra))

    def arg_reduce(self, op: str, x: Any, axis: int, keepdims: bool) -> FrozenArray:
        found = getattr(np, op)(x.buf, axis=axis, keepdims=keepdims)
        return self._new(np.asarray(found, dtype=np.int64))

    def matmul(self, x1: Any, x2: Any) -> FrozenArray:
        return self._new(np.matmul(x1.buf, x2.buf))

    def reshape(self, x: Any, shape: tuple[int, ...]) -> FrozenArray:
        return self._new(x.buf.reshape(shape))

    def permute_dims(self, x: Any, axes: tuple[int, ...]) -> FrozenArray:
        return self._new(x.buf.transpose(axes))

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> FrozenArray:
        return self._new(np.broadcast_to(x.buf, shape))

    def getitem(self, x: Any, key: Any) -> FrozenArray:
        return self._new(x.buf[key])

    def setitem(self, x: Any, key: Any, value: Any) -> None:
        x.buf[key] = value.buf

    def take(self, x: Any, indices: Any, axis: int) -> FrozenArray:
        return self._new(np.take(x.buf, indices.buf, axis=axis))

    def scatter_add(self, out: Any, indices: Any, values: Any, axis: int) -> None:
        np.add.at(out.buf, (slice(None),) * axis + (indices.buf,), values.buf)

    def rng_state(self, seed: int) -> Any:
        return np.random.Generator(np.random.PCG64(seed))

    def rng_uniform(self, state: Any, shape: tuple[int, ...], dtype: np.dtype) -> FrozenArray:
        return self._new(state.random(shape).astype(dtype))
