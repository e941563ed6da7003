"""Host and device arrays never mix silently: what crosses between them, and only explicitly.

- :func:`asarray`: how host data (NumPy arrays and scalars, Python scalars and lists, other
  libraries' arrays) becomes an array of a namespace: objects that carry a dtype keep it,
  Python data takes the namespace's defaults, byte order becomes native.
- :func:`from_dlpack` (arraycore's generic import) and :func:`dlpack_export` /
  :func:`dlpack_device` (what :class:`arraycore.ArrayBase` arrays give DLPack consumers: a copy
  on the host, when asked for one with ``dl_device=CPU``; device memory itself is refused with a
  ``BufferError``).
- The errors: every one names the operation, the backends and devices involved, and the explicit
  call that does what was meant (``xp.asarray``, ``xp.to_numpy``, ``xp.from_dlpack``).

The registry is imported lazily here: :mod:`arraycore._registry` imports the namespace, which
imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._dtypes import DTYPES
from .errors import BackendMismatchError

if TYPE_CHECKING:
    from ._base import NamespaceBase

#: DLPack device types (``DLDeviceType`` of dlpack.h) that arraycore uses.
KDL_CPU = 1
KDL_OPENCL = 4
KDL_EXT_DEV = 12

_TO_HOST = "copy it to the host explicitly with xp.to_numpy(x) or arraycore.to_numpy(x)"


def _owner(x: Any) -> NamespaceBase | None:
    from ._registry import _owner as owner

    return owner(x)


def _type_name(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__name__}"


def where_is(x: Any) -> str:
    """``x`` for an error message: its type and where it lives (backend and device)."""
    if isinstance(x, np.ndarray | np.generic):
        return f"a {_type_name(x)} in host memory (backend 'numpy')"
    ns = _owner(x)
    if ns is None:
        return f"a {_type_name(x)}, which is not an array of any loaded arraycore backend"
    return f"a {_type_name(x)} of backend {ns.name!r} on {ns.device}"


def _is_host(x: Any) -> bool:
    if isinstance(x, np.ndarray | np.generic):
        return True
    ns = _owner(x)
    return ns is not None and ns.name == "numpy"


def mismatch(op: str, x: Any, xp: NamespaceBase) -> BackendMismatchError:
    """The error for ``x`` passed to ``xp``'s ``op`` when it is not an array of ``xp``."""
    here = f"this namespace is backend {xp.name!r} on {xp.device}"
    if xp.name == "numpy" and _owner(x) is not None:
        advice = (
            f"arrays never move to the host implicitly: {_TO_HOST} (or through DLPack: "
            f"xp.from_dlpack(x, device='cpu', copy=True))"
        )
    elif _is_host(x):
        advice = (
            f"host and device arrays never mix implicitly: copy it to the device with "
            f"xp.asarray(a) (arraycore.asarray(a) inside `with arraycore.use({xp.name!r})`), "
            f"or {_TO_HOST}"
        )
    elif _owner(x) is not None:
        advice = (
            "arrays never move between backends implicitly: move it with xp.from_dlpack(x) "
            "or through the host with xp.asarray(arraycore.to_numpy(x))"
        )
    else:
        advice = "make it an array of this namespace first with xp.asarray(...)"
    return BackendMismatchError(f"{op}: got {where_is(x)}, but {here}; {advice}")


#: What makes an object an array of some library (NumPy's, PyTorch's, JAX's, ...), not data.
_ARRAY_PROTOCOLS = (
    "__array_namespace__",
    "__dlpack__",
    "__array_interface__",
    "__cuda_array_interface__",
    "__array__",
)


def is_foreign_array(x: Any) -> bool:
    """Whether ``x`` (which no loaded backend owns) is an array of another library: it speaks
    one of the array protocols (a PyTorch tensor, a JAX or Dask array, a pandas Series, ...)."""
    return not isinstance(x, type) and any(hasattr(x, name) for name in _ARRAY_PROTOCOLS)


def foreign(op: str | None, x: Any, loaded: list[str]) -> BackendMismatchError:
    """The error for an array of another library where arraycore looks for its backend."""
    names = ", ".join(sorted(set(loaded))) or "none yet"
    return BackendMismatchError(
        f"{op or 'namespace_of'}: got {where_is(x)}; arraycore does not adopt other libraries' "
        f"arrays implicitly (loaded backends: {names}). Make it an "
        f"array of a backend with arraycore.asarray(x) (which keeps its dtype) or "
        f"xp.from_dlpack(x); an array of a backend that is not loaded yet is recognised once "
        f"arraycore.namespace(name) has loaded it"
    )


