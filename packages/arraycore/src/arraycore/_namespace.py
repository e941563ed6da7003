"""The user namespace, derived from a backend's primitives.

:class:`Namespace` implements every public function of arraycore in terms of the required
primitives of :class:`arraycore.backend.Backend`. Names and semantics follow the Python Array
API standard (2024.12); result dtypes follow the one table of :mod:`arraycore._dtype_rules`
(``docs/dtypes.md``). A backend replaces any function here with a faster one through
:meth:`Backend.overrides`; the replacement is bound as an instance attribute, so calling it costs
no more than calling the backend's function directly (unless it is not declared conforming to
the dtype rules: then integer and bool inputs take the function here, see
:func:`arraycore._dtype_rules.guard`).
"""

from __future__ import annotations

import builtins
import contextlib
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _checks, _dtype_rules, _interop, _nn
from ._dtypes import (
    DTYPES,
    can_cast,
    finfo,
    iinfo,
    isdtype,
    result_type,
)
from .backend import Array, Backend, Key, Shape, normalize_axes
from .errors import BackendMismatchError

Scalar = bool | int | float
ArrayOrScalar = Any

_SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def _scalar_fits(value: Any, dtype: np.dtype) -> bool:
    """Whether a Python scalar may be combined with an array of ``dtype`` (Array API rules)."""
    if isinstance(value, bool | np.bool_):
        return True
    if isinstance(value, int | np.integer):
        return dtype.kind in "iuf"
    return dtype.kind == "f"


