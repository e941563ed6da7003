"""numba kernels for the NumPy backend: an optional accelerator for the element-wise and
reduction work between the convolutions and products.

``pip install "arraycore[numba]"`` (or ``arraycore[cpu]``, with oneDNN) installs numba; the
NumPy backend then runs the compiled loops of :mod:`._numba_kernels` for float32
``nn.batch_norm``, ``nn.layer_norm`` and their gradients (one or two passes over memory instead
of the NumPy code's five to eight, spread over the OpenMP threads) and for float32/float64
``inplace.scatter_add`` along axis 0 (an embedding's gradient: whole rows added in
``numpy.add.at``'s order, 5-25x faster than the sorted rounds of the NumPy code), for
``nn.max_pool2d_backward`` (one pass, each window's gradient to its first maximum) and 2x2
``nn.max_pool2d`` (one pass where NumPy's code makes two, 2.5x faster), for
large ``nn.relu_backward`` (one pass over the threads, not a comparison and a product on one),
for large ``nn.softmax`` (float32) and ``nn.softmax_backward`` along the last axis (rows over the
threads: three passes where NumPy's code makes six, the exponential in a form the compiler
vectorises; the gradient in one where NumPy's makes four), for small float32
``nn.softmax_cross_entropy`` (one call where NumPy's code makes a dozen), for the float32 GRU's
time steps (one kernel a step each way, beside the product with ``u``), and ``xp.inplace.fuse``
compiles update chains (:mod:`._numba_fuse`).
Without numba, for other dtypes and layouts, or with ``ARRAYCORE_NUMBA=0``, the NumPy code
runs: it stays the readable reference and the fallback.

Threads: numba's ``omp`` threading layer runs on the process's GNU OpenMP pool, the one oneDNN's
kernels use (:mod:`._openmp`), so the two never fight for the cores; arraycore puts ``omp`` first
in numba's threading-layer priority unless ``NUMBA_THREADING_LAYER`` or
``NUMBA_THREADING_LAYER_PRIORITY`` says otherwise, and each call uses the OpenMP thread count in
force (``OMP_NUM_THREADS``, :func:`arraycore.set_threads`), capped at ``NUMBA_NUM_THREADS``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PerformanceWarning
from . import _openmp

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def kernels() -> Any:
    """The compiled kernels' module, or ``None`` (then :func:`status` says why); loaded once."""
    if "kernels" not in _STATE:
        with _LOCK:
            if "kernels" not in _STATE:
                _STATE["kernels"], _STATE["why"] = _load()
    return _STATE["kernels"]


def _load() -> tuple[Any, str]:
    if os.environ.get("ARRAYCORE_NUMBA", "").strip() == "0":
        return None, "off (ARRAYCORE_NUMBA=0)"
    try:
        import numba
    except ImportError:
        return None, 'not installed (pip install "arraycore[numba]")'
    _openmp.runtime()  # libgomp, with its short spin, before numba's OpenMP layer loads it
    if not {"NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY"} & set(os.environ):
        layers = list(getattr(numba.config, "THREADING_LAYER_PRIORITY", ()))
        numba.config.THREADING_LAYER_PRIORITY = ["omp"] + [x for x in layers if x != "omp"]  # type: ignore[attr-defined]
    try:
        from . import _numba_kernels
    except Exception as exc:  # numba too old or too new for this NumPy, say
        return None, f"numba {numba.__version__} unusable: {exc}"
    _STATE["numba"] = numba
    _announce_compile(_numba_kernels.__file__)
    return _numba_kernels, ""


def _announce_compile(source: str) -> None:
    """Say once, where no compiled kernel of this Python is cached yet, that the first steps
    compile them (numba caches them on disk: later processes load them in milliseconds)."""
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    name = f"{Path(source).stem}.*.{tag}.nbi"
    root = os.environ.get("NUMBA_CACHE_DIR")
    places = [Path(root)] if root else [Path(source).parent / "__pycache__"]
    try:
        if any(next(p.rglob(name) if root else p.glob(name), None) for p in places if p.is_dir()):
            return
    except OSError:
        return
    where = root or str(places[0])
    # with warnings made errors (-W error) a note must not stop, or change, the kernels
    with contextlib.suppress(Warning):
        warnings.warn(
            "arraycore: numba compiles the NumPy backend's CPU kernels on their first use on "
            f"this machine (about 7 s in all, spread over the first steps), cached in {where} "
            "for later runs",
            PerformanceWarning,
            stacklevel=4,
        )