def two_backends(op: str | None, first: Any, first_ns: Any, x: Any, ns: Any) -> Exception:
    """The error for arrays of two backends or devices in one call."""
    prefix = f"{op}: " if op else ""
    return BackendMismatchError(
        f"{prefix}arrays of two backends or devices in one call: a {type(first).__name__} on "
        f"{first_ns.device} and a {type(x).__name__} on {ns.device}; arrays never move "
        f"implicitly: move one explicitly (to a device with xp.asarray(a) or xp.from_dlpack(x), "
        f"arraycore.asarray(a) inside `with arraycore.use(...)`; to the host with "
        f"arraycore.to_numpy(x))"
    )


def implicit_conversion(x: Any) -> TypeError:
    """What ``numpy.asarray(x)`` of a device array raises (``ArrayBase.__array__``)."""
    return TypeError(
        f"implicit conversion to a NumPy array (numpy.asarray, numpy.array, ...) is not allowed "
        f"for {where_is(x)}; {_TO_HOST}"
    )


def numpy_function(x: Any, func: Any) -> TypeError:
    """What a NumPy function given a device array raises (``ArrayBase.__array_function__``)."""
    name = f"{getattr(func, '__module__', 'numpy')}.{getattr(func, '__name__', func)}"
    return TypeError(
        f"{name}: NumPy functions do not run on {where_is(x)}, and arrays never move to the "
        f"host implicitly; call arraycore's function (xp = arraycore.namespace_of(x)) or "
        f"{_TO_HOST}"
    )


# -- asarray ---------------------------------------------------------------------------------------
def _carries_dtype(obj: Any) -> bool:
    """Whether ``obj`` has a dtype of its own (arrays of any library), unlike Python data."""
    return isinstance(obj, np.ndarray | np.generic | memoryview) or any(
        hasattr(obj, attr) for attr in ("dtype", "__array_interface__", "__dlpack__")
    )


def _holds_arrays(xp: NamespaceBase, obj: Any) -> bool:
    if xp._is_array(obj):
        return True
    return isinstance(obj, list | tuple) and any(_holds_arrays(xp, item) for item in obj)


def _stack_nested(xp: NamespaceBase, obj: Any) -> Any:
    if xp._is_array(obj):
        xp._check("asarray", obj)
        return obj
    if isinstance(obj, list | tuple):
        if not obj:
            raise ValueError("asarray: an empty sequence beside arrays has no shape")
        return xp.stack([_stack_nested(xp, item) for item in obj])
    return xp.asarray(obj)


def asarray(xp: NamespaceBase, obj: Any, dtype: Any, copy: bool | None) -> Any:
    """``xp.asarray(obj, dtype=dtype, copy=copy)`` (the device was checked by the caller)."""
    if xp._is_array(obj):
        xp._check("asarray", obj)
        # Checked even without dtype=: NumPy's arrays may hold dtypes (or a byte order) that
        # arraycore's arrays do not.
        dt = xp._dtype(obj.dtype if dtype is None else dtype, "asarray")
        if copy is True or dt != obj.dtype:
            if copy is False:
                raise ValueError(
                    "asarray: copy=False but a dtype (or byte-order) conversion needs a copy"
                )
            return xp._backend.astype(obj, dt)
        return obj
    if hasattr(obj, "__array_namespace__") and not isinstance(obj, np.ndarray | np.generic):
        raise mismatch("asarray", obj, xp)
    if copy is False:
        raise ValueError(f"asarray: copy=False cannot hold for host data on backend {xp.name!r}")
    if isinstance(obj, list | tuple) and _holds_arrays(xp, obj):
        # a nested sequence of this namespace's arrays (and scalars): stacked on the device
        stacked = _stack_nested(xp, obj)
        return stacked if dtype is None else xp._cast(stacked, xp._dtype(dtype, "asarray"))
    host = np.asarray(obj)
    if dtype is not None:
        host = host.astype(xp._dtype(dtype, "asarray"), copy=False)
    elif not _carries_dtype(obj):
        # Python scalars and lists: the namespace's default float and int64.
        if host.dtype.kind == "f":
            host = host.astype(xp._default_float(), copy=False)
        elif host.dtype.kind in "iu":
            host = host.astype(np.int64, copy=False)
    if host.dtype.name not in DTYPES:
        raise TypeError(f"asarray: dtype {host.dtype} of the input is not supported")
    host = host.astype(xp._dtype(host.dtype, "asarray"), copy=False)  # native byte order
    return xp._backend.from_numpy(np.ascontiguousarray(host).reshape(host.shape))


# -- DLPack ----------------------------------------------------------------------------------------
def require_dlpack(x: Any) -> None:
    """Raise a ``TypeError`` that says what to do if ``x`` cannot be imported through DLPack."""
    if not hasattr(x, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: a {_type_name(x)} does not support DLPack "
            f"(no __dlpack__); copy it through the host instead: "
            f"asarray(<its namespace>.to_numpy(x))"
        )


