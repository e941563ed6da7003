"""The CUDA backend: ``cupy.ndarray`` arrays on an NVIDIA GPU.

The required primitives are CuPy calls (cuBLAS behind ``matmul``, CUDA atomics behind
``scatter_add``, cuRAND behind the random generator). :meth:`CudaBackend.overrides` binds CuPy's
own functions where their signature and semantics are meant to be the Array API standard's (CuPy
14 follows NumPy 2), so ``xp.add`` costs what ``cupy.add`` costs; everything else, including the
``nn`` kernels (im2col + matmul, i.e. cuBLAS), is arraycore's derived code running on these
primitives. The ``nn`` kernels are overridden by :mod:`arraycore_cuda._nn_cuda`: cuDNN graphs for
convolutions and batch-norm when nvidia-cudnn-frontend and a cuDNN runtime are installed,
arraycore's shared kernels (``arraycore.device_kernels``, compiled by NVRTC) for im2col/col2im,
pooling and the softmax family, and cuBLAS GEMMs.

Nothing here imports CuPy at module import time: the class must load, and ``arraycore info``
must explain what is missing, on machines without CuPy, without a driver or without a GPU.

Devices. ``Device.id`` of this backend is a :class:`cupy.cuda.Device` subclass that is also
hashable and equal to its integer index, so ``x.device == xp.__array_namespace_info__()
.default_device()`` holds for a ``cupy.ndarray`` ``x`` and ``device=x.device`` or ``device=0``
are both accepted where the namespace takes a device. CuPy allocates and launches on the
*current* CUDA device (device 0 unless changed). For device 0 the backend calls CuPy directly;
for any other device every primitive and override runs inside ``with cupy.cuda.Device(index)``.
A program that makes another device current itself while using device 0 gets arrays on that
device, which arraycore then rejects as a device mismatch rather than mixing them silently.

Status: written without access to a GPU; nothing here has run on one yet (see the README for the
commands that verify it).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore.backend import BINARY_OPS as _BINARY
from arraycore.backend import (
    ELEMENTWISE,
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    REDUCE_OPS,
    Array,
    Backend,
    BackendUnavailable,
    Captured,
    Device,
    Key,
    Shape,
    check_fuse_args,
    env_switch,
)
from arraycore.backend import OPTIONAL_BINARY_OPS as _OPTIONAL_BINARY
from arraycore.backend import OPTIONAL_UNARY_OPS as _OPTIONAL_UNARY
from arraycore.backend import UNARY_OPS as _UNARY

from ._adapters import (
    _concat_for,
    _device_array,
    _float_ufuncs,
    _from_dlpack_for,
    _full,
    _scatter_add,
    _setitem_last_wins,
    _sign,
    _tensordot_for,
)
from ._graphs import Graphs
from ._linalg_cuda import LINALG_NAMES, linalg_table
from ._nn_cuda import NN_OVERRIDES, CudaNN
from ._searching_cuda import SEARCH_NAMES, search_table

#: pip command quoted in "cannot run here" errors.
INSTALL_HINT = 'pip install "arraycore[cuda12]"   (or "arraycore[cuda13]" for a CUDA 13 driver)'

#: Environment variable switching the CuPy overrides off (``0``/``none``): the namespace then
#: runs arraycore's derived functions on the primitives only. Meant for bisecting a conformance
#: failure between the primitives and the bound CuPy functions.
ENV_OVERRIDES = "ARRAYCORE_CUDA_OVERRIDES"

#: Environment variable switching cuDNN off (``0``): convolutions then take the im2col +
#: cuBLAS path and batch-norm arraycore's derived kernels, as on a machine without cuDNN.
ENV_CUDNN = "ARRAYCORE_CUDNN"

UNARY_OPS = tuple(sorted(_UNARY | _OPTIONAL_UNARY))  # CuPy has every one, optional ones too
BINARY_OPS = tuple(sorted(_BINARY | _OPTIONAL_BINARY))

#: Namespace functions bound to the CuPy function of the same name. Each has the standard's
#: positional parameters and keywords in CuPy 14.2 (checked with ``inspect.signature`` where
#: CuPy exposes one; ufuncs take ``(x1, x2, out=)``); their numerical agreement with the NumPy
#: reference is what the conformance kit checks on a GPU. Left to arraycore's derived versions:
#: the creation functions and ``astype`` (no ``device=`` in CuPy), ``reshape`` (``newshape``),
#: ``expand_dims``/``take_along_axis``/``repeat`` (different defaults), ``var``/``std``
#: (``ddof``), ``where`` (scalar operands), ``vecdot`` (not in CuPy), ``to_numpy`` and
#: ``inplace.copy``/``fill``/``scatter_add`` (arraycore's argument checks).
SAME_AS_CUPY = (
    "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "negative", "positive", "abs", "sqrt", "square", "exp",
    "expm1", "log", "log1p", "tanh", "sin", "cos", "floor", "ceil", "round", "isnan", "isinf",
    "isfinite", "sum", "prod", "mean", "max", "min", "argmax", "argmin", "all", "any",
    "cumulative_sum", "matmul", "matrix_transpose", "permute_dims", "squeeze",
    "broadcast_to", "stack", "flip", "tile", "moveaxis", "take",
)  # fmt: skip

#: Namespace functions whose float results CuPy's ufuncs get wrong at the edges (subnormal
#: quotients, -0.0): bound to arraycore-cuda's kernels for floats, CuPy's ufuncs otherwise.
FLOAT_ADAPTED = ("floor_divide", "remainder")

#: The names :func:`override_table` binds to CuPy functions (or thin adapters of them).
CUPY_OVERRIDE_NAMES = frozenset(
    [
        *SAME_AS_CUPY,
        *FLOAT_ADAPTED,
        "concat",
        "tensordot",
        "pow",
        "sign",
        "from_dlpack",
        *(f"inplace.{op}" for op in (*UNARY_OPS, *BINARY_OPS)),
        *(f"linalg.{name}" for name in LINALG_NAMES),
        *SEARCH_NAMES,
    ]
)

#: Every name :meth:`CudaBackend.overrides` may return (all are arraycore namespace names):
#: the CuPy bindings, the ``nn`` kernels of :mod:`arraycore_cuda._nn_cuda` and the fuser.
OVERRIDE_NAMES = CUPY_OVERRIDE_NAMES | {f"nn.{name}" for name in NN_OVERRIDES} | {"inplace.fuse"}

_REDUCTIONS = REDUCE_OPS

PRIMITIVES = (
    "from_numpy", "to_numpy", "full", "unary", "binary", "where", "astype", "reduce",
    "arg_reduce", "matmul", "reshape", "permute_dims", "broadcast_to", "getitem", "setitem",
    "take", "scatter_add", "rng_state", "rng_uniform",
)  # fmt: skip


# -- discovery helpers ---------------------------------------------------------------------------
def import_cupy() -> Any:
    """The ``cupy`` module, or :class:`BackendUnavailable` naming the package to install."""
    try:
        import cupy
    except ModuleNotFoundError as exc:
        if exc.name != "cupy":  # CuPy is there but one of its own imports is missing
            raise BackendUnavailable(
                f"CuPy is installed but failed to import ({type(exc).__name__}: {exc}); "
                f"reinstall it with {INSTALL_HINT}"
            ) from exc
        raise BackendUnavailable(
            f"CuPy is not installed (the cuda backend runs on CuPy); install it with {INSTALL_HINT}"
        ) from exc
    except Exception as exc:  # e.g. a CuPy wheel whose CUDA libraries fail to load
        raise BackendUnavailable(
            f"CuPy is installed but failed to import ({type(exc).__name__}: {exc}); "
            f"reinstall it with {INSTALL_HINT}"
        ) from exc
    return cupy


def _version_text(number: int) -> str:
    """CUDA's ``major * 1000 + minor * 10`` as ``major.minor``."""
    return f"{number // 1000}.{number % 1000 // 10}"