def status() -> str:
    """One line for ``arraycore info``: numba's version and threading layer, or why not."""
    if kernels() is None:
        return str(_STATE["why"])
    numba = _STATE["numba"]
    try:
        layer = f"threading layer {numba.threading_layer()}"
    except ValueError:  # no parallel kernel has run yet
        layer = "threading layer chosen at first use, " + "/".join(
            getattr(numba.config, "THREADING_LAYER_PRIORITY", ())
        )
    return f"numba {numba.__version__} ({layer})"


#: What :func:`_run` and :func:`call` return when numba failed.
FAILED: Any = object()


def _run(kernel: str, *args: Any, serial: bool = False) -> Any:
    """Run ``kernel`` on ``args`` with the OpenMP thread count in force (a ``serial`` kernel,
    which starts no threads, as it is) and return its result; :data:`FAILED` (and numba off
    for the rest of the process, with the reason in :func:`status`) if numba fails."""
    fn = getattr(_STATE["kernels"], kernel)
    if serial:
        try:
            return fn(*args)
        except _STATE["numba"].core.errors.NumbaError as exc:
            _STATE["error"] = exc
            found = FAILED
    else:
        found = call(fn, *args)
    if found is FAILED:
        _STATE["kernels"], _STATE["why"] = None, f"{kernel} failed to compile: {_STATE['error']}"
    return found


def call(fn: Any, *args: Any) -> Any:
    """Run the compiled function ``fn`` on ``args`` with the OpenMP thread count in force (see
    the module's docstring) and return its result, or :data:`FAILED` if numba fails."""
    numba = _STATE["numba"]
    try:
        if "launched" not in _STATE:
            _launch(numba)
        wanted = min(
            _openmp.max_threads() or numba.config.NUMBA_NUM_THREADS,
            numba.config.NUMBA_NUM_THREADS,
        )
        if numba.get_num_threads() != wanted:
            numba.set_num_threads(wanted)
        return fn(*args)
    except numba.core.errors.NumbaError as exc:
        _STATE["error"] = exc
        return FAILED


def _launch(numba: Any) -> None:
    """Start numba's threading layer with the OpenMP count left as it was: starting it (at the
    first ``numba.get_num_threads``, ``set_num_threads`` or parallel kernel) sets the calling
    thread's OpenMP count to all of numba's threads, so oneDNN's products and these kernels
    would run on every core after ``arraycore.set_threads(1)``. The count in force is applied
    again, also to a libgomp that numba's kernels were the first to load."""
    from .. import _threads

    before = _openmp.max_threads()
    numba.get_num_threads()
    _STATE["launched"] = True
    if before and _openmp.max_threads() != before:
        _openmp.set_max_threads(before)
    _threads.reapply()


#: The dtypes of the kernels that are not float32-only (scatter-add, max-pool, ReLU and softmax
#: backward).
_FLOATS: tuple[type, ...] = (np.float32, np.float64)


def _takes(*arrays: np.ndarray, dtypes: tuple[type, ...] = (np.float32,)) -> bool:
    """Whether the kernels take these operands: all of one dtype among ``dtypes`` (float32 for
    most kernels) and C-contiguous."""
    dt = arrays[0].dtype
    return dt in dtypes and all(a.dtype == dt and a.flags.c_contiguous for a in arrays)


#: Elements below which an element-wise kernel is not worth starting the threads for.
PARALLEL_MIN = 1 << 15


