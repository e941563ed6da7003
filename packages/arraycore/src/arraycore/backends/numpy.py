"""The NumPy reference backend: the semantics every other backend is tested against.

It implements the required primitives with NumPy and overrides nearly every derived function
with NumPy's own (NumPy 2 follows the Array API standard), so ``xp.add is numpy.add`` and a
namespace call costs what a NumPy call costs. 0-d results are NumPy scalars, as in NumPy; they
have ``shape``, ``dtype`` and the operators, and the namespace accepts them as 0-d arrays.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._interop import require_dlpack
from ..backend import (
    ELEMENTWISE,
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    Array,
    Backend,
    Device,
    Key,
    Shape,
)
from . import _malloc, _numba, _onednn

#: The NumPy function of every primitive of the op table (``"pow"``: ``numpy.power``).
_UFUNCS: dict[str, Callable[..., Any]] = {
    op.name: getattr(np, op.reference) for op in ELEMENTWISE if op.primitive
}

_REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "any": np.any,
    "all": np.all,
}

# Namespace functions besides the element-wise ones whose NumPy 2 implementation already has the
# standard's signature and semantics; the namespace binds them directly.
_SAME_AS_NUMPY = [
    "where",
    "sum",
    "prod",
    "mean",
    "var",
    "std",
    "max",
    "min",
    "argmax",
    "argmin",
    "all",
    "any",
    "cumulative_sum",
    "cumulative_prod",
    "matmul",
    "tensordot",
    "vecdot",
    "matrix_transpose",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "broadcast_to",
    "concat",
    "stack",
    "flip",
    "tile",
    "repeat",
    "moveaxis",
    "take_along_axis",
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "linspace",
    "eye",
    "astype",
    "reshape",
    "take",
    "arange",
]


# Where NumPy's answer for integer or bool inputs is not arraycore's dtype rule (docs/dtypes.md):
# it computes sqrt ... cos of int8, uint8 and bool in float16 and of int16 in float32 (the
# smallest float that holds them; the rule is the default float), rounds bool to float16, squares
# bool to int8, answers bool // bool, bool % bool and bool ** bool in int8 (the rule: TypeError)
# and wraps a Python int out of range in where (the rule: OverflowError). The namespace calls
# these NumPy functions for floating inputs and arraycore's derived ones for the rest.
# Element-wise functions the namespace never takes from NumPy: numpy.real and numpy.imag of a real
# array return views of it (the standard: new arrays), numpy.conj of bool is int8.
_UNBOUND = frozenset({"real", "imag", "conj"})

_NOT_CONFORMING = frozenset(
    {
        # every float-result function but divide (NumPy's true_divide gives float64 for integers)
        *(op.name for op in ELEMENTWISE if op.result == "float" and op.name != "divide"),
        *("round", "square", "trunc", "signbit", "floor_divide", "remainder", "pow", "where"),
        *("bitwise_left_shift", "bitwise_right_shift"),  # NumPy shifts bools as int8
    }
)


#: ``scatter_add`` uses ``numpy.add.at`` below this many indices or this many elements per index
#: (``add.at`` costs about 8 ns per element added, the rounds below a few microseconds each).
_SCATTER_MIN_INDICES = 32
_SCATTER_MIN_ROW = 16
#: Rounds of distinct indices at most; the further repeats of an index are summed in one block.
_SCATTER_ROUNDS = 32


def _scatter_add(
    out: np.ndarray, indices: np.ndarray, values: np.ndarray, axis: int = 0
) -> np.ndarray:
    """``out[..., indices[i], ...] += values[..., i, ...]`` with repeats accumulating.

    ``numpy.add.at`` does it one element at a time (an embedding's gradient: 35 ms for 8192 rows
    of 512 into 100 rows). Here, for enough indices of wide enough rows, a stable sort gives each
    occurrence its rank among the repeats of its index; round ``r`` adds every index's ``r``-th
    occurrence with one vectorised ``+=`` (the indices of a round are distinct, so that is exact
    and in add.at's order), and an index repeated more than ``_SCATTER_ROUNDS`` times has the
    rest of its rows summed in one reduction: 3 ms in that example, 5 to 10 times faster than
    add.at wherever the rows are wide. Floating sums may differ from add.at's in the last bits.
    With numba (:mod:`._numba`), float rows along axis 0 are one compiled loop in add.at's order.
    """
    ax = axis % out.ndim
    if _numba.scatter_add(out, indices, values, ax):
        return out
    n = int(indices.shape[0])
    if (
        n < _SCATTER_MIN_INDICES
        or values.size < _SCATTER_MIN_ROW * n
        or out.dtype.kind not in "fciu"
    ):
        key = (slice(None),) * ax + (indices,)
        np.add.at(out, key, values)  # type: ignore[arg-type]
        return out
    if np.may_share_memory(out, values):
        values = values.copy()
    dst = np.moveaxis(out, ax, 0) if ax else out  # views: writes reach out
    src = np.moveaxis(values, ax, 0) if ax else values
    order = np.argsort(indices, kind="stable")
    ids = indices[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(ids[1:], ids[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(starts, append=n)
    rank = np.arange(n) - np.repeat(starts, counts)  # occurrence number within its index
    per_rank = np.bincount(rank)
    bounds = np.zeros(len(per_rank) + 1, dtype=np.int64)
    np.cumsum(per_rank, out=bounds[1:])
    by_rank = order[np.argsort(rank, kind="stable")]
    rounds = min(len(per_rank), _SCATTER_ROUNDS)
    for r in range(rounds):
        picked = by_rank[bounds[r] : bounds[r + 1]]
        dst[indices[picked]] += src[picked]
    for g in np.flatnonzero(counts > rounds).tolist():
        begin = int(starts[g])
        rest = order[begin + rounds : begin + int(counts[g])]
        dst[ids[begin]] += np.sum(src[rest], axis=0, dtype=out.dtype)
    return out


def _fast_reduction(ufunc: np.ufunc, slow: Callable[..., Any]) -> Callable[..., Any]:
    """``sum``/``max``/``min`` calling ``ufunc.reduce`` directly for floating ndarrays.

    That is what NumPy's own function ends up doing for them, minus a few microseconds of
    argument handling per call, which a training step of a small network makes hundreds of.
    Anything else (other dtypes, ``dtype=``, scalars, more arguments) goes to NumPy's function.
    """

    def reduction(x: Any, /, *, axis: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
        if not kwargs and type(x) is np.ndarray and x.dtype.kind == "f" and x.ndim:
            return ufunc.reduce(x, axis=axis, keepdims=keepdims)
        return slow(x, axis=axis, keepdims=keepdims, **kwargs)

    # the standard's signature (sum's dtype= included), not the catch-all **kwargs
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("axis", keyword, default=None),
        *([inspect.Parameter("dtype", keyword, default=None)] if slow is np.sum else []),
        inspect.Parameter("keepdims", keyword, default=False),
    ]
    reduction.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    reduction.__name__ = reduction.__qualname__ = slow.__name__
    reduction.__doc__ = slow.__doc__
    return reduction


def _matrix_transpose(x: Any, /) -> Any:
    """``x.mT`` (NumPy's function spends its time checking arguments)."""
    return x.mT if type(x) is np.ndarray and x.ndim >= 2 else np.matrix_transpose(x)


_FAST_REDUCTIONS = {
    "sum": _fast_reduction(np.add, np.sum),
    "max": _fast_reduction(np.maximum, np.max),
    "min": _fast_reduction(np.minimum, np.min),
}


def _from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> np.ndarray:
    """NumPy's ``from_dlpack`` (zero-copy), with arraycore's error for objects without DLPack."""
    require_dlpack(x)
    result: np.ndarray = np.from_dlpack(x, device=device, copy=copy)
    return result


def _inplace_copy(src: Any, *, out: np.ndarray) -> np.ndarray:
    np.copyto(out, src, casting="unsafe")
    return out


_F16 = np.dtype(np.float16)


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul``, except that float16 products are computed in float32 through BLAS and
    rounded to float16 once (float32 accumulation, as cuBLAS's half GEMMs and PyTorch's CPU
    kernels accumulate): NumPy's own float16 matmul is a loop without BLAS, tens of times
    slower, and also accumulates in float32 (results differ in summation order only)."""
    if np.result_type(a, b) != _F16:
        result: np.ndarray = np.matmul(a, b, out=out)
        return result
    y = np.matmul(a.astype(np.float32), b.astype(np.float32))
    if out is None:
        half: np.ndarray = y.astype(_F16)
        return half
    np.copyto(out, y, casting="same_kind")
    return out


def _matmul(x1: np.ndarray, x2: np.ndarray, /) -> np.ndarray:
    """``np.matmul``; large float32 products run on oneDNN where ``arraycore[onednn]`` is
    installed (:func:`._onednn.matmul`: the same OpenMP threads as the convolutions, none of
    OpenBLAS's spinning threads taking the cores from them). Small products go straight to
    NumPy: a network of small layers makes many of them, and each check costs."""
    try:
        # the multiply-adds (_onednn.matmul_work) are the larger of these two products, batch
        # dimensions broadcast or not; computed inline, as this runs for every product
        least = _onednn.MATMUL_MIN_WORK
        large = x1.size * x2.shape[-1] >= least or x2.size * x1.shape[-2] >= least
    except (AttributeError, IndexError, TypeError):  # not arrays, or vectors: NumPy's rules
        large = False
    if large:
        y = _onednn.matmul(x1, x2)
        if y is not None:
            return y
    out: np.ndarray = gemm(x1, x2) if getattr(x1, "dtype", None) == _F16 else np.matmul(x1, x2)
    return out


def _tensordot(x1: np.ndarray, x2: np.ndarray, /, *, axes: Any = 2) -> np.ndarray:
    """``np.tensordot``, whose one matrix product goes through :func:`_matmul` for float32."""
    if not (
        isinstance(x1, np.ndarray)
        and isinstance(x2, np.ndarray)
        and x1.dtype == np.float32
        and x2.dtype == np.float32
    ):
        return np.tensordot(x1, x2, axes=axes)
    try:
        if isinstance(axes, int):
            first = list(range(x1.ndim - axes, x1.ndim)) if axes > 0 else []
            second = list(range(axes))
        else:
            first, second = ([a] if isinstance(a, int) else list(a) for a in axes)
        first = [a % x1.ndim for a in first]
        second = [a % x2.ndim for a in second]
        ok = len(first) == len(second) and all(
            x1.shape[a] == x2.shape[b] for a, b in zip(first, second, strict=True)
        )
    except (TypeError, ValueError, ZeroDivisionError):
        ok = False
    if not ok or len(set(first)) != len(first) or len(set(second)) != len(second):
        return np.tensordot(x1, x2, axes=axes)  # NumPy's own error for bad axes
    free1 = [a for a in range(x1.ndim) if a not in first]
    free2 = [b for b in range(x2.ndim) if b not in second]
    shape1, shape2 = [x1.shape[a] for a in free1], [x2.shape[b] for b in free2]
    k = math.prod(x1.shape[a] for a in first)
    a2 = np.permute_dims(x1, (*free1, *first)).reshape(math.prod(shape1), k)
    b2 = np.permute_dims(x2, (*second, *free2)).reshape(k, math.prod(shape2))
    return _matmul(a2, b2).reshape((*shape1, *shape2))


def _inplace_fill(value: Any, *, out: np.ndarray) -> np.ndarray:
    out.fill(value)
    return out


class NumpyBackend(Backend):
    """Arrays are ``numpy.ndarray`` on the host CPU."""

    name = "numpy"
    install_hint = "pip install arraycore"
    protocol_version = PROTOCOL_VERSION
    optional_primitives = frozenset(OPTIONAL_OPS)
    conforming_overrides = frozenset(
        {*_SAME_AS_NUMPY, *(op.name for op in ELEMENTWISE), *(f"inplace.{n}" for n in _UFUNCS)}
        - _UNBOUND
        - {*_NOT_CONFORMING, *(f"inplace.{name}" for name in _NOT_CONFORMING)}
    )

    def __init__(self, device: str | int | None = None) -> None:
        super().__init__(device)
        _malloc.tune()  # large temporaries from the heap, not fresh pages each step

    @classmethod
    def version(cls) -> str:
        return f"numpy {np.__version__}"

    @classmethod
    def devices(cls) -> list[Device]:
        return [Device("numpy", "cpu", "host CPU", {"float64": True, "float16": True})]

    def owns(self, x: Any) -> bool:
        return isinstance(x, np.ndarray | np.generic)

    def device_of(self, x: Array) -> Any:
        return "cpu"

    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)

    def to_numpy(self, x: Array) -> np.ndarray:
        return np.asarray(x)

    def full(self, shape: Shape, fill_value: bool | int | float, dtype: np.dtype) -> np.ndarray:
        return np.full(shape, fill_value, dtype=dtype)

    def unary(self, op: str, x: Array, out: Array | None = None) -> Array:
        return _UFUNCS[op](x, out=out)

    def binary(self, op: str, x1: Array, x2: Array, out: Array | None = None) -> Array:
        return _UFUNCS[op](x1, x2, out=out)

    def where(self, condition: Array, x1: Array, x2: Array) -> Array:
        return np.where(condition, x1, x2)

    def astype(self, x: Array, dtype: np.dtype) -> Array:
        return np.asarray(x).astype(dtype, copy=True)

    def reduce(self, op: str, x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
        return _REDUCTIONS[op](x, axis=axes, keepdims=keepdims)

    def arg_reduce(self, op: str, x: Array, axis: int, keepdims: bool) -> Array:
        fn = np.argmax if op == "argmax" else np.argmin
        return fn(x, axis=axis, keepdims=keepdims).astype(np.int64, copy=False)

    def matmul(self, x1: Array, x2: Array) -> Array:
        return _matmul(x1, x2)

    def reshape(self, x: Array, shape: Shape) -> Array:
        return np.reshape(x, shape)

    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> Array:
        return np.permute_dims(x, axes)

    def broadcast_to(self, x: Array, shape: Shape) -> Array:
        return np.broadcast_to(x, shape)

    def getitem(self, x: Array, key: Key) -> Array:
        return np.asarray(x)[key]

    def setitem(self, x: Array, key: Key, value: Array) -> None:
        x[key] = value

    def take(self, x: Array, indices: Array, axis: int) -> Array:
        return np.take(x, indices, axis=axis)

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        _scatter_add(out, indices, values, axis)

    def rng_state(self, seed: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(seed))

    def rng_uniform(self, state: Any, shape: Shape, dtype: np.dtype) -> Array:
        if dtype == np.float16:
            return state.random(shape, dtype=np.float32).astype(np.float16)
        return state.random(shape, dtype=dtype)

    def overrides(self) -> dict[str, Callable[..., Any]]:
        from . import _numba_fuse, _numpy_linalg, _numpy_nn, _numpy_searching

        table: dict[str, Callable[..., Any]] = {name: getattr(np, name) for name in _SAME_AS_NUMPY}
        table.update(
            (op.name, getattr(np, op.reference)) for op in ELEMENTWISE if op.name not in _UNBOUND
        )
        table.update(_FAST_REDUCTIONS)
        table.update(_numpy_searching.TABLE)
        table.update(_numpy_linalg.TABLE)
        table["matrix_transpose"] = _matrix_transpose
        table["matmul"] = _matmul
        table["tensordot"] = _tensordot
        table["from_dlpack"] = _from_dlpack
        table["to_numpy"] = self.to_numpy
        for name, fn in _UFUNCS.items():
            table[f"inplace.{name}"] = fn
        table["inplace.copy"] = _inplace_copy
        table["inplace.fill"] = _inplace_fill
        table["inplace.scatter_add"] = _scatter_add
        table["inplace.fuse"] = _numba_fuse.fuse
        for name in _numpy_nn.__all__:
            table[f"nn.{name}"] = getattr(_numpy_nn, name)
        return table