def _driver_version(cupy: Any) -> int | None:
    """The CUDA version the installed NVIDIA driver supports (0: no driver), None if unknown."""
    try:
        return int(cupy.cuda.runtime.driverGetVersion())
    except Exception:
        return None


def cuda_error_reason(cupy: Any, exc: BaseException) -> str:
    """Why ``cudaGetDeviceCount`` failed, in a sentence that names the CUDA error.

    The full error text is the exception's ``__cause__`` (``arraycore info`` prints it); the
    sentence names the error code (``cudaErrorInsufficientDriver``, ``cudaErrorNoDevice``, ...).
    """
    text = str(exc)
    code = text.split(":", 1)[0].strip()
    error = code if code.startswith("cuda") else f"{type(exc).__name__}: {text}"
    if "InsufficientDriver" in code:
        driver = _driver_version(cupy)
        try:
            runtime = _version_text(int(cupy.cuda.runtime.runtimeGetVersion()))
        except Exception:
            runtime = "unknown"
        if driver == 0:
            return (
                f"no NVIDIA driver is installed on this machine ({error}): CuPy's CUDA runtime "
                f"{runtime} needs an NVIDIA driver and an NVIDIA GPU"
            )
        shown = "unknown" if driver is None else _version_text(driver)
        return (
            f"the NVIDIA driver (CUDA {shown}) is older than CuPy's CUDA runtime {runtime} "
            f"({error}): update the driver, or use the cuda12 extra with a CUDA 12 driver"
        )
    if "NoDevice" in code:
        return (
            f"the NVIDIA driver sees no CUDA device ({error}): check nvidia-smi and "
            "CUDA_VISIBLE_DEVICES"
        )
    return f"the CUDA runtime cannot list devices ({error})"