def relu_backward(dy: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """``dy * (y > 0)`` in one pass over the threads, or ``None`` where the kernel does not
    take the operands (small, other dtypes or layouts)."""
    if dy.size < PARALLEL_MIN or not _takes(dy, y, dtypes=_FLOATS) or kernels() is None:
        return None
    out = np.empty_like(dy)
    if _run("relu_backward", dy.reshape(-1), y.reshape(-1), out.reshape(-1)) is FAILED:
        return None
    return out


def _around(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """``shape`` as ``(before, along, after)`` about ``axis``: the ``(M, C, P)`` of the
    per-channel kernels."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def bias_relu(x: np.ndarray, bias: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray | None:
    """``maximum(x + bias, 0)`` with ``bias`` along ``axis`` (checked, counted from 0) into
    ``out`` (``x`` itself allowed) in one pass over the threads; ``None`` where the kernel does
    not take the operands (small, other dtypes or layouts, an ``out`` overlapping ``x`` other
    than as ``x`` itself or overlapping ``bias``: NumPy's ufuncs buffer those)."""
    if x.size < PARALLEL_MIN or not _takes(x, bias, out, dtypes=_FLOATS) or kernels() is None:
        return None
    if np.may_share_memory(out, bias) or (out is not x and np.may_share_memory(out, x)):
        return None
    x3 = x.reshape(_around(x.shape, axis))
    if _run("bias_relu", x3, bias, out.reshape(x3.shape)) is FAILED:
        return None
    return out


def bias_relu_backward(
    dy: np.ndarray, y: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(dy * (y > 0), its sum over every axis but axis)`` in one pass over the threads (the
    channels of images; blocks of rows with partial sums for a dense layer's rows), or ``None``
    where the kernel does not take the operands."""
    if dy.size < PARALLEL_MIN or not _takes(dy, y, dtypes=_FLOATS) or kernels() is None:
        return None
    dx = np.empty_like(dy)
    m, c, p = _around(y.shape, axis)
    if p > 1:
        dbias = np.empty(c, y.dtype)
        shape = (m, c, p)
        found = _run(
            "bias_relu_backward", dy.reshape(shape), y.reshape(shape), dx.reshape(shape), dbias
        )
    else:
        partial = np.zeros((max(1, min(m, _openmp.max_threads() or 1)), c), y.dtype)
        rows = (m, c)
        found = _run(
            "bias_relu_backward_rows", dy.reshape(rows), y.reshape(rows), dx.reshape(rows), partial
        )
        dbias = partial.sum(axis=0)
    return None if found is FAILED else (dx, dbias)


#: Items of a row block in :func:`softmax` (a block's three passes stay in the core's cache).
_SOFTMAX_BLOCK = 4096


def softmax(x: np.ndarray) -> np.ndarray | None:
    """Softmax along the last axis of a large C-contiguous float32 ``x`` (one compiled kernel
    over the threads), or ``None`` where the kernel does not take it: small or other arrays,
    and any slice whose max is not finite or that holds a NaN (NumPy's code then gives the
    NaN rows the reference's way)."""
    if x.size < PARALLEL_MIN or not _takes(x) or x.ndim == 0 or kernels() is None:
        return None
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    out = np.empty_like(rows)
    total = np.empty(rows.shape[0], np.float64)
    if _run("softmax_rows", rows, out, total, max(1, _SOFTMAX_BLOCK // d)) is FAILED:
        return None
    if not np.isfinite(total).all():
        return None
    return out.reshape(x.shape)


def softmax_cross_entropy(
    logits: np.ndarray, labels: np.ndarray, scale: float
) -> tuple[Any, np.ndarray] | None:
    """``(loss, dlogits)`` of a C-contiguous float32 ``logits`` ``(..., D)`` against signed
    integer ``labels`` of its leading shape in one compiled call: on this thread under
    :data:`PARALLEL_MIN` items (NumPy's code: a dozen calls, each mostly overhead at this size),
    in blocks of rows over the threads above (NumPy's: a dozen passes over memory); ``None``
    where the kernel does not take them: other arrays, a label outside ``[0, D)``, a row whose
    max is not finite or that holds a NaN."""
    if labels.dtype.kind != "i" or not logits.flags.c_contiguous or kernels() is None:
        return None
    d = logits.shape[-1]
    grad = np.empty_like(logits)
    flat = labels.reshape(-1)
    rows = logits.reshape(-1, d)
    top, total = np.empty(rows.shape[0]), np.empty(rows.shape[0])
    scale = float(scale)
    args = (rows, flat, scale, grad.reshape(-1, d), top, total)
    if logits.size < PARALLEL_MIN:
        loss = _run("softmax_xent_small", *args, serial=True)
    else:
        block = max(1, _SOFTMAX_BLOCK // d)
        losses = np.empty(-(-rows.shape[0] // block))
        loss = _run("softmax_xent_rows", *args, losses, block)
        if loss is not FAILED:
            loss = math.fsum(losses) * scale
    if loss is FAILED or loss != loss:  # NaN: a label out of range or a row it does not take
        return None
    return logits.dtype.type(loss), grad


def softmax_backward(dy: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """``y * (dy - sum(dy * y))`` along the last axis of large C-contiguous float32/float64
    arrays of one dtype in one compiled pass over the threads, or ``None`` where the kernel
    does not take them."""
    if dy.size < PARALLEL_MIN or not _takes(dy, y, dtypes=_FLOATS) or kernels() is None:
        return None
    d = y.shape[-1]
    out = np.empty_like(y)
    if (
        _run("softmax_backward_rows", dy.reshape(-1, d), y.reshape(-1, d), out.reshape(-1, d))
        is FAILED
    ):
        return None
    return out


def gru_step(kernel: str, *args: Any) -> bool:
    """Run the GRU step kernel ``gru_cell_forward`` or ``gru_cell_backward`` (float32,
    C-contiguous operands, as :func:`gru_takes` says) on this thread; False if numba fails."""
    return _run(kernel, *args, serial=True) is not FAILED


def gru_takes(*arrays: np.ndarray | None) -> bool:
    """Whether the GRU step kernels take these operands (``None`` skipped): numba on, all
    float32 and C-contiguous."""
    given = [a for a in arrays if a is not None]
    return _takes(*given) and kernels() is not None


def batch_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, relu: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(y, mean, inv_std)`` of training-mode batch normalisation, ``y`` through a ReLU with
    ``relu`` (the arguments already checked), or ``None`` where the kernels do not take it."""
    if x.ndim < 2 or x.size == 0 or not _takes(x, gamma, beta) or kernels() is None:
        return None
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    y = np.empty_like(x3)
    mean, inv_std = np.empty(x.shape[1], x.dtype), np.empty(x.shape[1], x.dtype)
    if _run("batch_norm", x3, gamma, beta, float(eps), bool(relu), y, mean, inv_std) is FAILED:
        return None
    return y.reshape(x.shape), mean, inv_std


def batch_norm_backward(
    dy: np.ndarray,
    x: np.ndarray,
    gamma: np.ndarray,
    mean: np.ndarray,
    inv_std: np.ndarray,
    y: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(dx, dgamma, dbeta)`` of :func:`batch_norm`, of the ReLU'd form whose output was ``y``
    where ``y`` is given (the arguments already checked), or ``None`` where the kernels do not
    take it."""
    given = (dy, x, gamma, mean, inv_std) if y is None else (dy, x, gamma, mean, inv_std, y)
    if x.ndim < 2 or x.size == 0 or not _takes(*given) or kernels() is None:
        return None
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    dx = np.empty_like(x3)
    dgamma, dbeta = np.empty(x.shape[1], x.dtype), np.empty(x.shape[1], x.dtype)
    gate = dy if y is None else y  # read only with relu
    args = (dy.reshape(x3.shape), x3, gamma, mean, inv_std, y is not None, gate.reshape(x3.shape))
    if _run("batch_norm_backward", *args, dx, dgamma, dbeta) is FAILED:
        return None
    return dx.reshape(x.shape), dgamma, dbeta


def scatter_add(out: np.ndarray, indices: np.ndarray, values: np.ndarray, axis: int) -> bool:
    """``out[indices[i]] += values[i]`` along axis 0, in the order of ``numpy.add.at`` (so the
    same sums to the bit) as one compiled loop over whole rows; ``False`` where the kernel does
    not take the operands (another axis, dtype or layout, overlapping memory, or an index out
    of range, which the caller's NumPy path then reports)."""
    if (
        axis != 0
        or out.ndim == 0
        or out.size == 0
        or not _takes(out, values, dtypes=_FLOATS)
        or indices.ndim != 1
        or indices.size == 0  # nothing to add (and no row length to read off the values)
        or indices.dtype.kind != "i"
        or np.may_share_memory(out, values)
        or kernels() is None
    ):
        return False
    rows = out.reshape(out.shape[0], -1)  # views of C-contiguous arrays
    found = _run("scatter_add_rows", rows, indices, values.reshape(indices.shape[0], -1))
    return found is True


def max_pool2d(x: np.ndarray, win: Any) -> np.ndarray | None:
    """Max-pool forward over 2x2 tiles (``win`` checked), one pass; ``None`` where the kernel does
    not take it (another geometry, not float32/float64, not C-contiguous, empty)."""
    if x.size == 0 or not win.tiles_2x2 or not _takes(x, dtypes=_FLOATS) or kernels() is None:
        return None
    y = np.empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
    planes = x.reshape(-1, win.h, win.w)
    found = _run("max_pool2d_2x2", planes, y.reshape(-1, win.out_h, win.out_w))
    return None if found is FAILED else y


def max_pool2d_backward(dy: np.ndarray, x: np.ndarray, win: Any) -> np.ndarray | None:
    """Max-pool backward over the windows ``win`` (arguments already checked): each window's
    ``dy`` to its first maximum, in one pass; ``None`` where the kernels do not take it (not
    float32/float64 of one dtype, not C-contiguous, empty)."""
    if x.size == 0 or dy.size == 0 or not _takes(x, dy, dtypes=_FLOATS) or kernels() is None:
        return None
    planes = (win.n * win.c, win.h, win.w)
    dy3 = dy.reshape(-1, win.out_h, win.out_w)
    if win.tiles_2x2:
        # the common VGG/ResNet pooling: windows tile the image, dx written once by the kernel
        dx = np.empty(x.shape, x.dtype)
        if win.h > 2 * win.out_h:
            dx[:, :, 2 * win.out_h :] = 0
        if win.w > 2 * win.out_w:
            dx[:, :, :, 2 * win.out_w :] = 0
        found = _run("max_pool2d_backward_2x2", dy3, x.reshape(planes), dx.reshape(planes))
        return None if found is FAILED else dx
    dx = np.zeros(x.shape, x.dtype)
    (top, _), (left, _) = win.pads
    geometry = (win.kh, win.kw, win.stride[0], win.stride[1], top, left)
    found = _run("max_pool2d_backward", dy3, x.reshape(planes), *geometry, dx.reshape(planes))
    return None if found is FAILED else dx


def layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(y, mean, inv_std)`` of layer normalisation over the trailing ``gamma.ndim`` axes (the
    arguments already checked), or ``None`` where the kernels do not take it."""
    if x.size == 0 or not _takes(x, gamma, beta) or kernels() is None:
        return None
    d = gamma.size
    x2 = x.reshape(-1, d)
    y = np.empty_like(x2)
    mean, inv_std = np.empty(x2.shape[0], x.dtype), np.empty(x2.shape[0], x.dtype)
    if (
        _run("layer_norm", x2, gamma.reshape(d), beta.reshape(d), float(eps), y, mean, inv_std)
        is FAILED
    ):
        return None
    lead = x.shape[: x.ndim - gamma.ndim]
    return y.reshape(x.shape), mean.reshape(lead), inv_std.reshape(lead)


def layer_norm_backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray, inv_std: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(dx, dgamma, dbeta)`` of :func:`layer_norm` (the arguments already checked), or
    ``None`` where the kernels do not take it."""
    if x.size == 0 or not _takes(dy, x, gamma, mean, inv_std) or kernels() is None:
        return None
    d = gamma.size
    x2 = x.reshape(-1, d)
    dx = np.empty_like(x2)
    dgamma, dbeta = np.empty(d, x.dtype), np.empty(d, x.dtype)
    blocks = max(1, min(x2.shape[0], 4 * (_openmp.max_threads() or 1)))
    args = (dy.reshape(x2.shape), x2, gamma.reshape(d), mean.reshape(-1), inv_std.reshape(-1))
    if _run("layer_norm_backward", *args, dx, dgamma, dbeta, blocks) is FAILED:
        return None
    return dx.reshape(x.shape), dgamma.reshape(gamma.shape), dbeta.reshape(gamma.shape)