class _SubNamespace:
    """Base of the sub-namespaces (``nn``, ``inplace``, ``random``): they hold the parent."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._xp!r}>"


class NNNamespace(_SubNamespace):
    """Neural-network kernels outside the standard (``xp.nn``); references in ``_nn``.

    Every function is written once in :mod:`arraycore._nn` from the namespace's own functions,
    so every backend has it; backends override them with real kernels (cuDNN, CLBlast).
    """

    def conv2d(
        self, x: Array, w: Array, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
    ) -> Array:
        """2-D cross-correlation, NCHW input, (O, C, KH, KW) weights, zero padding."""
        return _nn.conv2d(self._xp, x, w, stride=stride, padding=padding, dilation=dilation)

    def conv2d_backward_data(
        self,
        dy: Array,
        w: Array,
        x_shape: Shape,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        """Gradient of :meth:`conv2d` with respect to its input."""
        return _nn.conv2d_backward_data(
            self._xp, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
        )

    def conv2d_backward_filter(
        self,
        x: Array,
        dy: Array,
        w_shape: Shape,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        """Gradient of :meth:`conv2d` with respect to its weights."""
        return _nn.conv2d_backward_filter(
            self._xp, x, dy, w_shape, stride=stride, padding=padding, dilation=dilation
        )

    def conv2d_transpose(
        self,
        x: Array,
        w: Array,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        output_padding: Any = 0,
    ) -> Array:
        """Transposed convolution, (C_in, C_out, KH, KW) weights as in PyTorch."""
        return _nn.conv2d_transpose(
            self._xp,
            x,
            w,
            stride=stride,
            padding=padding,
            dilation=dilation,
            output_padding=output_padding,
        )

    def max_pool2d(self, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Array:
        """Max pooling over NCHW windows; padding counts as -inf."""
        return _nn.max_pool2d(self._xp, x, kernel_size, stride, padding)

    def max_pool2d_backward(
        self, dy: Array, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Array:
        """Gradient of :meth:`max_pool2d`: each window's first maximum receives it."""
        return _nn.max_pool2d_backward(self._xp, dy, x, kernel_size, stride, padding)

    def avg_pool2d(
        self,
        x: Array,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        """Average pooling over NCHW windows."""
        return _nn.avg_pool2d(self._xp, x, kernel_size, stride, padding, count_include_pad)

    def avg_pool2d_backward(
        self,
        dy: Array,
        x_shape: Shape,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        """Gradient of :meth:`avg_pool2d`."""
        return _nn.avg_pool2d_backward(
            self._xp, dy, x_shape, kernel_size, stride, padding, count_include_pad
        )

    def softmax(self, x: Array, axis: int = -1) -> Array:
        """Numerically stable softmax along ``axis``."""
        return _nn.softmax(self._xp, x, axis)

    def log_softmax(self, x: Array, axis: int = -1) -> Array:
        """Numerically stable log-softmax along ``axis``."""
        return _nn.log_softmax(self._xp, x, axis)

    def logsumexp(self, x: Array, axis: Any = None, keepdims: bool = False) -> Array:
        """``log(sum(exp(x)))`` without overflow."""
        return _nn.logsumexp(self._xp, x, axis, keepdims)

    def one_hot(self, indices: Array, num_classes: int, *, dtype: Any = None) -> Array:
        """One-hot rows for integer ``indices``: shape ``indices.shape + (num_classes,)``;
        an index outside ``[0, num_classes)`` is a ValueError (see :func:`arraycore.checks`)."""
        _checks.one_hot(self._xp, indices, num_classes)
        return _nn.one_hot(self._xp, indices, num_classes, dtype=dtype)

    def softmax_cross_entropy(
        self, logits: Array, labels: Array, scale: float = 1.0
    ) -> tuple[Array, Array]:
        """``(loss, dlogits)``: ``-scale * sum(log_softmax(logits)[..., labels])`` over every
        example (integer ``labels``, classes last) and its gradient with respect to ``logits``,
        ``(softmax(logits) - one_hot(labels)) * scale``; a label outside ``[0, classes)`` is a
        ValueError (see :func:`arraycore.checks`)."""
        _checks.softmax_cross_entropy(self._xp, logits, labels)
        return _nn.softmax_cross_entropy(self._xp, logits, labels, scale)

    def batch_norm(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        """Training-mode batch normalisation of (N, C) or (N, C, H, W) ``x``: ``(y, mean,
        inv_std)`` with the batch statistics over every axis but 1 (``mean`` and ``inv_std =
        1/sqrt(var + eps)`` of shape ``(C,)``, biased variance), ``y = (x - mean) * inv_std *
        gamma + beta``."""
        return _nn.batch_norm(self._xp, x, gamma, beta, eps)

    def batch_norm_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
    ) -> tuple[Array, Array, Array]:
        """``(dx, dgamma, dbeta)``: the gradients of :meth:`batch_norm` given its ``mean`` and
        ``inv_std``."""
        return _nn.batch_norm_backward(self._xp, dy, x, gamma, mean, inv_std)

    def scatter_add(self, x: Array, indices: Array, values: Array, axis: int = 0) -> Array:
        """A copy of ``x`` with ``values`` added at 1-D ``indices`` along ``axis``.

        Repeated indices accumulate. This is the backward pass of :func:`take` (embeddings).
        """
        out = self._xp.astype(x, x.dtype, copy=True)
        self._xp.inplace.scatter_add(out, indices, values, axis=axis)
        return out


class InplaceNamespace(_SubNamespace):
    """In-place updates for training loops (``xp.inplace``), outside the standard.

    Every element-wise function of the namespace is available as ``xp.inplace.<name>(..., out=)``
    writing into an existing array (which must have the result's shape and dtype, and may be one
    of the inputs), plus :meth:`copy`, :meth:`fill` and :meth:`scatter_add`.
    """

    def __getattr__(self, name: str) -> Callable[..., Array]:
        fn = self._derived(name)
        setattr(self, name, fn)
        return fn

    def _derived(self, name: str) -> Callable[..., Array]:
        """arraycore's own ``inplace.<name>``, with the dtype rules of ``<name>``."""
        xp = self._xp
        bk = xp._backend
        fn: Callable[..., Array]
        if name in _UNARY_NAMES:

            def fn(x: Array, /, *, out: Array) -> Array:
                xp._check_out(name, out, x)
                operand = xp._unary_input(name, x)
                if operand is None:  # the result is x itself (round of integers, ...)
                    return self.copy(x, out=out)
                return bk.unary(name, operand, out=out)

        elif name in _BINARY_NAMES:

            def fn(x1: ArrayOrScalar, x2: ArrayOrScalar, /, *, out: Array) -> Array:
                constant = xp._constant_comparison(name, x1, x2)
                if constant is not None:
                    xp._check_out(name, out, x2 if type(x1) is int else x1)
                    return self.fill(constant, out=out)
                a, b = xp._promote(name, x1, x2, like=out)
                xp._check_out(name, out, a, b)
                return bk.binary(name, a, b, out=out)

        else:
            raise AttributeError(f"arraycore.inplace has no function {name!r}")
        fn.__name__ = name
        return fn

    def copy(self, src: ArrayOrScalar, *, out: Array) -> Array:
        """Write ``src`` (broadcast, cast to ``out.dtype``) into ``out``; returns ``out``."""
        xp = self._xp
        xp._check("inplace.copy", out)
        key = tuple(slice(None) for _ in out.shape)
        xp._backend.setitem(out, key, _checks.setitem_value(xp, "inplace.copy", out, key, src))
        return out

    def fill(self, value: Scalar, *, out: Array) -> Array:
        """Set every element of ``out`` to the scalar ``value``; returns ``out``."""
        return self.copy(value, out=out)

    def fuse(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` compiled into one kernel where the backend can fuse element-wise chains.

        ``fn`` takes arrays and Python scalars, computes with arithmetic operators, the
        namespace's element-wise functions and ``xp.inplace.<name>(..., out=a)`` where ``a`` is
        one of its array arguments, and returns ``None``, an array or a tuple of arrays; no
        reductions, indexing or reads to the host. Calling the result is calling ``fn``: the
        CUDA backend traces it once per argument dtypes with ``cupy.fuse`` (one kernel launch
        instead of one per operation); backends without a fuser, NumPy among them, run ``fn``
        as it is. Make the fused function once (not per step): tracing is what costs.

        >>> import arraycore
        >>> xp = arraycore.namespace("numpy")
        >>> def momentum(v, g, mu):
        ...     xp.inplace.multiply(v, mu, out=v)
        ...     xp.inplace.add(v, g, out=v)
        >>> step = xp.inplace.fuse(momentum)
        >>> v = xp.ones(3)
        >>> step(v, xp.ones(3), 0.5)
        >>> v.tolist()
        [1.5, 1.5, 1.5]
        """
        if not callable(fn):
            raise TypeError(f"inplace.fuse: expected a function, got {type(fn).__name__}")
        return fn

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int = 0) -> Array:
        """``out[..., indices[i], ...] += values[..., i, ...]`` in place; repeats accumulate."""
        xp = self._xp
        ax, idx, vals = _checks.scatter_add_args(xp, "scatter_add", out, indices, values, axis)
        xp._backend.scatter_add(out, idx, vals, ax)
        return out


class RandomNamespace(_SubNamespace):
    """Seeded random numbers (``xp.random``), outside the standard.

    ``xp.random.default_rng(seed)`` gives a :class:`Generator`; for a given seed it draws the
    same numbers every time on a given backend (different backends may draw different streams).
    """

    def default_rng(self, seed: int = 0) -> Generator:
        """A new generator seeded with ``seed``."""
        return Generator(self._xp, seed)


class Generator:
    """A reproducible random generator on one backend and device."""

    def __init__(self, xp: Namespace, seed: int) -> None:
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"random: the seed must be a non-negative int, got {seed!r}")
        self._xp = xp
        self.seed = int(seed)
        self._state = xp._backend.rng_state(self.seed)
        self._host = np.random.default_rng(self.seed)

    def _shape_dtype(self, shape: Any, dtype: Any, op: str) -> tuple[Shape, np.dtype]:
        shape = self._xp._shape(shape, op)
        dt = self._xp._float_dtype(dtype, op)
        return shape, dt

    def uniform(
        self, low: float = 0.0, high: float = 1.0, shape: Any = (), dtype: Any = None
    ) -> Array:
        """Samples from U[low, high)."""
        shape, dt = self._shape_dtype(shape, dtype, "random.uniform")
        u = self._xp._backend.rng_uniform(self._state, shape, dt)
        if low == 0.0 and high == 1.0:
            return u
        return self._xp.add(self._xp.multiply(u, high - low), low)

    def normal(
        self, mean: float = 0.0, std: float = 1.0, shape: Any = (), dtype: Any = None
    ) -> Array:
        """Samples from N(mean, std**2) (Box-Muller on the backend's uniform stream)."""
        shape, dt = self._shape_dtype(shape, dtype, "random.normal")
        xp = self._xp
        n = math.prod(shape)
        half = (n + 1) // 2
        u1 = xp._backend.rng_uniform(self._state, (half,), dt)
        u2 = xp._backend.rng_uniform(self._state, (half,), dt)
        # 1 - u lies in (0, 1], so the log is finite.
        radius = xp.sqrt(xp.multiply(xp.log(xp.subtract(1.0, u1)), -2.0))
        angle = xp.multiply(u2, 2.0 * math.pi)
        z = xp.concat([xp.multiply(radius, xp.cos(angle)), xp.multiply(radius, xp.sin(angle))])
        z = xp.reshape(z[:n], shape)
        if mean == 0.0 and std == 1.0:
            return z
        return xp.add(xp.multiply(z, std), mean)

    def bernoulli(self, p: float = 0.5, shape: Any = (), dtype: Any = None) -> Array:
        """1 with probability ``p``, else 0, in ``dtype`` (default: the default float)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"random.bernoulli: p must lie in [0, 1], got {p}")
        xp = self._xp
        shape = xp._shape(shape, "random.bernoulli")
        dt = xp._default_float() if dtype is None else xp._dtype(dtype, "random.bernoulli")
        u = xp._backend.rng_uniform(self._state, shape, xp._default_float())
        return xp.astype(xp.less(u, p), dt)

    def permutation(self, n: int) -> Array:
        """A random permutation of ``arange(n)`` (int64), drawn on the host and copied over."""
        if not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"random.permutation: n must be a non-negative int, got {n!r}")
        return self._xp._backend.from_numpy(self._host.permutation(int(n)).astype(np.int64))


class NamespaceInfo:
    """What ``xp.__array_namespace_info__()`` returns (Array API inspection utilities)."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def capabilities(self) -> dict[str, Any]:
        """Capabilities of the default device (boolean indexing, data-dependent shapes, ...)."""
        caps: dict[str, Any] = {
            "boolean indexing": False,
            "data-dependent shapes": False,
            "max dimensions": 64,
        }
        caps.update(self._xp._backend.device.capabilities)
        return caps

    def default_device(self) -> Any:
        """The device arrays are created on."""
        return self._xp._backend.device.id

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        """Default dtypes: float64 where the device has it, else float32."""
        return {
            "real floating": self._xp._default_float(),
            "complex floating": np.dtype("complex128"),
            "integral": np.dtype("int64"),
            "indexing": np.dtype("int64"),
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        """The dtypes this device supports, optionally filtered by kind."""
        caps = self._xp._backend.device.capabilities
        names = [n for n in DTYPES if caps.get(n, True)]
        found = {n: np.dtype(n) for n in names}
        if kind is not None:
            found = {n: d for n, d in found.items() if isdtype(d, kind)}
        return found

    def devices(self) -> list[Any]:
        """All devices of the backend."""
        return [d.id for d in self._xp._backend.devices()]

    # -- outside the standard ---------------------------------------------------------------
    def memory_stats(self) -> dict[str, int] | None:
        """This device's memory in bytes (``used_bytes``, ``peak_bytes`` since the last
        :meth:`reset_memory_stats`, and whatever else the backend reports), or None where the
        backend does not track device memory (NumPy: host memory is the interpreter's).

        >>> import arraycore
        >>> print(arraycore.namespace("numpy").__array_namespace_info__().memory_stats())
        None
        """
        return self._xp._backend.memory_stats()

    def reset_memory_stats(self) -> None:
        """Start a new peak for :meth:`memory_stats`."""
        self._xp._backend.reset_memory_stats()


_UNARY_NAMES = frozenset(
    {
        "negative", "abs", "sqrt", "exp", "expm1", "log", "log1p", "tanh", "sin", "cos", "sign",
        "floor", "ceil", "round", "logical_not", "isnan", "isinf",
    }
)  # fmt: skip
_BINARY_NAMES = frozenset(
    {
        "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow", "maximum",
        "minimum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
        "logical_and", "logical_or",
    }
)  # fmt: skip
_BOOL = np.dtype("bool")
_INT64 = np.dtype("int64")


class Namespace:
    """The array namespace of one backend on one device.

    Get one with :func:`arraycore.namespace`; its functions follow the Array API standard. The
    sub-namespaces ``nn``, ``inplace`` and ``random`` hold what the standard lacks.
    """

    __array_api_version__ = "2024.12"

    # dtypes are NumPy dtype objects on every backend
    bool = np.dtype("bool")
    int8 = np.dtype("int8")
    int16 = np.dtype("int16")
    int32 = np.dtype("int32")
    int64 = np.dtype("int64")
    uint8 = np.dtype("uint8")
    float16 = np.dtype("float16")
    float32 = np.dtype("float32")
    float64 = np.dtype("float64")
    e = math.e
    pi = math.pi
    inf = math.inf
    nan = math.nan
    newaxis = None

    result_type = staticmethod(result_type)
    can_cast = staticmethod(can_cast)
    finfo = staticmethod(finfo)
    iinfo = staticmethod(iinfo)
    isdtype = staticmethod(isdtype)

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._dtype_cache: dict[Any, np.dtype] = {}
        self._rule_cache: dict[tuple[str, Any, Any], np.dtype] = {}
        self.name = backend.name
        self.device = backend.device
        self.nn = NNNamespace(self)
        self.inplace = InplaceNamespace(self)
        self.random = RandomNamespace(self)
        self._info = NamespaceInfo(self)
        for dotted, fn in backend.overrides().items():
            owner: Any = self
            *path, attr = dotted.split(".")
            for part in path:
                owner = getattr(owner, part)
            if not hasattr(owner, attr):
                raise AttributeError(
                    f"backend {backend.name!r} overrides {dotted!r}, which arraycore does not have"
                )
            if dotted in _dtype_rules.GUARDED and dotted not in backend.conforming_overrides:
                # Integer and bool inputs go to arraycore's function, which applies the rules.
                own = owner._derived(attr) if path else getattr(Namespace, attr).__get__(self)
                fn = _dtype_rules.guard(dotted, fn, own, backend.owns)
            setattr(owner, attr, _checks.guard(self, dotted, fn))

    def __repr__(self) -> str:
        return f"<arraycore namespace {self.name!r} on {self.device}>"

    def __array_namespace_info__(self) -> NamespaceInfo:
        """Inspection utilities: devices, default dtypes, supported dtypes, capabilities."""
        return self._info

    # -- internal helpers ---------------------------------------------------------------------
    def _is_array(self, x: Any) -> builtins.bool:
        return self._backend.owns(x)

    def _check(self, op: str, *arrays: Any) -> None:
        """Reject arrays of another backend or another device (never a silent copy)."""
        bk = self._backend
        for x in arrays:
            if not bk.owns(x):
                raise _interop.mismatch(op, x, self)
            dev = bk.device_of(x)
            if dev != bk.device.id:
                raise BackendMismatchError(
                    f"{op}: array on device {dev!r} passed to the namespace of device "
                    f"{bk.device.id!r} of backend {self.name!r}; arrays never move implicitly: "
                    f"move it with xp.from_dlpack(x) (xp = this namespace)"
                )

    def _dtype(self, dtype: Any, op: str) -> np.dtype:
        """``dtype`` as a supported NumPy dtype of this device (cached: called per operation)."""
        try:
            return self._dtype_cache[dtype]
        except (KeyError, TypeError):
            pass
        try:
            dt: np.dtype = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"{op}: {dtype!r} is not a dtype") from exc
        if dt.name not in DTYPES:
            raise TypeError(f"{op}: dtype {dt.name} is not supported by arraycore")
        dt = dt if dt.isnative else dt.newbyteorder("=")  # '>f4' is float32 here
        if not self._backend.device.capabilities.get(dt.name, True):
            raise TypeError(
                f"{op}: device {self._backend.device} of backend {self.name!r} has no {dt.name}"
            )
        with contextlib.suppress(TypeError):  # unhashable dtype-likes are just not cached
            self._dtype_cache[dtype] = dt
        return dt

    def _default_float(self) -> np.dtype:
        if self._backend.device.capabilities.get("float64", True):
            return np.dtype("float64")
        return np.dtype("float32")

    def _float_dtype(self, dtype: Any, op: str) -> np.dtype:
        if dtype is None:
            return self._default_float()
        dt = self._dtype(dtype, op)
        if dt.kind != "f":
            raise TypeError(f"{op}: needs a floating dtype, got {dt.name}")
        return dt

    @staticmethod
    def _shape(shape: Any, op: str) -> Shape:
        if isinstance(shape, int | np.integer):
            shape = (shape,)
        try:
            result = tuple(operator.index(s) for s in shape)
        except TypeError as exc:
            raise TypeError(f"{op}: shape must be ints, got {shape!r}") from exc
        if any(s < 0 for s in result):
            raise ValueError(f"{op}: negative dimension in shape {result}")
        return result

    def _as_operand(self, x: ArrayOrScalar, dtype: np.dtype, op: str) -> Array:
        """A backend array of ``dtype`` from an array or a Python scalar."""
        if isinstance(x, _SCALAR_TYPES):
            return self._backend.full((), x.item() if isinstance(x, np.generic) else x, dtype)
        self._check(op, x)
        return x if x.dtype == dtype else self._backend.astype(x, dtype)

    def _promote(
        self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar, like: Any = None
    ) -> tuple[Array, Array]:
        """Both operands as backend arrays of the dtype ``op`` computes in: their promoted dtype
        (NumPy 2 / NEP 50), converted as ``op``'s dtype rule says (docs/dtypes.md)."""
        s1 = isinstance(x1, _SCALAR_TYPES) and not isinstance(x1, np.generic)
        s2 = isinstance(x2, _SCALAR_TYPES) and not isinstance(x2, np.generic)
        if s1 and s2:
            if like is None:
                raise TypeError(f"{op}: at least one argument must be an array")
            x1 = self._scalar(op, x1, like.dtype)
            s1 = False
        if not s1:
            self._check(op, x1)
        if not s2:
            self._check(op, x2)
        dt = self._compute_dtype(op, type(x1) if s1 else x1.dtype, type(x2) if s2 else x2.dtype)
        a = self._scalar(op, x1, dt) if s1 else self._cast(x1, dt)
        b = self._scalar(op, x2, dt) if s2 else self._cast(x2, dt)
        # a Python exponent is checked for free; an array exponent costs a wait on the device,
        # which arraycore.checks(False) skips like the index checks (the result is then undefined)
        if (
            op == "pow"
            and dt.kind == "i"
            and (x2 < 0 if s2 else _checks.enabled() and self._any_negative(b))
        ):
            raise ValueError(_dtype_rules.NEGATIVE_POWER.format(op=op))
        return a, b

    def _compute_dtype(self, op: str, a: Any, b: Any = None) -> np.dtype:
        """The dtype ``op`` computes in for operands given by dtype or Python scalar type
        (cached per namespace: called per operation)."""
        key = (op, a, b)
        try:
            return self._rule_cache[key]
        except KeyError:
            pass
        fdt = self._default_float()
        weak = {bool: True, int: 0, float: 0.0}
        operands = tuple(weak.get(o, o) for o in (a, b) if o is not None)
        dt = _dtype_rules.promoted(operands, fdt)
        if dt not in operands:  # int32 with float32 is float64, which the device may lack
            dt = self._dtype(dt, op)
        dt = _dtype_rules.compute_dtype(op, dt, fdt)
        self._rule_cache[key] = dt
        return dt

    def _scalar(self, op: str, value: Scalar, dtype: np.dtype) -> Array:
        """A 0-d array of ``dtype`` holding a Python scalar; an int must fit an integer dtype
        (int64 in the logical functions, which take it as a bool)."""
        if type(value) is int and (dtype.kind in "iu" or op in _dtype_rules.LOGICAL):
            _dtype_rules.check_python_int(op, value, dtype if dtype.kind in "iu" else _INT64)
        return self._backend.full((), value, dtype)

    def _any_negative(self, x: Array) -> builtins.bool:
        """Whether an integer array has a negative element: one reduction and a wait for it."""
        if not x.size:
            return False
        bk = self._backend
        negative = bk.binary("less", bk.reshape(x, (x.size,)), bk.full((), 0, x.dtype))
        return builtins.bool(bk.to_numpy(bk.reduce("any", negative, (0,), False)))

    def _constant_comparison(
        self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar
    ) -> builtins.bool | None:
        """The result of comparing an integer array with a Python int outside its dtype's
        range, where every element compares alike (exact, as in NumPy 2); else None."""
        if op in _dtype_rules.COMPARISONS:
            for value, x, first in ((x1, x2, True), (x2, x1, False)):
                if type(value) is int and getattr(x, "dtype", _BOOL).kind in "iu":
                    return _dtype_rules.out_of_range_comparison(op, value, x.dtype, first)
        return None

    def _cast(self, x: Array, dtype: np.dtype) -> Array:
        return x if x.dtype == dtype else self._backend.astype(x, dtype)

    def _check_out(self, op: str, out: Array, *inputs: Array) -> None:
        self._check(op, out)
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in inputs))
        if tuple(out.shape) != shape:
            raise ValueError(
                f"inplace.{op}: out has shape {tuple(out.shape)}, the result has shape {shape}"
            )

    # -- creation --------------------------------------------------------------------------
    def asarray(
        self,
        obj: Any,
        /,
        *,
        dtype: Any = None,
        device: Any = None,
        copy: builtins.bool | None = None,
    ) -> Array:
        """An array of this backend from an array, a NumPy array, a scalar or nested lists.

        Objects that carry a dtype (NumPy arrays and scalars, other libraries' arrays) keep it,
        in native byte order; Python scalars and lists take the default float and int64.
        """
        self._check_device(device, "asarray")
        return _interop.asarray(self, obj, dtype, copy)

    def _check_device(self, device: Any, op: str) -> None:
        if (
            device is not None
            and device != self._backend.device.id
            and not (isinstance(device, str) and device == str(self._backend.device.id))
        ):
            raise BackendMismatchError(
                f"{op}: device {device!r} is not this namespace's device "
                f"{self._backend.device.id!r} (backend {self.name!r}); "
                f"use arraycore.namespace({self.name!r}, device=...) for another device"
            )

    def from_numpy(self, a: np.ndarray, /) -> Array:
        """Copy a NumPy array to this backend's device, keeping its dtype."""
        return self.asarray(np.asarray(a), copy=True)

    def to_numpy(self, x: Array, /) -> np.ndarray:
        """Copy ``x`` to the host as a NumPy array (waits for the device)."""
        self._check("to_numpy", x)
        return self._backend.to_numpy(x)

    def from_dlpack(
        self, x: Any, /, *, device: Any = None, copy: builtins.bool | None = None
    ) -> Array:
        """Import an array through DLPack; arraycore's generic path copies through the host
        (an array of this namespace is returned as it is, or copied with ``copy=True``)."""
        self._check_device(device, "from_dlpack")
        return _interop.from_dlpack(self, x, copy)

    def full(
        self, shape: Any, fill_value: Scalar, *, dtype: Any = None, device: Any = None
    ) -> Array:
        """A new array filled with ``fill_value``; dtype inferred from it when not given."""
        self._check_device(device, "full")
        shape = self._shape(shape, "full")
        dt: np.dtype
        if dtype is None:
            if isinstance(fill_value, bool | np.bool_):
                dt = np.dtype("bool")
            elif isinstance(fill_value, int | np.integer):
                dt = np.dtype("int64")
            else:
                dt = self._default_float()
        else:
            dt = self._dtype(dtype, "full")
        return self._backend.full(shape, fill_value, dt)

    def empty(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array (contents unspecified; arraycore's generic path zero-fills)."""
        shape = self._shape(shape, "empty")
        return self.full(shape, 0, dtype=self._float_or(dtype, "empty"), device=device)

    def zeros(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array of zeros."""
        shape = self._shape(shape, "zeros")
        return self.full(shape, 0, dtype=self._float_or(dtype, "zeros"), device=device)

    def ones(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array of ones."""
        shape = self._shape(shape, "ones")
        return self.full(shape, 1, dtype=self._float_or(dtype, "ones"), device=device)

    def _float_or(self, dtype: Any, op: str) -> np.dtype:
        return self._default_float() if dtype is None else self._dtype(dtype, op)

    def empty_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array with the shape (and dtype) of ``x``."""
        return self.full_like(x, 0, dtype=dtype, device=device)

    def zeros_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """Zeros with the shape (and dtype) of ``x``."""
        return self.full_like(x, 0, dtype=dtype, device=device)

    def ones_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """Ones with the shape (and dtype) of ``x``."""
        return self.full_like(x, 1, dtype=dtype, device=device)

    def full_like(
        self, x: Array, /, fill_value: Scalar, *, dtype: Any = None, device: Any = None
    ) -> Array:
        """``fill_value`` with the shape (and dtype) of ``x``."""
        self._check("full_like", x)
        return self.full(
            tuple(x.shape), fill_value, dtype=x.dtype if dtype is None else dtype, device=device
        )

    def arange(
        self,
        start: Scalar,
        /,
        stop: Scalar | None = None,
        step: Scalar = 1,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Array:
        """Evenly spaced values in ``[start, stop)`` (computed on the host, then copied)."""
        self._check_device(device, "arange")
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be zero")
        if dtype is None:
            ints = all(isinstance(v, int | np.integer) for v in (start, stop, step))
            dt = np.dtype("int64") if ints else self._default_float()
        else:
            dt = self._dtype(dtype, "arange")
        return self._backend.from_numpy(np.arange(start, stop, step, dtype=dt))

    def linspace(
        self,
        start: Scalar,
        stop: Scalar,
        /,
        num: int,
        *,
        dtype: Any = None,
        device: Any = None,
        endpoint: builtins.bool = True,
    ) -> Array:
        """``num`` evenly spaced samples over ``[start, stop]`` (or ``[start, stop)``)."""
        self._check_device(device, "linspace")
        dt = self._float_dtype(dtype, "linspace")
        values = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)
        return self._backend.from_numpy(values.astype(dt))

    def eye(
        self,
        n_rows: int,
        n_cols: int | None = None,
        /,
        *,
        k: int = 0,
        dtype: Any = None,
        device: Any = None,
    ) -> Array:
        """A 2-D array with ones on the ``k``-th diagonal."""
        n_cols = n_rows if n_cols is None else n_cols
        rows = self.reshape(self.arange(n_rows), (n_rows, 1))
        cols = self.reshape(self.arange(n_cols), (1, n_cols))
        return self.astype(self.equal(self.add(rows, k), cols), self._float_or(dtype, "eye"))

    # -- dtypes ----------------------------------------------------------------------------------
    def astype(
        self, x: Array, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None
    ) -> Array:
        """``x`` converted to ``dtype`` (a copy unless ``copy=False`` and nothing changes)."""
        self._check("astype", x)
        self._check_device(device, "astype")
        dt = self._dtype(dtype, "astype")
        if not copy and x.dtype == dt:
            return x
        return self._backend.astype(x, dt)

    # -- element-wise ----------------------------------------------------------------------------
    def _unary_input(self, op: str, x: Array) -> Array | None:
        """``x`` in the dtype ``op``'s primitive computes in (docs/dtypes.md), or None where the
        result is ``x`` itself (rounding integers and bools, ``abs`` of bool)."""
        self._check(op, x)
        dt = self._compute_dtype(op, x.dtype)
        if (op in _INT_NOOP and dt.kind in "biu") or (op == "abs" and dt.kind == "b"):
            return None
        return self._cast(x, dt)

    def _unary(self, op: str, x: Array) -> Array:
        operand = self._unary_input(op, x)
        if operand is None:
            return self._backend.astype(x, x.dtype)
        return self._backend.unary(op, operand)

    def _binary(self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar) -> Array:
        constant = self._constant_comparison(op, x1, x2)
        if constant is not None:
            x = x2 if type(x1) is int else x1
            self._check(op, x)
            return self._backend.full(tuple(x.shape), constant, _BOOL)
        a, b = self._promote(op, x1, x2)
        return self._backend.binary(op, a, b)

    def add(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 + x2``."""
        return self._binary("add", x1, x2)

    def subtract(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 - x2``."""
        return self._binary("subtract", x1, x2)

    def multiply(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 * x2``."""
        return self._binary("multiply", x1, x2)

    def divide(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise true division (integers are promoted to the default float)."""
        return self._binary("divide", x1, x2)

    def floor_divide(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 // x2``."""
        return self._binary("floor_divide", x1, x2)

    def remainder(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 % x2`` with the sign of ``x2``."""
        return self._binary("remainder", x1, x2)

    def pow(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 ** x2``."""
        return self._binary("pow", x1, x2)

    def maximum(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise maximum (NaN propagates)."""
        return self._binary("maximum", x1, x2)

    def minimum(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise minimum (NaN propagates)."""
        return self._binary("minimum", x1, x2)

    def equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 == x2``."""
        return self._binary("equal", x1, x2)

    def not_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 != x2``."""
        return self._binary("not_equal", x1, x2)

    def less(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 < x2``."""
        return self._binary("less", x1, x2)

    def less_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 <= x2``."""
        return self._binary("less_equal", x1, x2)

    def greater(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 > x2``."""
        return self._binary("greater", x1, x2)

    def greater_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 >= x2``."""
        return self._binary("greater_equal", x1, x2)

    def logical_and(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise logical and (inputs converted to bool)."""
        return self._binary("logical_and", x1, x2)

    def logical_or(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise logical or (inputs converted to bool)."""
        return self._binary("logical_or", x1, x2)

    def logical_not(self, x: Array, /) -> Array:
        """Element-wise logical not."""
        return self._unary("logical_not", x)

    def negative(self, x: Array, /) -> Array:
        """Element-wise ``-x``."""
        return self._unary("negative", x)

    def positive(self, x: Array, /) -> Array:
        """Element-wise ``+x`` (a copy; not defined for bool, as in NumPy)."""
        self._check("positive", x)
        self._compute_dtype("positive", x.dtype)  # bool: TypeError
        return self._backend.astype(x, x.dtype)

    def abs(self, x: Array, /) -> Array:
        """Element-wise absolute value."""
        return self._unary("abs", x)

    def sqrt(self, x: Array, /) -> Array:
        """Element-wise square root."""
        return self._unary("sqrt", x)

    def square(self, x: Array, /) -> Array:
        """Element-wise ``x * x``."""
        return self.multiply(x, x)

    def exp(self, x: Array, /) -> Array:
        """Element-wise exponential."""
        return self._unary("exp", x)

    def expm1(self, x: Array, /) -> Array:
        """Element-wise ``exp(x) - 1``, accurate near zero."""
        return self._unary("expm1", x)

    def log(self, x: Array, /) -> Array:
        """Element-wise natural logarithm."""
        return self._unary("log", x)

    def log1p(self, x: Array, /) -> Array:
        """Element-wise ``log(1 + x)``, accurate near zero."""
        return self._unary("log1p", x)

    def tanh(self, x: Array, /) -> Array:
        """Element-wise hyperbolic tangent."""
        return self._unary("tanh", x)

    def sin(self, x: Array, /) -> Array:
        """Element-wise sine."""
        return self._unary("sin", x)

    def cos(self, x: Array, /) -> Array:
        """Element-wise cosine."""
        return self._unary("cos", x)

    def sign(self, x: Array, /) -> Array:
        """Element-wise sign (-1, 0 or 1; NaN stays NaN)."""
        return self._unary("sign", x)

    def floor(self, x: Array, /) -> Array:
        """Element-wise floor (integers unchanged)."""
        return self._unary("floor", x)

    def ceil(self, x: Array, /) -> Array:
        """Element-wise ceiling (integers unchanged)."""
        return self._unary("ceil", x)

    def round(self, x: Array, /) -> Array:
        """Element-wise rounding to the nearest integer, halves to even."""
        return self._unary("round", x)

    def isnan(self, x: Array, /) -> Array:
        """Element-wise test for NaN."""
        if x.dtype.kind != "f":
            return self.full_like(x, False, dtype=np.bool_)
        return self._unary("isnan", x)

    def isinf(self, x: Array, /) -> Array:
        """Element-wise test for positive or negative infinity."""
        if x.dtype.kind != "f":
            return self.full_like(x, False, dtype=np.bool_)
        return self._unary("isinf", x)

    def isfinite(self, x: Array, /) -> Array:
        """Element-wise test for finite values."""
        if x.dtype.kind != "f":
            return self.full_like(x, True, dtype=np.bool_)
        return self.logical_not(self.logical_or(self.isnan(x), self.isinf(x)))

    def clip(
        self, x: Array, /, min: ArrayOrScalar | None = None, max: ArrayOrScalar | None = None
    ) -> Array:
        """Values of ``x`` limited to ``[min, max]``, keeping ``x``'s dtype."""
        self._check("clip", x)
        out = x
        if min is not None:
            out = self._binary("maximum", out, self._clip_bound(min, x, "clip"))
        if max is not None:
            out = self._binary("minimum", out, self._clip_bound(max, x, "clip"))
        return out if out is not x else self._backend.astype(x, x.dtype)

    def _clip_bound(self, bound: ArrayOrScalar, x: Array, op: str) -> Array:
        if isinstance(bound, _SCALAR_TYPES):
            if not _scalar_fits(bound, x.dtype):
                raise TypeError(f"{op}: bound {bound!r} does not fit dtype {x.dtype}")
            value = bound.item() if isinstance(bound, np.generic) else bound
            if type(value) is int and x.dtype.kind in "iu":  # out of range: no bound (NumPy 2)
                value = _dtype_rules.clamp_python_int(value, x.dtype)
            return self._backend.full((), value, x.dtype)
        return self._as_operand(bound, x.dtype, op)

    def where(self, condition: Array, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 if condition else x2`` with broadcasting."""
        self._check("where", condition)
        if condition.dtype != np.bool_:
            condition = self._backend.astype(condition, np.dtype("bool"))
        a, b = self._promote("where", x1, x2)
        return self._backend.where(condition, a, b)

    # -- reductions --------------------------------------------------------------------------------
    def _reduce(
        self, op: str, x: Array, axis: Any, keepdims: builtins.bool, dtype: Any = None
    ) -> Array:
        self._check(op, x)
        axes = normalize_axes(axis, len(x.shape), op)
        if dtype is not None:
            x = self._cast(x, self._dtype(dtype, op))
        elif op in ("sum", "prod") and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
            x = self._backend.astype(x, np.dtype("uint64" if x.dtype.kind == "u" else "int64"))
        elif op in ("any", "all") and x.dtype != np.bool_:
            x = self._backend.astype(x, np.dtype("bool"))
        if op in ("sum", "prod") and x.dtype == np.bool_:  # dtype=bool: bool's + and * (NumPy)
            op = "any" if op == "sum" else "all"
        if not axes:
            return self._backend.astype(x, x.dtype)
        if op in ("max", "min") and any(x.shape[a] == 0 for a in axes):
            raise ValueError(f"{op}: zero-size reduction over axis {axis} of shape {x.shape}")
        return self._backend.reduce(op, x, axes, keepdims)

    def sum(
        self, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
    ) -> Array:
        """Sum over ``axis`` (all axes by default); small integers accumulate in 64 bits."""
        return self._reduce("sum", x, axis, keepdims, dtype)

    def prod(
        self, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
    ) -> Array:
        """Product over ``axis``."""
        return self._reduce("prod", x, axis, keepdims, dtype)

    def max(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Maximum over ``axis`` (NaN propagates; an empty axis is an error)."""
        return self._reduce("max", x, axis, keepdims)

    def min(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Minimum over ``axis``."""
        return self._reduce("min", x, axis, keepdims)

    def any(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Whether any element along ``axis`` is true."""
        return self._reduce("any", x, axis, keepdims)

    def all(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Whether every element along ``axis`` is true."""
        return self._reduce("all", x, axis, keepdims)

    def mean(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Arithmetic mean over ``axis`` (integers give the default float)."""
        self._check("mean", x)
        if x.dtype.kind != "f":
            x = self._backend.astype(x, self._default_float())
        axes = normalize_axes(axis, len(x.shape), "mean")
        count = math.prod(x.shape[a] for a in axes)
        total = self._reduce("sum", x, axes, keepdims)
        return self.divide(total, count) if count else self.multiply(total, math.nan)

    def var(
        self,
        x: Array,
        /,
        *,
        axis: Any = None,
        correction: float = 0.0,
        keepdims: builtins.bool = False,
    ) -> Array:
        """Variance over ``axis`` with ``correction`` degrees of freedom subtracted."""
        self._check("var", x)
        if x.dtype.kind != "f":
            x = self._backend.astype(x, self._default_float())
        axes = normalize_axes(axis, len(x.shape), "var")
        count = math.prod(x.shape[a] for a in axes)
        centred = self.subtract(x, self.mean(x, axis=axes, keepdims=True))
        total = self._reduce("sum", self.multiply(centred, centred), axes, keepdims)
        dof = count - correction
        return self.divide(total, dof) if dof > 0 else self.multiply(total, math.nan)

    def std(
        self,
        x: Array,
        /,
        *,
        axis: Any = None,
        correction: float = 0.0,
        keepdims: builtins.bool = False,
    ) -> Array:
        """Standard deviation over ``axis``."""
        return self.sqrt(self.var(x, axis=axis, correction=correction, keepdims=keepdims))

    def _arg_reduce(self, op: str, x: Array, axis: int | None, keepdims: builtins.bool) -> Array:
        self._check(op, x)
        ax = None if axis is None else normalize_axes(axis, len(x.shape), op)[0]
        # Only a zero-size reduced axis is an error: (0, 3) along axis 1 is simply empty.
        if x.size == 0 and (ax is None or x.shape[ax] == 0):
            raise ValueError(f"{op}: attempt to get {op} of an empty array of shape {x.shape}")
        if ax is None:
            flat = self._backend.reshape(x, (x.size,))
            result = self._backend.arg_reduce(op, flat, 0, False)
            return self._backend.reshape(result, (1,) * len(x.shape)) if keepdims else result
        return self._backend.arg_reduce(op, x, ax, keepdims)

    def argmax(
        self, x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False
    ) -> Array:
        """Index of the first maximum along ``axis`` (of the flattened array if None)."""
        return self._arg_reduce("argmax", x, axis, keepdims)

    def argmin(
        self, x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False
    ) -> Array:
        """Index of the first minimum along ``axis``."""
        return self._arg_reduce("argmin", x, axis, keepdims)

    def cumulative_sum(
        self,
        x: Array,
        /,
        *,
        axis: int | None = None,
        dtype: Any = None,
        include_initial: builtins.bool = False,
    ) -> Array:
        """Running sum along ``axis`` (a log-step scan built from slicing and add)."""
        self._check("cumulative_sum", x)
        if axis is None:
            if len(x.shape) > 1:
                raise ValueError(
                    f"cumulative_sum: axis is required for a {len(x.shape)}-D array {x.shape}"
                )
            axis = 0
        (ax,) = normalize_axes(axis, len(x.shape), "cumulative_sum")
        if dtype is not None:
            x = self._cast(x, self._dtype(dtype, "cumulative_sum"))
        elif x.dtype.kind in "biu" and x.dtype.itemsize < 8:
            x = self._backend.astype(x, np.dtype("uint64" if x.dtype.kind == "u" else "int64"))
        acc = self._backend.astype(x, x.dtype)
        n = x.shape[ax]
        shift = 1
        while shift < n:
            head = self._axis_key(len(x.shape), ax, slice(shift, None))
            tail = self._axis_key(len(x.shape), ax, slice(None, n - shift))
            shifted = self._backend.getitem(acc, tail)
            current = self._backend.getitem(acc, head)
            acc = self.concat(
                [
                    self._backend.getitem(acc, self._axis_key(len(x.shape), ax, slice(0, shift))),
                    self._backend.binary("add", current, shifted),
                ],
                axis=ax,
            )
            shift *= 2
        if include_initial:
            shape = list(x.shape)
            shape[ax] = 1
            acc = self.concat([self._backend.full(tuple(shape), 0, x.dtype), acc], axis=ax)
        return acc

    @staticmethod
    def _axis_key(ndim: int, axis: int, sl: slice) -> Key:
        return tuple(sl if i == axis else slice(None) for i in range(ndim))

    # -- linear algebra ---------------------------------------------------------------------------
    def matmul(self, x1: Array, x2: Array, /) -> Array:
        """Matrix product with NumPy's rules for 1-D operands and broadcast batch axes."""
        self._check("matmul", x1, x2)
        if len(x1.shape) == 0 or len(x2.shape) == 0:
            raise ValueError("matmul: operands must have at least one dimension, got a 0-D array")
        a, b = self._promote("matmul", x1, x2)
        vec1, vec2 = len(a.shape) == 1, len(b.shape) == 1
        if vec1:
            a = self._backend.reshape(a, (1, a.shape[0]))
        if vec2:
            b = self._backend.reshape(b, (b.shape[0], 1))
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not align "
                f"({a.shape[-1]} != {b.shape[-2]})"
            )
        try:
            batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
        except ValueError as exc:
            raise ValueError(
                f"matmul: batch axes of {tuple(x1.shape)} and {tuple(x2.shape)} do not broadcast"
            ) from exc
        if a.dtype == np.bool_:  # OR of ANDs, as in NumPy: a float32 count is 0 only if none
            f32 = np.dtype("float32")
            counts = self._backend.matmul(self._cast(a, f32), self._cast(b, f32))
            out = self._backend.binary("not_equal", counts, self._backend.full((), 0, f32))
        else:
            out = self._backend.matmul(a, b)
        shape = tuple(batch)
        shape += () if vec1 else (a.shape[-2],)
        shape += () if vec2 else (b.shape[-1],)
        return out if tuple(out.shape) == shape else self._backend.reshape(out, shape)

    def matrix_transpose(self, x: Array, /) -> Array:
        """Swap the last two axes."""
        self._check("matrix_transpose", x)
        n = len(x.shape)
        if n < 2:
            raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got {x.shape}")
        return self._backend.permute_dims(x, (*range(n - 2), n - 1, n - 2))

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        """Sum of products over the given axes, via one matmul."""
        self._check("tensordot", x1, x2)
        n1, n2 = len(x1.shape), len(x2.shape)
        if isinstance(axes, int | np.integer):
            if axes < 0 or axes > min(n1, n2):
                raise ValueError(
                    f"tensordot: axes={axes} is out of range for {x1.shape}, {x2.shape}"
                )
            ax1 = list(range(n1 - axes, n1))
            ax2 = list(range(axes))
        else:
            ax1 = [a % n1 for a in axes[0]]
            ax2 = [a % n2 for a in axes[1]]
        for a, b in zip(ax1, ax2, strict=True):
            if x1.shape[a] != x2.shape[b]:
                raise ValueError(
                    f"tensordot: axis {a} of {tuple(x1.shape)} and axis {b} of "
                    f"{tuple(x2.shape)} differ"
                )
        free1 = [i for i in range(n1) if i not in ax1]
        free2 = [i for i in range(n2) if i not in ax2]
        k = math.prod(x1.shape[a] for a in ax1)
        m = math.prod(x1.shape[a] for a in free1)
        n = math.prod(x2.shape[a] for a in free2)
        a = self.reshape(self.permute_dims(x1, (*free1, *ax1)), (m, k))
        b = self.reshape(self.permute_dims(x2, (*ax2, *free2)), (k, n))
        out = self.matmul(a, b)
        return self.reshape(
            out, tuple(x1.shape[i] for i in free1) + tuple(x2.shape[i] for i in free2)
        )

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        """Dot product of vectors along ``axis``, with broadcasting."""
        self._check("vecdot", x1, x2)
        if x1.shape[axis] != x2.shape[axis]:
            raise ValueError(f"vecdot: axis {axis} of {x1.shape} and {x2.shape} differ")
        prod = self.multiply(x1, x2)
        # dtype=: the standard's result dtype is the promoted one; sum would widen small ints.
        return self.sum(
            prod,
            axis=axis if axis < 0 else axis - len(x1.shape) + len(prod.shape),
            dtype=prod.dtype,
        )

    # -- manipulation -----------------------------------------------------------------------------
    def reshape(self, x: Array, /, shape: Any, *, copy: builtins.bool | None = None) -> Array:
        """``x`` in a new shape (one dimension may be -1)."""
        self._check("reshape", x)
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        if shape.count(-1) > 1:
            raise ValueError(f"reshape: at most one -1 in shape {shape}")
        known = math.prod(s for s in shape if s != -1)
        if -1 in shape:
            if known == 0 or x.size % known:
                raise ValueError(f"reshape: cannot reshape array of shape {x.shape} into {shape}")
            shape = tuple(x.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != x.size or any(s < 0 for s in shape):
            raise ValueError(f"reshape: cannot reshape array of shape {x.shape} into {shape}")
        if copy is False:
            raise ValueError("reshape: copy=False is not supported by the generic path")
        out = self._backend.reshape(x, shape)
        return self._backend.astype(out, out.dtype) if copy else out

    def permute_dims(self, x: Array, /, axes: Sequence[int]) -> Array:
        """Axes of ``x`` reordered."""
        self._check("permute_dims", x)
        n = len(x.shape)
        norm = tuple(int(a) % n if n else int(a) for a in axes)
        if sorted(norm) != list(range(n)):
            raise ValueError(f"permute_dims: {tuple(axes)} is not a permutation of {n} axes")
        return self._backend.permute_dims(x, norm)

    def moveaxis(self, x: Array, source: Any, destination: Any, /) -> Array:
        """Move axes to new positions, the others keeping their order."""
        self._check("moveaxis", x)
        n = len(x.shape)
        src_list = [source % n] if isinstance(source, int) else [int(a) % n for a in source]
        dst_list = (
            [destination % n] if isinstance(destination, int) else [int(a) % n for a in destination]
        )
        if len(src_list) != len(dst_list):
            raise ValueError("moveaxis: source and destination need the same number of axes")
        order = [i for i in range(n) if i not in src_list]
        for d, s in sorted(zip(dst_list, src_list, strict=True)):
            order.insert(d, s)
        return self._backend.permute_dims(x, tuple(order))

    def expand_dims(self, x: Array, /, *, axis: int = 0) -> Array:
        """``x`` with a new axis of size 1 at ``axis``."""
        self._check("expand_dims", x)
        n = len(x.shape)
        if not -n - 1 <= axis <= n:
            raise ValueError(f"expand_dims: axis {axis} is out of range for shape {x.shape}")
        axis = axis % (n + 1)
        return self._backend.reshape(x, (*x.shape[:axis], 1, *x.shape[axis:]))

    def squeeze(self, x: Array, /, axis: Any) -> Array:
        """``x`` without the given axes, which must have size 1."""
        self._check("squeeze", x)
        axes = normalize_axes(axis, len(x.shape), "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1"
                )
        return self._backend.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))

    def broadcast_to(self, x: Array, /, shape: Any) -> Array:
        """``x`` broadcast to ``shape``."""
        self._check("broadcast_to", x)
        shape = self._shape(shape, "broadcast_to")
        try:
            if np.broadcast_shapes(tuple(x.shape), shape) != shape:
                raise ValueError
        except ValueError as exc:
            raise ValueError(f"broadcast_to: cannot broadcast {tuple(x.shape)} to {shape}") from exc
        return self._backend.broadcast_to(x, shape)

    def broadcast_arrays(self, *arrays: Array) -> list[Array]:
        """The arrays broadcast against each other."""
        self._check("broadcast_arrays", *arrays)
        try:
            shape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
        except ValueError as exc:
            shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
            raise ValueError(f"broadcast_arrays: shapes {shapes} do not broadcast") from exc
        return [self._backend.broadcast_to(a, shape) for a in arrays]

    def concat(self, arrays: Sequence[Array], /, *, axis: int | None = 0) -> Array:
        """Join arrays along an existing axis (flattened first when ``axis`` is None)."""
        arrays = list(arrays)
        if not arrays:
            raise ValueError("concat: needs at least one array")
        self._check("concat", *arrays)
        if axis is None:
            arrays = [self._backend.reshape(a, (a.size,)) for a in arrays]
            axis = 0
        dt = result_type(*(a.dtype for a in arrays))
        if all(a.dtype != dt for a in arrays):  # int32 with float32 is float64, maybe missing
            dt = self._dtype(dt, "concat")
        ndim = len(arrays[0].shape)
        if ndim == 0:
            raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
        (ax,) = normalize_axes(axis, ndim, "concat")
        first = arrays[0].shape
        for a in arrays[1:]:
            if len(a.shape) != ndim or any(a.shape[i] != first[i] for i in range(ndim) if i != ax):
                shapes = ", ".join(str(tuple(b.shape)) for b in arrays)
                raise ValueError(f"concat: shapes {shapes} differ off axis {ax}")
        total = sum(a.shape[ax] for a in arrays)
        out_shape = (*first[:ax], total, *first[ax + 1 :])
        out = self._backend.full(out_shape, 0, dt)
        start = 0
        for a in arrays:
            stop = start + a.shape[ax]
            self._backend.setitem(
                out, self._axis_key(ndim, ax, slice(start, stop)), self._cast(a, dt)
            )
            start = stop
        return out

    def stack(self, arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
        """Join same-shaped arrays along a new axis."""
        arrays = list(arrays)
        if not arrays:
            raise ValueError("stack: needs at least one array")
        self._check("stack", *arrays)
        shape = tuple(arrays[0].shape)
        for a in arrays:
            if tuple(a.shape) != shape:
                shapes = ", ".join(str(tuple(b.shape)) for b in arrays)
                raise ValueError(f"stack: all arrays need the same shape, got {shapes}")
        return self.concat([self.expand_dims(a, axis=axis) for a in arrays], axis=axis)

    def flip(self, x: Array, /, *, axis: Any = None) -> Array:
        """``x`` with the order of elements reversed along ``axis`` (all axes by default)."""
        self._check("flip", x)
        axes = normalize_axes(axis, len(x.shape), "flip")
        key = tuple(
            slice(None, None, -1) if i in axes else slice(None) for i in range(len(x.shape))
        )
        return self._backend.getitem(x, key)

    def tile(self, x: Array, repetitions: Sequence[int], /) -> Array:
        """``x`` repeated ``repetitions`` times along each axis."""
        self._check("tile", x)
        reps = tuple(int(r) for r in repetitions)
        n = max(len(reps), len(x.shape))
        reps = (1,) * (n - len(reps)) + reps
        shape = (1,) * (n - len(x.shape)) + tuple(x.shape)
        x = self._backend.reshape(x, shape)
        expanded = self._backend.reshape(x, tuple(v for s in shape for v in (1, s)))
        big = self._backend.broadcast_to(
            expanded, tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s))
        )
        return self._backend.reshape(
            self._backend.astype(big, x.dtype),
            tuple(r * s for r, s in zip(reps, shape, strict=True)),
        )

    def repeat(self, x: Array, repeats: Any, /, *, axis: int | None = None) -> Array:
        """Each element of ``x`` repeated ``repeats`` times along ``axis`` (flattened if None)."""
        self._check("repeat", x)
        if axis is None:
            x = self._backend.reshape(x, (x.size,))
            axis = 0
        (ax,) = normalize_axes(axis, len(x.shape), "repeat")
        if isinstance(repeats, int | np.integer):
            if repeats < 0:
                raise ValueError(f"repeat: repeats must be non-negative, got {repeats}")
            shape = tuple(x.shape)
            expanded = self._backend.reshape(x, (*shape[: ax + 1], 1, *shape[ax + 1 :]))
            big = self._backend.broadcast_to(
                expanded, (*shape[: ax + 1], int(repeats), *shape[ax + 1 :])
            )
            return self._backend.reshape(
                self._backend.astype(big, x.dtype),
                (*shape[:ax], shape[ax] * int(repeats), *shape[ax + 1 :]),
            )
        counts = self.to_numpy(repeats) if self._is_array(repeats) else np.asarray(repeats)
        if counts.shape != (x.shape[ax],) or (counts < 0).any():
            raise ValueError(
                f"repeat: repeats must be non-negative with shape ({x.shape[ax]},), "
                f"got {counts.tolist()}"
            )
        idx = np.repeat(np.arange(x.shape[ax], dtype=np.int64), counts)
        return self._backend.take(x, self._backend.from_numpy(idx), ax)

    # -- indexing ------------------------------------------------------------------------------------
    def take(self, x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
        """Elements of ``x`` at 1-D integer ``indices`` along ``axis``."""
        ax, idx = _checks.take_args(self, x, indices, axis)
        return self._backend.take(x, idx, ax)

    def take_along_axis(self, x: Array, indices: Array, /, *, axis: int = -1) -> Array:
        """Elements of ``x`` picked by ``indices`` (same rank) along ``axis``."""
        ax, idx = _checks.take_along_axis_args(self, x, indices, axis)
        n = len(x.shape)
        shape = list(
            np.broadcast_shapes(
                tuple(s if i != ax else 1 for i, s in enumerate(x.shape)),
                tuple(s if i != ax else 1 for i, s in enumerate(idx.shape)),
            )
        )
        shape[ax] = idx.shape[ax]
        idx = self._backend.broadcast_to(idx, tuple(shape))
        strides = [math.prod(x.shape[i + 1 :]) for i in range(n)]
        flat = self.multiply(idx, strides[ax])
        for i in range(n):
            if i == ax:
                continue
            coord = self.reshape(
                self.arange(shape[i]), tuple(shape[i] if j == i else 1 for j in range(n))
            )
            flat = self.add(flat, self.multiply(coord, strides[i]))
        flat = self._backend.reshape(self._backend.astype(flat, flat.dtype), (math.prod(shape),))
        values = self._backend.take(self._backend.reshape(x, (x.size,)), flat, 0)
        return self._backend.reshape(values, tuple(shape))

    def _normalize_key(self, x: Array, key: Any, op: str = "getitem") -> Key:
        """A basic index as one entry per axis (ints, slices, None); rejects the rest, naming
        ``op``. Ints become non-negative; slices stay as given."""
        if not isinstance(key, tuple):
            key = (key,)
        for k in key:
            if not (
                k is None or k is Ellipsis or isinstance(k, slice | int | np.integer)
            ) or isinstance(k, bool | np.bool_):
                raise IndexError(
                    f"{op}: only basic indexing (ints, slices, None, ...) is supported on "
                    f"backend {self.name!r}, got {type(k).__name__}; use take() for gathers"
                )
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError(f"{op}: an index can only have a single ellipsis")
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        ndim = len(x.shape)
        if used > ndim:
            raise IndexError(f"{op}: too many indices for an array of shape {tuple(x.shape)}")
        out: list[int | slice | None] = []
        for k in key:
            if k is Ellipsis:
                out.extend([slice(None)] * (ndim - used))
            else:
                out.append(k)
        if Ellipsis not in key:
            out.extend([slice(None)] * (ndim - used))
        axis = 0
        for i, k in enumerate(out):
            if k is None:
                continue
            if isinstance(k, int | np.integer):
                size = x.shape[axis]
                if not -size <= k < size:
                    raise _checks.index_error(op, int(k), axis, size)
                out[i] = int(k) % size
            axis += 1
        return tuple(out)

    def getitem(self, x: Array, key: Any, /) -> Array:
        """``x[key]`` with basic indexing (what ``__getitem__`` of arraycore arrays calls)."""
        self._check("getitem", x)
        return self._backend.getitem(x, self._normalize_key(x, key))

    def setitem(self, x: Array, key: Any, value: ArrayOrScalar, /) -> None:
        """``x[key] = value`` with basic indexing; ``value`` is cast to ``x.dtype``."""
        self._check("setitem", x)
        norm = self._normalize_key(x, key, "setitem")
        self._backend.setitem(x, norm, _checks.setitem_value(self, "setitem", x, norm, value))


_INT_NOOP = frozenset({"floor", "ceil", "round"})
