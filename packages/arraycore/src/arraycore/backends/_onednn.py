"""oneDNN kernels for the NumPy backend (convolutions, matrix products, max-pool backward, the
LSTM layer): an optional accelerator, through ctypes.

``pip install "arraycore[onednn]"`` installs oneDNN's CPU library (the ``onednn-cpu-gomp``
wheel: ``libdnnl.so.3``, oneDNN 3.2 with GNU OpenMP threads, under ``sys.prefix/lib``); the
NumPy backend's float32 ``conv2d``, ``conv2d_backward_data`` and ``conv2d_backward_filter`` then
run oneDNN's direct convolution kernels, the ones PyTorch's CPU convolutions run, instead of
im2col + BLAS; large float32 matrix products run on oneDNN's matmul (:func:`matmul`), so that
all the multi-threaded work of a step shares one OpenMP pool; ``max_pool2d_backward`` uses
oneDNN's argmax workspace (:class:`MaxPoolPlan`) and ``nn.lstm`` its LSTM primitive
(:class:`LSTMPlan`). Without the library, for other dtypes, or with ``ARRAYCORE_ONEDNN=0``, the
NumPy kernels of :mod:`arraycore.backends._numpy_nn` run as before: they stay the readable
reference and the fallback. ``ARRAYCORE_ONEDNN_LIBRARY`` names another ``libdnnl.so.3``.

How: one *plan* per geometry and OpenMP thread count, made on first use and cached (for a
convolution: oneDNN primitives for forward training, backward data and backward weights, each
created with ``format_tag_any`` so oneDNN picks its blocked layouts, plus reorders between those
and NCHW/OIHW), with memory objects re-pointed at the NumPy arrays of each call (no copies
beyond the reorders). Enum values and prototypes are those of oneDNN's public headers
(``include/oneapi/dnnl/dnnl.h``, ``dnnl_types.h``), identical in v3.2 and v3.13, the C ABI of
major version 3.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_float,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_void_p,
)
from typing import Any

import numpy as np

from . import _openmp

_SUCCESS = 0
_F32 = 3
_CPU = 1
_TAG_ANY = 1
_TAG_X = 2  # a
_TAG_ABCD = 5  # nchw, oihw
_FORWARD_TRAINING = 64
_CONV_DIRECT = 1
_POOLING_MAX = 0x1FF
_Q_SRC, _Q_DIFF_SRC, _Q_WEIGHTS, _Q_DIFF_WEIGHTS, _Q_DST, _Q_DIFF_DST = 129, 130, 131, 132, 133, 134
_Q_WORKSPACE = 135
_BACKWARD = 128
_LEFT2RIGHT = 1
# RNN arguments: the layer's input and output, the recurrent state h and cell state c
_ARG_SRC_ITER, _ARG_SRC_ITER_C, _ARG_DST_ITER, _ARG_DST_ITER_C = 2, 3, 18, 19
_ARG_WEIGHTS_ITER, _DIFF = 34, 128
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS, _ARG_WORKSPACE = 1, 17, 33, 41, 64
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 129, 145, 161
_STREAM_DEFAULT = 1
_MAX_NDIMS = 12
_Dims = c_int64 * _MAX_NDIMS


class _ExecArg(Structure):
    _fields_ = [("arg", c_int), ("memory", c_void_p)]


class _Version(Structure):
    _fields_ = [
        ("major", c_int),
        ("minor", c_int),
        ("patch", c_int),
        ("hash", c_char_p),
        ("cpu_runtime", c_uint),
        ("gpu_runtime", c_uint),
    ]


class OneDNNError(RuntimeError):
    """A oneDNN call failed (its status code named)."""


_STATUS = {1: "out of memory", 2: "invalid arguments", 3: "unimplemented", 5: "runtime error"}


def _check(status: int, func: Any, args: Any) -> int:
    if status != _SUCCESS:
        raise OneDNNError(f"oneDNN {func.__name__}: status {status} ({_STATUS.get(status, '?')})")
    return status


_P = c_void_p
_SIGNATURES: dict[str, list[Any]] = {
    "dnnl_engine_create": [POINTER(_P), c_int, c_size_t],
    "dnnl_stream_create": [POINTER(_P), _P, c_uint],
    "dnnl_stream_wait": [_P],
    "dnnl_memory_desc_create_with_tag": [POINTER(_P), c_int, _Dims, c_int, c_int],
    "dnnl_memory_desc_create_with_strides": [POINTER(_P), c_int, _Dims, c_int, _Dims],
    "dnnl_memory_desc_destroy": [_P],
    "dnnl_memory_create": [POINTER(_P), _P, _P, _P],
    "dnnl_memory_set_data_handle": [_P, _P],
    "dnnl_memory_destroy": [_P],
    "dnnl_convolution_forward_primitive_desc_create": [
        POINTER(_P), _P, c_int, c_int, _P, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P,
    ],
    "dnnl_convolution_backward_data_primitive_desc_create": [
        POINTER(_P), _P, c_int, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P, _P,
    ],
    "dnnl_convolution_backward_weights_primitive_desc_create": [
        POINTER(_P), _P, c_int, _P, _P, _P, _P, _Dims, _Dims, _Dims, _Dims, _P, _P,
    ],
    "dnnl_matmul_primitive_desc_create": [POINTER(_P), _P, _P, _P, _P, _P, _P],
    "dnnl_pooling_forward_primitive_desc_create": [
        POINTER(_P), _P, c_int, c_int, _P, _P, _Dims, _Dims, _Dims, _Dims, _Dims, _P,
    ],
    "dnnl_pooling_backward_primitive_desc_create": [
        POINTER(_P), _P, c_int, _P, _P, _Dims, _Dims, _Dims, _Dims, _Dims, _P, _P,
    ],
    "dnnl_eltwise_forward_primitive_desc_create": [
        POINTER(_P), _P, c_int, c_int, _P, _P, c_float, c_float, _P,
    ],
    "dnnl_eltwise_backward_primitive_desc_create": [
        POINTER(_P), _P, c_int, _P, _P, _P, c_float, c_float, _P, _P,
    ],
    "dnnl_lstm_forward_primitive_desc_create": [POINTER(_P), _P, c_int, c_int, *[_P] * 11, c_uint, _P],
    "dnnl_lstm_backward_primitive_desc_create": [
        POINTER(_P), _P, c_int, c_int, *[_P] * 22, c_uint, _P, _P,
    ],
    "dnnl_reorder_primitive_desc_create": [POINTER(_P), _P, _P, _P, _P, _P],
    "dnnl_primitive_create": [POINTER(_P), _P],
    "dnnl_primitive_execute": [_P, _P, c_int, POINTER(_ExecArg)],
}  # fmt: skip


class _Library:
    """The loaded ``libdnnl.so.3`` with its prototypes, one CPU engine and one stream."""

    def __init__(self, path: str) -> None:
        lib = _openmp.open_library(path)
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype, fn.errcheck = argtypes, c_int, _check
        lib.dnnl_primitive_desc_query_md.argtypes = [_P, c_int, c_int]
        lib.dnnl_primitive_desc_query_md.restype = _P
        lib.dnnl_memory_desc_get_size.argtypes = [_P]
        lib.dnnl_memory_desc_get_size.restype = c_size_t
        lib.dnnl_memory_desc_equal.argtypes = [_P, _P]
        lib.dnnl_memory_desc_equal.restype = c_int
        lib.dnnl_version.argtypes = []
        lib.dnnl_version.restype = POINTER(_Version)
        version = lib.dnnl_version().contents
        if version.major != 3:
            raise OSError(f"{path} is oneDNN {version.major}.{version.minor}; arraycore needs 3.x")
        self.lib = lib
        self.path = path
        self.version = f"oneDNN {version.major}.{version.minor}.{version.patch}"
        # oneDNN sizes a kernel's work split for the OpenMP thread count at creation and never
        # uses more threads than that: plans are kept per count (see conv_plan).
        try:
            max_threads = lib.omp_get_max_threads
            max_threads.argtypes, max_threads.restype = [], c_int
            self.max_threads: Any = max_threads
        except AttributeError:  # a build on another threading runtime
            self.max_threads = lambda: 0
        self.engine, self.stream = c_void_p(), c_void_p()
        lib.dnnl_engine_create(byref(self.engine), _CPU, 0)
        lib.dnnl_stream_create(byref(self.stream), self.engine, _STREAM_DEFAULT)


def _candidates() -> list[str]:
    named = os.environ.get("ARRAYCORE_ONEDNN_LIBRARY", "").strip()
    if named:
        return [named]
    found = ctypes.util.find_library("dnnl")
    return [os.path.join(sys.prefix, "lib", "libdnnl.so.3")] + ([found] if found else [])


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def library() -> _Library | None:
    """The loaded library, or ``None`` (then :func:`status` says why); loaded once."""
    with _LOCK:
        if "lib" not in _STATE:
            _STATE["lib"], _STATE["why"] = _load()
        return _STATE["lib"]  # type: ignore[no-any-return]


def _load() -> tuple[_Library | None, str]:
    if os.environ.get("ARRAYCORE_ONEDNN", "").strip() == "0":
        return None, "off (ARRAYCORE_ONEDNN=0)"
    errors = []
    for path in _candidates():
        if not os.path.exists(path) and os.sep in path:
            errors.append(f"{path}: not found")
            continue
        try:
            lib = _Library(path)
        except (OSError, AttributeError, OneDNNError) as exc:
            errors.append(f"{path}: {exc}")
            continue
        from .. import _threads

        _threads.reapply()  # its OpenMP pool gets the thread count in force
        return lib, ""
    hint = 'not installed (pip install "arraycore[onednn]")'
    return None, hint + ("; " + "; ".join(errors) if errors else "")


def status() -> str:
    """One line for ``arraycore info``: the library in use, or why none is."""
    lib = library()
    return f"{lib.version} ({lib.path})" if lib is not None else str(_STATE["why"])


def _dims(values: Any) -> Any:
    d = _Dims()
    for i, v in enumerate(values):
        d[i] = int(v)
    return d


class _Memory:
    """A oneDNN memory object re-pointed at NumPy buffers; ``own=True`` gives it a buffer of its
    own (for a layout oneDNN picked)."""

    def __init__(self, lib: _Library, md: Any, own: bool = False) -> None:
        self.lib = lib
        self.mem = c_void_p()
        self.keep: np.ndarray | None = None
        handle = 0
        if own:
            size = lib.lib.dnnl_memory_desc_get_size(md)
            raw = np.empty(size + 64, np.uint8)
            off = (-raw.ctypes.data) % 64
            self.keep = raw[off : off + size]
            handle = self.keep.ctypes.data
        lib.lib.dnnl_memory_create(byref(self.mem), md, lib.engine, c_void_p(handle))
        self.handle = handle

    def point(self, array: np.ndarray) -> None:
        ptr = array.ctypes.data
        if ptr != self.handle:
            self.lib.lib.dnnl_memory_set_data_handle(self.mem, c_void_p(ptr))
            self.handle = ptr

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.lib.lib.dnnl_memory_destroy(self.mem)


class _Step:
    """One primitive and its argument array, built once."""

    def __init__(self, lib: _Library, pd: Any, args: list[tuple[int, _Memory]]) -> None:
        self.lib = lib
        self.prim = c_void_p()
        lib.lib.dnnl_primitive_create(byref(self.prim), pd)
        self.mems = [m for _, m in args]
        self.args = (_ExecArg * len(args))(*[_ExecArg(a, m.mem) for a, m in args])

    def __call__(self) -> None:
        self.lib.lib.dnnl_primitive_execute(self.prim, self.lib.stream, len(self.mems), self.args)


def _md(
    lib: _Library,
    dims: tuple[int, ...],
    *,
    tag: int | None = None,
    strides: tuple[int, ...] | None = None,
) -> Any:
    """A float32 memory descriptor of ``dims``: in format ``tag``, or with element ``strides``
    (C order when neither is given)."""
    md = c_void_p()
    if tag is not None:
        lib.lib.dnnl_memory_desc_create_with_tag(byref(md), len(dims), _dims(dims), _F32, tag)
        return md
    if strides is None:
        strides = tuple(math.prod(dims[i + 1 :]) for i in range(len(dims)))
    lib.lib.dnnl_memory_desc_create_with_strides(
        byref(md), len(dims), _dims(dims), _F32, _dims(strides)
    )
    return md


def _reorder(lib: _Library, src: _Memory, src_md: Any, dst: _Memory, dst_md: Any) -> _Step:
    """A reorder step from ``src`` (laid out as ``src_md``) into ``dst`` (as ``dst_md``)."""
    pd = c_void_p()
    lib.lib.dnnl_reorder_primitive_desc_create(
        byref(pd), src_md, lib.engine, dst_md, lib.engine, None
    )
    return _Step(lib, pd, [(_ARG_SRC, src), (_ARG_DST, dst)])


class _Plan:
    """What every plan shares: the library, the memory objects that are pointed at the caller's
    arrays (by name, in :attr:`mem`), and a lock, since one call at a time may point them."""

    def __init__(self, lib: _Library) -> None:
        self.lib, self.lock = lib, threading.Lock()
        self.mem: dict[str, _Memory] = {}

    def _execute(self, arrays: dict[str, np.ndarray], steps: Iterable[Callable[[], None]]) -> None:
        """Point the named memory objects at ``arrays``, run ``steps`` and wait for them."""
        with self.lock:
            for name, array in arrays.items():
                self.mem[name].point(array)
            for step in steps:
                step()
            self.lib.lib.dnnl_stream_wait(self.lib.stream)


class ConvPlan(_Plan):
    """The three convolution passes of one geometry, NCHW float32 arrays in and out."""

    def __init__(self, lib: _Library, key: tuple[Any, ...]) -> None:
        super().__init__(lib)
        _threads, xshape, wshape, yshape, stride, pads, dilation = key
        self.xshape, self.wshape, self.yshape = xshape, wshape, yshape
        L = lib.lib  # noqa: N806
        shapes = {"x": xshape, "w": wshape, "y": yshape}
        plain = {k: _md(lib, shape, tag=_TAG_ABCD) for k, shape in shapes.items()}
        want = {k: _md(lib, shape, tag=_TAG_ANY) for k, shape in shapes.items()}
        geometry = (
            _dims(stride),
            _dims((dilation[0] - 1, dilation[1] - 1)),  # oneDNN: 0 is dense
            _dims((pads[0][0], pads[1][0])),
            _dims((pads[0][1], pads[1][1])),
        )
        fwd, bwd_d, bwd_w = c_void_p(), c_void_p(), c_void_p()
        L.dnnl_convolution_forward_primitive_desc_create(
            byref(fwd), lib.engine, _FORWARD_TRAINING, _CONV_DIRECT,
            want["x"], want["w"], None, want["y"], *geometry, None,
        )  # fmt: skip
        L.dnnl_convolution_backward_data_primitive_desc_create(
            byref(bwd_d), lib.engine, _CONV_DIRECT, want["x"], want["w"], want["y"], *geometry,
            fwd, None,
        )  # fmt: skip
        L.dnnl_convolution_backward_weights_primitive_desc_create(
            byref(bwd_w), lib.engine, _CONV_DIRECT, want["x"], want["w"], None, want["y"],
            *geometry, fwd, None,
        )  # fmt: skip
        self.mem = {k: _Memory(lib, plain[k[-1]]) for k in ("x", "w", "y", "dx", "dw", "dy")}
        self._pre: dict[str, list[_Step]] = {"fwd": [], "data": [], "filter": []}
        self._post: dict[str, list[_Step]] = {"fwd": [], "data": [], "filter": []}

        def operand(step: str, pd: Any, query: int, name: str, output: bool) -> _Memory:
            chosen = L.dnnl_primitive_desc_query_md(pd, query, 0)
            user, user_md = self.mem[name], plain[name[-1]]
            if L.dnnl_memory_desc_equal(chosen, user_md):
                return user
            inner = _Memory(lib, c_void_p(chosen), own=True)
            if output:
                self._post[step].append(_reorder(lib, inner, c_void_p(chosen), user, user_md))
            else:
                self._pre[step].append(_reorder(lib, user, user_md, inner, c_void_p(chosen)))
            return inner

        self._steps = {
            "fwd": _Step(lib, fwd, [
                (_ARG_SRC, operand("fwd", fwd, _Q_SRC, "x", False)),
                (_ARG_WEIGHTS, operand("fwd", fwd, _Q_WEIGHTS, "w", False)),
                (_ARG_DST, operand("fwd", fwd, _Q_DST, "y", True)),
            ]),
            "data": _Step(lib, bwd_d, [
                (_ARG_DIFF_DST, operand("data", bwd_d, _Q_DIFF_DST, "dy", False)),
                (_ARG_WEIGHTS, operand("data", bwd_d, _Q_WEIGHTS, "w", False)),
                (_ARG_DIFF_SRC, operand("data", bwd_d, _Q_DIFF_SRC, "dx", True)),
            ]),
            "filter": _Step(lib, bwd_w, [
                (_ARG_SRC, operand("filter", bwd_w, _Q_SRC, "x", False)),
                (_ARG_DIFF_DST, operand("filter", bwd_w, _Q_DIFF_DST, "dy", False)),
                (_ARG_DIFF_WEIGHTS, operand("filter", bwd_w, _Q_DIFF_WEIGHTS, "dw", True)),
            ]),
        }  # fmt: skip

    def _run(self, step: str, arrays: dict[str, np.ndarray]) -> None:
        self._execute(arrays, [*self._pre[step], self._steps[step], *self._post[step]])

    def forward(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        y = np.empty(self.yshape, np.float32)
        self._run("fwd", {"x": _c(x), "w": _c(w), "y": y})
        return y

    def backward_data(self, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        dx = np.empty(self.xshape, np.float32)
        self._run("data", {"dy": _c(dy), "w": _c(w), "dx": dx})
        return dx

    def backward_filter(self, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
        dw = np.empty(self.wshape, np.float32)
        self._run("filter", {"x": _c(x), "dy": _c(dy), "dw": dw})
        return dw


def _c(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


#: Plans kept (least recently used dropped first): each holds oneDNN's kernels and the buffers
#: of the layouts it picked, so a run with a few shapes (a last, smaller batch) keeps them all.
_MAX_PLANS = 128
_PLANS: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def _plan(key: tuple[Any, ...], build: Any) -> Any:
    """The cached plan of ``key`` (whose first item is the OpenMP thread count: oneDNN sizes a
    kernel's work split at creation), made by ``build(lib, key)`` on first use; ``None`` where
    there is no library or oneDNN has no implementation (then the NumPy kernels run)."""
    with _LOCK:
        if key in _PLANS:
            _PLANS.move_to_end(key)
            return _PLANS[key]
    lib = library()
    plan = None
    if lib is not None:
        try:
            plan = build(lib, key)
        except OneDNNError:
            plan = None
    with _LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > _MAX_PLANS:
            _PLANS.popitem(last=False)
    return plan


def _threads_now() -> int:
    """The OpenMP thread count oneDNN's kernels would be made for now (0 without the library)."""
    lib = _STATE["lib"] if "lib" in _STATE else library()  # no lock once loaded
    return lib.max_threads() if lib is not None else 0


def conv_plan(win: Any, out_channels: int, *dtypes: np.dtype) -> ConvPlan | None:
    """The plan of a convolution window (:class:`arraycore.nn_shapes.Window2d`) with
    ``out_channels`` filters, or ``None`` where oneDNN does not take it (no library, not all
    float32, an empty array, a geometry oneDNN refuses)."""
    if any(dt != np.float32 for dt in dtypes) or 0 in (win.n, win.c, win.out_h, win.out_w):
        return None
    key = (
        _threads_now(),
        (win.n, win.c, win.h, win.w),
        (out_channels, win.c, win.kh, win.kw),
        (win.n, out_channels, win.out_h, win.out_w),
        tuple(win.stride),
        tuple(tuple(p) for p in win.pads),
        tuple(win.dilation),
    )
    return _plan(key, ConvPlan)  # type: ignore[no-any-return]


# -- matrix products ------------------------------------------------------------------------------
#: Products with fewer multiply-adds stay with NumPy's BLAS: below this OpenBLAS runs them on the
#: calling thread (its own threshold), without the fixed cost of a oneDNN call (~5 us) or of
#: waking OpenMP threads; at and above it, OpenBLAS would wake its worker threads, which then spin
#: and take the cores from oneDNN's convolutions (a 2-thread VGG step 111 ms against 71 ms).
MATMUL_MIN_WORK = 1 << 18
_F32_DTYPE = np.dtype(np.float32)


def matmul_work(ashape: tuple[int, ...], bshape: tuple[int, ...]) -> int:
    """The multiply-adds of ``a @ b`` (2-D or more; batch dimensions counted, the larger of the
    two batches where one broadcasts): many small products, an attention's 64 heads of 64 x 32
    x 64, are as much work as one large one and run faster on oneDNN's threads."""
    if len(ashape) == 2 and len(bshape) == 2:  # the common case, without the products
        return ashape[0] * ashape[1] * bshape[1]
    batch = max(math.prod(ashape[:-2]), math.prod(bshape[:-2]))
    return batch * ashape[-2] * ashape[-1] * bshape[-1]


class MatmulPlan(_Plan):
    """One float32 matrix product of given shapes and strides (any transposed or sliced 2-D
    views, batch dimensions broadcast as NumPy does) into a new C-contiguous array, with a
    contiguous bias of the output's last dimension added where the key says so."""

    def __init__(self, lib: _Library, key: tuple[Any, ...]) -> None:
        super().__init__(lib)
        _threads, ashape, astrides, bshape, bstrides, self.yshape, with_bias = key
        L = lib.lib  # noqa: N806
        mds = {
            "a": _md(lib, ashape, strides=astrides),
            "b": _md(lib, bshape, strides=bstrides),
            "y": _md(lib, self.yshape),
        }
        if with_bias:
            mds["bias"] = _md(lib, (1,) * (len(self.yshape) - 1) + self.yshape[-1:])
        pd = c_void_p()
        try:
            L.dnnl_matmul_primitive_desc_create(
                byref(pd), lib.engine, mds["a"], mds["b"], mds.get("bias"), mds["y"], None
            )
            self.mem = {name: _Memory(lib, md) for name, md in mds.items()}
            args = [(_ARG_SRC, self.mem["a"]), (_ARG_WEIGHTS, self.mem["b"])]
            if with_bias:
                args.append((_ARG_BIAS, self.mem["bias"]))
            self.step = _Step(lib, pd, [*args, (_ARG_DST, self.mem["y"])])
        finally:
            for md in mds.values():
                L.dnnl_memory_desc_destroy(md)

    def __call__(self, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        y = np.empty(self.yshape, np.float32)
        arrays = {"a": a, "b": b, "y": y}
        if bias is not None:
            arrays["bias"] = bias
        self._execute(arrays, (self.step,))
        return y


def _element_strides(a: np.ndarray) -> tuple[int, ...] | None:
    """``a``'s strides in elements, or ``None`` where oneDNN cannot describe them (negative or
    zero strides, not a multiple of the item size)."""
    out = []
    for size, stride in zip(a.shape, a.strides, strict=True):
        if size == 1:
            out.append(1)
            continue
        if stride <= 0 or stride % 4:
            return None
        out.append(stride // 4)
    return tuple(out)


_UNSEEN = object()
#: (thread count, shapes and byte strides of both operands) -> the plan or None (not taken)
_SEEN: dict[tuple[Any, ...], Any] = {}


def _matmul_plan(a: np.ndarray, b: np.ndarray, with_bias: bool) -> MatmulPlan | None:
    """The plan of ``a @ b`` (both float32, 2-4 dimensions, aligned), plus a bias along the
    last axis ``with_bias``, or ``None``."""
    m, n = a.shape[-2], b.shape[-1]
    ndim = max(a.ndim, b.ndim)
    ashape = (1,) * (ndim - a.ndim) + a.shape
    bshape = (1,) * (ndim - b.ndim) + b.shape
    batch = []
    for p, q in zip(ashape[:-2], bshape[:-2], strict=True):
        if p != q and 1 not in (p, q):
            return None
        batch.append(max(p, q))
    if 0 in batch:
        return None
    astrides, bstrides = _element_strides(a), _element_strides(b)
    if astrides is None or bstrides is None:
        return None
    astrides = (1,) * (ndim - a.ndim) + astrides
    bstrides = (1,) * (ndim - b.ndim) + bstrides
    key = (_threads_now(), ashape, astrides, bshape, bstrides, (*batch, m, n), with_bias)
    return _plan(key, MatmulPlan)  # type: ignore[no-any-return]


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (``+ bias``, a float32 array of the output's last dimension, where given) for
    float32 arrays of 2 to 4 dimensions on oneDNN, or ``None`` where it does not take it (then
    ``np.matmul`` runs): another dtype or rank, no library, ``ARRAYCORE_ONEDNN=0``, a product
    smaller than :data:`MATMUL_MIN_WORK`, strides oneDNN cannot describe, a bias not
    C-contiguous, or shapes NumPy would refuse (its own error is the one the user sees)."""
    # the common refusals first and cheaply: small products cost a few microseconds in all
    if getattr(a, "dtype", None) is not _F32_DTYPE or getattr(b, "dtype", None) is not _F32_DTYPE:
        return None
    ashape, bshape = a.shape, b.shape
    if len(ashape) < 2 or len(bshape) < 2:
        return None
    k = ashape[-1]
    if matmul_work(ashape, bshape) < MATMUL_MIN_WORK or len(ashape) > 4 or len(bshape) > 4:
        return None
    if bshape[-2] != k:
        return None
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return None
    with_bias = bias is not None
    if with_bias and not (
        type(bias) is np.ndarray
        and bias.dtype is _F32_DTYPE
        and bias.shape == bshape[-1:]
        and bias.flags.c_contiguous
    ):
        return None
    # the layouts seen before map straight to their plan (a step repeats the same products)
    seen = (_threads_now(), ashape, a.strides, bshape, b.strides, with_bias)
    plan = _SEEN.get(seen, _UNSEEN)
    if plan is _UNSEEN:
        plan = _SEEN[seen] = _matmul_plan(a, b, with_bias)
        if len(_SEEN) > 4 * _MAX_PLANS:
            _SEEN.clear()
    return None if plan is None else plan(a, b, bias)


# -- max pooling ----------------------------------------------------------------------------------
class MaxPoolPlan(_Plan):
    """Max-pool backward of one window geometry (NCHW float32): oneDNN's forward pass records
    each window's argmax in a workspace (one byte per output), and the backward pass hands
    ``dy`` to those positions, the first maximum of a window as in arraycore's reference."""

    def __init__(self, lib: _Library, key: tuple[Any, ...]) -> None:
        super().__init__(lib)
        _threads, self.xshape, self.yshape, kernel, stride, pads = key
        L = lib.lib  # noqa: N806
        x_md, y_md = _md(lib, self.xshape), _md(lib, self.yshape)
        geometry = (
            _dims(stride),
            _dims(kernel),
            _dims((0, 0)),  # dilation
            _dims((pads[0][0], pads[1][0])),
            _dims((pads[0][1], pads[1][1])),
        )
        fwd, bwd = c_void_p(), c_void_p()
        try:
            L.dnnl_pooling_forward_primitive_desc_create(
                byref(fwd), lib.engine, _FORWARD_TRAINING, _POOLING_MAX, x_md, y_md, *geometry, None
            )
            L.dnnl_pooling_backward_primitive_desc_create(
                byref(bwd), lib.engine, _POOLING_MAX, x_md, y_md, *geometry, fwd, None
            )
            workspace = _Memory(
                lib, c_void_p(L.dnnl_primitive_desc_query_md(fwd, _Q_WORKSPACE, 0)), own=True
            )
            m = self.mem = {
                "x": _Memory(lib, x_md),
                "dx": _Memory(lib, x_md),
                "dy": _Memory(lib, y_md),
                "y": _Memory(lib, y_md, own=True),  # the forward's output, not needed here
            }
            self.steps = (
                _Step(
                    lib, fwd, [(_ARG_SRC, m["x"]), (_ARG_DST, m["y"]), (_ARG_WORKSPACE, workspace)]
                ),
                _Step(
                    lib,
                    bwd,
                    [
                        (_ARG_DIFF_DST, m["dy"]),
                        (_ARG_DIFF_SRC, m["dx"]),
                        (_ARG_WORKSPACE, workspace),
                    ],
                ),
            )
        finally:
            L.dnnl_memory_desc_destroy(x_md)
            L.dnnl_memory_desc_destroy(y_md)

    def __call__(self, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
        dx = np.empty(self.xshape, np.float32)
        self._execute({"x": _c(x), "dy": _c(dy), "dx": dx}, self.steps)
        return dx


def max_pool_plan(win: Any, *dtypes: np.dtype) -> MaxPoolPlan | None:
    """The max-pool backward plan of a pooling window, or ``None`` where oneDNN does not take
    it (no library, not all float32, an empty array)."""
    if any(dt != np.float32 for dt in dtypes) or 0 in (win.n, win.c, win.out_h, win.out_w):
        return None
    key = (
        _threads_now(),
        (win.n, win.c, win.h, win.w),
        (win.n, win.c, win.out_h, win.out_w),
        (win.kh, win.kw),
        tuple(win.stride),
        tuple(tuple(p) for p in win.pads),
    )
    return _plan(key, MaxPoolPlan)  # type: ignore[no-any-return]


# -- element-wise ---------------------------------------------------------------------------------
#: oneDNN's element-wise algorithms arraycore uses, by arraycore's name (``dnnl_alg_kind_t`` of
#: oneDNN 3.x, counted from ``dnnl_eltwise_relu = 0x20``; 2.x numbered them differently).
ELTWISE = {"gelu_tanh": 0x2B, "gelu_erf": 0x31}


class EltwisePlan(_Plan):
    """One element-wise function (:data:`ELTWISE`) on ``size`` float32 elements, forward and
    backward, on contiguous arrays seen as one dimension (oneDNN's vectorised kernels, split
    over the OpenMP threads)."""

    def __init__(self, lib: _Library, key: tuple[Any, ...]) -> None:
        super().__init__(lib)
        _threads, alg, size = key
        L = lib.lib  # noqa: N806
        md = _md(lib, (size,))
        fwd, bwd = c_void_p(), c_void_p()
        try:
            L.dnnl_eltwise_forward_primitive_desc_create(
                byref(fwd), lib.engine, _FORWARD_TRAINING, ELTWISE[alg], md, md, 0.0, 0.0, None
            )
            L.dnnl_eltwise_backward_primitive_desc_create(
                byref(bwd), lib.engine, ELTWISE[alg], md, md, md, 0.0, 0.0, fwd, None
            )
            m = self.mem = {name: _Memory(lib, md) for name in ("x", "y", "dy", "dx")}
            self.forward_step = _Step(lib, fwd, [(_ARG_SRC, m["x"]), (_ARG_DST, m["y"])])
            self.backward_step = _Step(
                lib, bwd, [(_ARG_SRC, m["x"]), (_ARG_DIFF_DST, m["dy"]), (_ARG_DIFF_SRC, m["dx"])]
            )
        finally:
            L.dnnl_memory_desc_destroy(md)

    def forward(self, x: np.ndarray) -> np.ndarray:
        y = np.empty(x.shape, np.float32)
        self._execute({"x": x, "y": y}, (self.forward_step,))
        return y

    def backward(self, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
        dx = np.empty(x.shape, np.float32)
        self._execute({"x": x, "dy": dy, "dx": dx}, (self.backward_step,))
        return dx


def eltwise_plan(alg: str, *arrays: np.ndarray) -> EltwisePlan | None:
    """The plan of element-wise function ``alg`` for ``arrays`` (all of one shape), or ``None``
    where oneDNN does not take them (no library, not all float32 and C-contiguous arrays, empty)."""
    first = arrays[0]
    if first.size == 0 or not all(
        isinstance(a, np.ndarray)
        and a.dtype == np.float32
        and a.flags.c_contiguous
        and a.shape == first.shape
        for a in arrays
    ):
        return None
    return _plan((_threads_now(), alg, first.size), EltwisePlan)  # type: ignore[no-any-return]


# -- LSTM -----------------------------------------------------------------------------------------
class LSTMPlan(_Plan):
    """oneDNN's LSTM primitive (forward training and backward) for one ``(N, T, C, H)``:
    batch-first arrays as they are (oneDNN's ``ntc`` layout), the weights reordered into the
    layouts it picked on each call, its workspace carried from forward to backward in ``saved``.
    oneDNN accumulates the weight gradients, so their buffers are zeroed first."""

    def __init__(self, lib: _Library, key: tuple[Any, ...]) -> None:
        super().__init__(lib)
        _threads, n, t, c, h = key
        self.shapes = (n, t, c, h)
        L = lib.lib  # noqa: N806
        # The caller's batch-first arrays: dims (T, N, C), memory (N, T, C). The primitive runs
        # on time-major copies (oneDNN's dense ``tnc``): its backward pass on the strided ones
        # took 1.5-1.8x as long (8.6-11 ms against 5.8 ms at the benchmark's shapes, oneDNN 3.2).
        user_in = _md(lib, (t, n, c), strides=(c, t * c, 1))
        user_out = _md(lib, (t, n, h), strides=(h, t * h, 1))
        seq_in, seq_out = _md(lib, (t, n, c)), _md(lib, (t, n, h))
        state = _md(lib, (1, 1, n, h))
        w_user, u_user = _md(lib, (1, 1, c, 4, h)), _md(lib, (1, 1, h, 4, h))
        w_any, u_any = (
            _md(lib, (1, 1, c, 4, h), tag=_TAG_ANY),
            _md(lib, (1, 1, h, 4, h), tag=_TAG_ANY),
        )
        bias = _md(lib, (1, 1, 4, h))
        self.fwd, self.bwd = c_void_p(), c_void_p()
        L.dnnl_lstm_forward_primitive_desc_create(
            byref(self.fwd), lib.engine, _FORWARD_TRAINING, _LEFT2RIGHT,
            seq_in, state, state, w_any, u_any, None, None, bias, seq_out, state, state, 0, None,
        )  # fmt: skip
        L.dnnl_lstm_backward_primitive_desc_create(
            byref(self.bwd), lib.engine, _BACKWARD, _LEFT2RIGHT,
            seq_in, state, state, w_any, u_any, None, None, bias, seq_out, state, state,
            seq_in, state, state, w_any, u_any, None, None, bias, seq_out, state, state,
            0, self.fwd, None,
        )  # fmt: skip
        workspace_md = c_void_p(L.dnnl_primitive_desc_query_md(self.fwd, _Q_WORKSPACE, 0))
        self.workspace_bytes = int(L.dnnl_memory_desc_get_size(workspace_md))

        def memory(md: Any, own: bool = False) -> _Memory:
            return _Memory(lib, md, own=own)

        m = self.mem = {
            "x": memory(user_in), "y": memory(user_out), "w": memory(w_user), "u": memory(u_user),
            "b": memory(bias), "h0": memory(state), "c0": memory(state), "hn": memory(state),
            "cn": memory(state), "ws": memory(workspace_md),
            "dx": memory(user_in), "dy": memory(user_out), "dw": memory(w_user),
            "du": memory(u_user), "db": memory(bias), "dh0": memory(state), "dc0": memory(state),
            "dhn": memory(state), "dcn": memory(state),
        }  # fmt: skip
        # the caller's layout and the time-major one of each sequence array; the forward pass's
        # time-major x and y are arrays of the call ("xt", "yt"), kept in ``saved`` for the
        # backward pass (no second reorder of each: 75 us of the LSTM benchmark's 7 ms step)
        layouts = {
            "x": (user_in, seq_in), "dx": (user_in, seq_in),
            "y": (user_out, seq_out), "dy": (user_out, seq_out),
        }  # fmt: skip
        seq = {"dx": memory(seq_in, own=True), "dy": memory(seq_out, own=True)}
        seq["x"] = m["xt"] = memory(seq_in)
        seq["y"] = m["yt"] = memory(seq_out)

        def to_seq(name: str) -> _Step:
            user, inner = layouts[name]
            return _reorder(lib, m[name], user, seq[name], inner)

        def from_seq(name: str) -> _Step:
            user, inner = layouts[name]
            return _reorder(lib, seq[name], inner, m[name], user)

        self.pre_f: list[_Step] = [to_seq("x")]
        self.post_f: list[_Step] = [from_seq("y")]
        self.pre_b: list[_Step] = [to_seq("dy")]
        self.post_b: list[_Step] = [from_seq("dx")]
        self.zero: list[np.ndarray] = []
        weights = {}
        for pd, tag, pre in ((self.fwd, "f", self.pre_f), (self.bwd, "b", self.pre_b)):
            for i, (name, user) in enumerate((("w", w_user), ("u", u_user))):
                chosen = c_void_p(L.dnnl_primitive_desc_query_md(pd, _Q_WEIGHTS, i))
                inner = memory(chosen, own=True)
                pre.append(_reorder(lib, m[name], user, inner, chosen))
                weights[tag + name] = inner
        for i, (name, user) in enumerate((("dw", w_user), ("du", u_user))):
            chosen = c_void_p(L.dnnl_primitive_desc_query_md(self.bwd, _Q_DIFF_WEIGHTS, i))
            inner = memory(chosen, own=True)
            assert inner.keep is not None
            self.zero.append(inner.keep)
            self.post_b.append(_reorder(lib, inner, chosen, m[name], user))
            weights[name] = inner
        common = [
            (_ARG_SRC, seq["x"]), (_ARG_SRC_ITER, m["h0"]), (_ARG_SRC_ITER_C, m["c0"]),
            (_ARG_BIAS, m["b"]), (_ARG_DST, seq["y"]), (_ARG_DST_ITER, m["hn"]),
            (_ARG_DST_ITER_C, m["cn"]), (_ARG_WORKSPACE, m["ws"]),
        ]  # fmt: skip
        self.forward_step = _Step(lib, self.fwd, [
            *common, (_ARG_WEIGHTS, weights["fw"]), (_ARG_WEIGHTS_ITER, weights["fu"]),
        ])  # fmt: skip
        self.backward_step = _Step(lib, self.bwd, [
            *common, (_ARG_WEIGHTS, weights["bw"]), (_ARG_WEIGHTS_ITER, weights["bu"]),
            (_DIFF + _ARG_SRC, seq["dx"]), (_DIFF + _ARG_SRC_ITER, m["dh0"]),
            (_DIFF + _ARG_SRC_ITER_C, m["dc0"]), (_DIFF + _ARG_WEIGHTS, weights["dw"]),
            (_DIFF + _ARG_WEIGHTS_ITER, weights["du"]), (_DIFF + _ARG_BIAS, m["db"]),
            (_DIFF + _ARG_DST, seq["dy"]), (_DIFF + _ARG_DST_ITER, m["dhn"]),
            (_DIFF + _ARG_DST_ITER_C, m["dcn"]),
        ])  # fmt: skip

    def forward(
        self,
        x: np.ndarray,
        w: np.ndarray,
        u: np.ndarray,
        b: np.ndarray,
        h0: np.ndarray,
        c0: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(y, h_n, c_n, kept)``: ``kept`` (the workspace, time-major ``x`` and ``y``) goes to
        :meth:`backward` with the arrays it names."""
        n, t, c, h = self.shapes
        y = np.empty((n, t, h), np.float32)
        hn, cn = np.empty((n, h), np.float32), np.empty((n, h), np.float32)
        kept = {
            "ws": np.empty(self.workspace_bytes, np.uint8),
            "xt": np.empty((t, n, c), np.float32),
            "yt": np.empty((t, n, h), np.float32),
        }
        arrays = {"x": x, "w": w, "u": u, "b": b, "h0": h0, "c0": c0}
        outputs = {"y": y, "hn": hn, "cn": cn, **kept}
        self._execute({**arrays, **outputs}, [*self.pre_f, self.forward_step, *self.post_f])
        return y, hn, cn, kept

    def backward(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n, t, c, h = self.shapes
        out = {
            "dx": np.empty((n, t, c), np.float32), "dw": np.empty((c, 4 * h), np.float32),
            "du": np.empty((h, 4 * h), np.float32), "db": np.zeros(4 * h, np.float32),
            "dh0": np.empty((n, h), np.float32), "dc0": np.empty((n, h), np.float32),
        }  # fmt: skip
        steps: list[Callable[[], None]] = [
            self._zero_weight_grads,
            *self.pre_b,
            self.backward_step,
            *self.post_b,
        ]
        self._execute({**arrays, **out}, steps)
        return out

    def _zero_weight_grads(self) -> None:
        for buffer in self.zero:
            buffer.fill(0)


def lstm_plan(n: int, t: int, c: int, h: int, *dtypes: np.dtype) -> LSTMPlan | None:
    """The LSTM plan of these sizes, or ``None`` where oneDNN does not take it (no library, not
    all float32, an empty batch)."""
    if any(dt != np.float32 for dt in dtypes) or 0 in (n, t, c, h):
        return None
    return _plan((_threads_now(), n, t, c, h), LSTMPlan)  # type: ignore[no-any-return]