def from_dlpack(xp: NamespaceBase, x: Any, copy: bool | None) -> Any:
    """``xp.from_dlpack(x, copy=copy)`` for backends without a DLPack import of their own.

    An array of ``xp`` itself is returned (copied if ``copy``); host memory is copied to the
    device; device memory of another library is copied through the host when its producer can
    export a host copy (``dl_device=CPU, copy=True``).
    """
    own = xp._is_array(x)
    if own and xp._backend.device_of(x) == xp._backend.device.id:
        return xp._backend.astype(x, x.dtype) if copy else x
    if not own:
        require_dlpack(x)
    if copy is False:
        raise BufferError(
            f"from_dlpack: copy=False, but {where_is(x)} cannot become an array of backend "
            f"{xp.name!r} on {xp.device} without a copy"
        )
    ns = _owner(x) if own else None
    if ns is not None:  # this backend, another device: through the host
        return asarray(xp, ns.to_numpy(x), None, None)
    kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else KDL_CPU
    if kind == KDL_CPU:
        host = np.from_dlpack(x)
    else:  # device memory (NumPy would refuse it): ask the producer for a host copy
        host = np.from_dlpack(x, device="cpu", copy=True)
    return asarray(xp, host, None, None)


def dlpack_device(x: Any) -> tuple[int, int]:
    """``x.__dlpack_device__()`` of an ``ArrayBase`` array: its class's DLPack device type and
    the index of its device among its backend's devices."""
    ns = _owner(x)
    if ns is None:
        raise BufferError(f"__dlpack_device__: {where_is(x)}")
    dev = ns._backend.device_of(x)
    ids = [d.id for d in ns._backend.devices()]
    return int(type(x).dlpack_device_type), ids.index(dev) if dev in ids else 0


def dlpack_export(
    x: Any, stream: Any, max_version: tuple[int, int] | None, dl_device: Any, copy: bool | None
) -> Any:
    """``x.__dlpack__(...)`` of an ``ArrayBase`` array: a host copy for ``dl_device=CPU``.

    Device memory itself is not exported (no consumer can address a backend's private buffers):
    that, ``copy=False`` and devices other than the CPU raise a ``BufferError`` that names the
    call that works. ``stream`` is ignored: the copy waits for the device.
    """
    own = dlpack_device(x)
    ns = _owner(x)
    assert ns is not None  # dlpack_device raised otherwise
    where = f"an array of backend {ns.name!r} on {ns.device}"
    target = None if dl_device is None else tuple(int(v) for v in dl_device)
    if target is None or target == own:
        raise BufferError(
            f"__dlpack__: {where} lives in its backend's memory, which DLPack consumers cannot "
            f"address; export a host copy with numpy.from_dlpack(x, device='cpu', copy=True), or "
            f"{_TO_HOST}"
        )
    if target != (KDL_CPU, 0):
        raise BufferError(
            f"__dlpack__: {where} exports only to the host (dl_device=(1, 0)), not to "
            f"DLPack device {target}; {_TO_HOST}"
        )
    if copy is False:
        raise BufferError(
            f"__dlpack__: {where} reaches the host only through a copy, but copy=False; "
            f"pass copy=True (numpy.from_dlpack(x, device='cpu', copy=True))"
        )
    host = ns.to_numpy(x)
    if max_version is None or max_version[0] < 1:
        return host.__dlpack__()
    # copy=True: NumPy marks the versioned tensor as copied (DLPACK_FLAG_BITMASK_IS_COPIED).
    return host.__dlpack__(max_version=max_version, copy=True)


# -- nn kernels of device backends ----------------------------------------------------------------
def kernel_namespace(host: Any, op: str, *arrays: Any) -> NamespaceBase:
    """The namespace of ``arrays`` given to ``xp.nn.<op>`` of a :class:`KernelHost` ``host``.

    They must be arrays of the backend and device the host launches on (the namespace of an
    array of its own ``kernel_empty``, found once): NumPy arrays, or another backend's, are a
    :class:`BackendMismatchError` naming the op, never an attribute error from inside a launch.
    """
    from ._registry import dispatch_namespace, namespace_of

    target: NamespaceBase | None = getattr(host, "_kernel_target", None)
    if target is None:
        target = namespace_of(host.kernel_empty((0,), np.dtype("float32")))
        host._kernel_target = target
    name = f"nn.{op}"
    xp = dispatch_namespace(name, arrays)
    if xp is not target:
        raise mismatch(name, arrays[0], target)
    return xp