@functools.cache
def device_id_type() -> type:
    """The class of this backend's device ids (a hashable :class:`cupy.cuda.Device`).

    ``cupy.cuda.Device`` compares equal only to another ``Device`` and is unhashable; arraycore
    keys namespaces by device id and compares ids with ``==``, so the id is a subclass that
    also equals (and hashes like) its integer index. Built on first use: it needs CuPy.
    """
    import_cupy()  # BackendUnavailable with the install command if it is missing
    import cupy

    class CudaDeviceId(cupy.cuda.Device):
        """A ``cupy.cuda.Device`` that is hashable and equal to its integer index."""

        def __hash__(self) -> int:
            return hash(int(self.id))

        def __eq__(self, other: object) -> bool:
            if isinstance(other, cupy.cuda.Device):
                return bool(self.id == other.id)
            if isinstance(other, int | np.integer) and not isinstance(other, bool):
                return bool(self.id == other)
            return NotImplemented

        def __ne__(self, other: object) -> bool:
            equal = self.__eq__(other)
            return equal if equal is NotImplemented else not equal

        def __str__(self) -> str:
            return str(self.id)

    return CudaDeviceId


def _on_device(fn: Callable[..., Any], index: int) -> Callable[..., Any]:
    """``fn`` run with CUDA device ``index`` current (a fresh context per call: thread-safe)."""
    import cupy

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with cupy.cuda.Device(index):
            return fn(*args, **kwargs)

    return call


def overrides_enabled() -> bool:
    """Whether ``$ARRAYCORE_CUDA_OVERRIDES`` leaves the CuPy overrides on (the default)."""
    value = os.environ.get(ENV_OVERRIDES, "").strip().lower()
    if value in ("", "1", "all", "on", "true", "yes"):
        return True
    if value in ("0", "none", "off", "false", "no"):
        return False
    raise ValueError(f"${ENV_OVERRIDES} must be 'all' or 'none' (1/0), got {value!r}")


# -- the backend ---------------------------------------------------------------------------------
class CudaBackend(Backend):
    """Arrays are ``cupy.ndarray`` on one NVIDIA GPU; kernels are CuPy's and cuBLAS.

    >>> import arraycore  # doctest: +SKIP
    >>> xp = arraycore.namespace("cuda")  # doctest: +SKIP
    >>> xp.matmul(xp.ones((2, 3)), xp.ones((3, 2)))  # doctest: +SKIP
    array([[3., 3.],
           [3., 3.]])
    """

    name = "cuda"
    install_hint = INSTALL_HINT
    protocol_version = PROTOCOL_VERSION
    optional_primitives = frozenset(OPTIONAL_OPS)  # every primitive is a CuPy ufunc

    # -- discovery -------------------------------------------------------------------------------
    @classmethod
    def probe(cls) -> None:
        """Raise :class:`BackendUnavailable` unless CuPy imports and the driver lists a GPU."""
        cupy = import_cupy()
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
        except Exception as exc:
            raise BackendUnavailable(cuda_error_reason(cupy, exc)) from exc
        if count < 1:
            cause = RuntimeError("cudaGetDeviceCount() returned 0")
            raise BackendUnavailable("the CUDA runtime reports no device") from cause

    @classmethod
    def version(cls) -> str:
        """CuPy, the CUDA runtime and driver, and the ``nn`` kernel path (never raises)."""
        try:
            cupy = import_cupy()
        except BackendUnavailable as exc:
            missing = str(exc).startswith("CuPy is not installed")
            return "cupy not installed" if missing else "cupy failed to import"
        parts = [f"cupy {cupy.__version__}"]
        try:
            parts.append(
                f"CUDA runtime {_version_text(int(cupy.cuda.runtime.runtimeGetVersion()))}"
            )
        except Exception:
            parts.append("CUDA runtime unknown")
        driver = _driver_version(cupy)
        if driver is None:
            parts.append("driver unknown")
        else:
            parts.append(f"driver CUDA {_version_text(driver)}" if driver else "no NVIDIA driver")
        parts.append(nn_path())
        return ", ".join(parts)

    @classmethod
    def devices(cls) -> list[Device]:
        """Every visible GPU, with its name, compute capability and memory."""
        cupy = import_cupy()
        make_id = device_id_type()
        found = []
        for index in range(int(cupy.cuda.runtime.getDeviceCount())):
            props = cupy.cuda.runtime.getDeviceProperties(index)
            raw = props.get("name", b"NVIDIA GPU")
            name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
            memory = props.get("totalGlobalMem", 0) / 2**30
            arch = f"sm_{props.get('major', '?')}{props.get('minor', '?')}"
            label = f"{name} ({arch}, {memory:.0f} GiB)"
            found.append(Device("cuda", make_id(index), label, {"float64": True, "float16": True}))
        return found

    def __init__(self, device: str | int | None = None) -> None:
        super().__init__(device)
        import cupy

        self._cp = cupy
        self._ndarray = cupy.ndarray
        self._index = int(self.device.id.id)
        # each primitive of the op table is the CuPy ufunc of its NumPy name (pow: cupy.power)
        self._ufuncs: dict[str, Callable[..., Any]] = {
            op.name: getattr(cupy, op.reference) for op in ELEMENTWISE if op.primitive
        }
        self._ufuncs["sign"] = _sign
        self._ufuncs.update(_float_ufuncs(cupy))
        self._nn = CudaNN(cupy, _make_cudnn(cupy, self._index))
        self._graphs = Graphs(cupy, self._index)
        if self._index != 0:
            for name in PRIMITIVES:
                setattr(self, name, _on_device(getattr(self, name), self._index))

    # -- arrays ----------------------------------------------------------------------------------
    def owns(self, x: Any) -> bool:
        return isinstance(x, self._ndarray)

    def device_of(self, x: Array) -> Any:
        return int(x.device.id)

    def from_numpy(self, a: np.ndarray) -> Array:
        return _device_array(self._cp, a)

    def to_numpy(self, x: Array) -> np.ndarray:
        result: np.ndarray = self._cp.asnumpy(x)
        return result

    def full(self, shape: Shape, fill_value: bool | int | float, dtype: np.dtype) -> Array:
        fill: Any = fill_value
        if type(fill_value) is int and np.dtype(dtype).kind in "fc":
            # CuPy converts a Python int through int64 first (2**63 overflows); NumPy rounds it
            fill = float(fill_value) if np.dtype(dtype).kind == "f" else complex(fill_value)
        return _full(self._cp, shape, fill, dtype)

    # -- element-wise ----------------------------------------------------------------------------
    def unary(self, op: str, x: Array, out: Array | None = None) -> Array:
        return self._ufuncs[op](x, out=out)

    def binary(self, op: str, x1: Array, x2: Array, out: Array | None = None) -> Array:
        return self._ufuncs[op](x1, x2, out=out)

    def where(self, condition: Array, x1: Array, x2: Array) -> Array:
        return self._cp.where(condition, x1, x2)

    def astype(self, x: Array, dtype: np.dtype) -> Array:
        return x.astype(dtype, copy=True)

    # -- reductions and linear algebra -----------------------------------------------------------
    def reduce(self, op: str, x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
        if op not in _REDUCTIONS:
            raise ValueError(f"reduce: unknown op {op!r}")
        fn = getattr(self._cp, op)
        if op in ("sum", "prod"):  # the primitive keeps the input dtype (CuPy would widen ints)
            return fn(x, axis=axes, keepdims=keepdims, dtype=x.dtype)
        return fn(x, axis=axes, keepdims=keepdims)

    def arg_reduce(self, op: str, x: Array, axis: int, keepdims: bool) -> Array:
        fn = self._cp.argmax if op == "argmax" else self._cp.argmin
        return fn(x, axis=axis, keepdims=keepdims).astype(np.int64, copy=False)

    def matmul(self, x1: Array, x2: Array) -> Array:
        if self._graphs.capturing:  # CuPy's cuBLAS calls refuse a capturing stream
            return self._graphs.matmul(x1, x2)
        return self._cp.matmul(x1, x2)

    # -- layout ----------------------------------------------------------------------------------
    def reshape(self, x: Array, shape: Shape) -> Array:
        return self._cp.reshape(x, shape)

    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> Array:
        return self._cp.transpose(x, axes)

    def broadcast_to(self, x: Array, shape: Shape) -> Array:
        return self._cp.broadcast_to(x, shape)

    def getitem(self, x: Array, key: Key) -> Array:
        return x[key]

    def setitem(self, x: Array, key: Key, value: Array) -> None:
        _setitem_last_wins(self._cp, x, key, value)

    # -- gather / scatter ------------------------------------------------------------------------
    def take(self, x: Array, indices: Array, axis: int) -> Array:
        return self._cp.take(x, indices, axis=axis)

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        _scatter_add(out, indices, values, axis)

    # -- random numbers --------------------------------------------------------------------------
    def rng_state(self, seed: int) -> Any:
        return self._cp.random.default_rng(seed)

    def rng_uniform(self, state: Any, shape: Shape, dtype: np.dtype) -> Array:
        if dtype == np.float16:  # no half-precision stream: draw float32 and round, as NumPy's
            return state.random(shape, dtype=np.float32).astype(np.float16)
        return state.random(shape, dtype=dtype)

    # -- backend-specific extras (not part of the namespace) -------------------------------------
    def fuse(self, fn: Callable[..., Any], *, scalar_operands: bool = False) -> Callable[..., Any]:
        """``xp.inplace.fuse``: ``cupy.fuse(fn)``, one CUDA kernel, for functions that promise
        ``scalar_operands``; ``fn`` itself for the others.

        On an H200 (CuPy 14.2, 2026-11-27) ``cupy.fuse`` computed arithmetic between two scalar
        arguments (``1.0 - b1``) in float16: 1e-4 relative error in an Adam-like chain. Scalars
        that only meet arrays were exact (nnlayers' optimiser updates, float64, to 1e-12 of
        their NumPy textbook versions), hence the promise. CuPy traces ``fn`` on its first call
        for each set of argument dtypes and ndims and compiles it with NVRTC; in-place
        ``xp.inplace.<op>(..., out=a)`` calls on an argument become writes of the kernel.
        """
        check_fuse_args(fn, scalar_operands)
        if not scalar_operands:
            return fn
        fused = self._cp.fuse(fn)
        return fused if self._index == 0 else _on_device(fused, self._index)

    def nn_path(self) -> str:
        """Which ``nn`` kernels this backend runs, with cuDNN's state on this device."""
        cudnn = self._nn.cudnn
        if cudnn is not None and cudnn.disabled_reason is not None:
            return nn_path() + f" [disabled on this device: {cudnn.disabled_reason}]"
        return nn_path()

    def memory_stats(self) -> dict[str, int]:
        """Bytes held by this device's CuPy memory pool and reported by the driver.

        ``used_bytes``: held by live arrays. ``pool_bytes``: held by the pool (live arrays plus
        cached free blocks). The pool keeps freed blocks, so ``pool_bytes`` is the high-water
        mark of array memory since the last :meth:`reset_memory_stats`: an upper bound on the
        peak of ``used_bytes``, which also counts the free rest of cached blocks the pool split
        for smaller arrays (a 32.9 MB "peak" for a small MLP's step on an H200 after larger
        networks had run in the process, 2026-11-28); ``peak_bytes`` is that figure, under the
        protocol's name. For an exact peak, count allocations with a
        ``cupy.cuda.MemoryHook`` (as ``bench_training.py`` does), at a cost on every one.
        ``device_free_bytes`` and ``device_total_bytes``: what the driver reports for the whole
        device. ``graph_pool_bytes``: held by the private pools of the live captured steps (CUDA
        graphs, :mod:`arraycore_cuda._graphs`), counted in ``used_bytes`` and ``peak_bytes`` as
        PyTorch's ``max_memory_allocated`` counts a graph's pool. No call here waits for the
        GPU.
        """
        cp = self._cp
        with cp.cuda.Device(self._index):
            pool = cp.get_default_memory_pool()
            free, total = cp.cuda.runtime.memGetInfo()
            held = int(pool.total_bytes())
            graphs = self._graphs.pool_bytes()
            return {
                "used_bytes": int(pool.used_bytes()) + graphs,
                "peak_bytes": held + graphs,
                "pool_bytes": held,
                "graph_pool_bytes": graphs,
                "device_free_bytes": int(free),
                "device_total_bytes": int(total),
            }

    def reset_memory_stats(self) -> None:
        """Give the pool's cached free blocks back to the driver (``pool_bytes`` drops to
        ``used_bytes`` and tracks a new high-water mark from here)."""
        cp = self._cp
        with cp.cuda.Device(self._index):
            cp.get_default_memory_pool().free_all_blocks()

    def capture_support(self) -> str | None:
        """``None`` where steps can be captured as CUDA graphs here (see
        :mod:`arraycore_cuda._graphs`), else why not."""
        return self._graphs.support()

    def capture(self, fn: Callable[[], Any]) -> Captured:
        """``fn``'s device work captured once as a CUDA graph (:mod:`arraycore_cuda._graphs`)."""
        return self._graphs.capture(fn)

    def synchronize(self) -> None:
        """Wait until the work queued on this device's current stream has finished."""
        cp = self._cp
        with cp.cuda.Device(self._index):
            cp.cuda.get_current_stream().synchronize()

    # -- overrides -------------------------------------------------------------------------------
    def overrides(self) -> dict[str, Callable[..., Any]]:
        if not overrides_enabled():
            return {}
        table = override_table(self._cp, self._index)
        table["matmul"] = self.matmul  # cuBLAS through ctypes while a capture is under way
        table.update(self._nn.table())
        table["inplace.fuse"] = self.fuse
        if self._index != 0:
            table = {name: _on_device(fn, self._index) for name, fn in table.items()}
        return table


def override_table(cp: Any, index: int) -> dict[str, Callable[..., Any]]:
    """The CuPy-bound namespace overrides for device ``index`` (keys:
    :data:`CUPY_OVERRIDE_NAMES`; :meth:`CudaBackend.overrides` adds the ``nn`` kernels).

    Needs only the ``cupy`` module, not a GPU: building it touches no device.
    """
    table: dict[str, Callable[..., Any]] = {name: getattr(cp, name) for name in SAME_AS_CUPY}
    table["pow"] = cp.power
    table["sign"] = _sign
    adapted = _float_ufuncs(cp)
    table.update({name: adapted[name] for name in FLOAT_ADAPTED})
    table["concat"] = _concat_for(cp)
    table["tensordot"] = _tensordot_for(cp)
    table["from_dlpack"] = _from_dlpack_for(cp, index)
    for entry in ELEMENTWISE:  # CuPy's ufuncs carry NumPy's names (arccos, left_shift, ...)
        if entry.primitive:
            op = entry.name
            fn = table.get(op) or adapted.get(op) or getattr(cp, entry.reference)
            table[f"inplace.{op}"] = fn
    table.update(linalg_table(cp))
    table.update(search_table(cp))
    return table


# -- nn kernels and cuDNN ----------------------------------------------------------------------------
def cudnn_enabled() -> bool:
    """Whether ``$ARRAYCORE_CUDNN`` leaves cuDNN on (the default, where it is installed)."""
    return env_switch(ENV_CUDNN)


@functools.cache
def cudnn_probe() -> tuple[Any | None, str]:
    """The ``cudnn`` module (or None) and its description, found once per process."""
    from . import _cudnn

    return _cudnn.probe()


def nn_path() -> str:
    """The ``nn`` kernels in use, as ``arraycore info`` reports them (never raises)."""
    ours = "pooling, softmax, cross-entropy, im2col/col2im: arraycore-cuda kernels (NVRTC)"
    if not overrides_enabled():
        return f"nn kernels: arraycore's derived ones (${ENV_OVERRIDES}=none)"
    if not cudnn_enabled():
        return f"nn kernels: convolutions im2col + cuBLAS (cuDNN off: ${ENV_CUDNN}=0); {ours}"
    module, description = cudnn_probe()
    if module is None:
        return f"nn kernels: convolutions im2col + cuBLAS ({description}); {ours}"
    return (
        f"nn kernels: convolutions and batch-norm through {description} (fastest plan "
        f"chosen per shape; im2col + cuBLAS where cuDNN declines); {ours}"
    )


def _make_cudnn(cupy: Any, index: int) -> Any | None:
    """A :class:`~arraycore_cuda._cudnn.Cudnn` for device ``index``, or None without cuDNN."""
    if not overrides_enabled() or not cudnn_enabled():
        return None
    module, _ = cudnn_probe()
    if module is None:
        return None
    from ._cudnn import Cudnn

    return Cudnn(module, cupy, index)
