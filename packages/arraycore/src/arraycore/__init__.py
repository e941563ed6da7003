"""arraycore: a NumPy-subset array protocol that runs on any device.

Call the functions here (``arraycore.add(x, y)``), or take a namespace once and call it
(``xp = arraycore.namespace(); xp.add(x, y)``): names and semantics follow the Python Array API
standard (2024.12). Functions outside the standard live in sub-namespaces: ``nn`` (convolution,
pooling, softmax, ...), ``inplace`` (``out=`` updates), ``random`` (seeded generators).

A call runs on the backend of the arrays it receives; without arrays, on the backend of the
innermost ``with arraycore.use(...)``, else the one named by ``ARRAYCORE_BACKEND``, else NumPy.
New arrays live on that active backend: ``asarray``, ``from_numpy`` and ``from_dlpack`` create
theirs there even from NumPy arrays (host data never decides the backend).

>>> import arraycore as ac
>>> x = ac.asarray([[1.0, 2.0], [3.0, 4.0]])
>>> ac.sum(x @ x, axis=0).tolist()
[22.0, 32.0]
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _dtypes, _registry, _threads
from ._array import ArrayBase
from ._array_methods import strict
from ._checks import checks
from ._checks import enabled as checks_enabled
from ._cpu_extra import check_cpu_extra
from ._linalg import LinalgNamespace
from ._namespace import Generator, Namespace
from ._registry import current, namespace, namespace_of, use
from ._threads import check_threads, set_threads, thread_info, thread_setting, threads
from .protocol import ArrayNamespace

if TYPE_CHECKING:
    from .protocol import InplaceFunctions, LinalgFunctions, NNFunctions, RandomFunctions
from .backend import Backend, Captured, CaptureUnsupported, Device
from .errors import (
    BackendError,
    BackendMismatchError,
    BackendNotFoundError,
    BackendNotInstalledError,
    BackendProtocolError,
    BackendUnavailableError,
    PerformanceWarning,
)

__version__ = "0.1.0"
__array_api_version__ = "2024.12"

# ARRAYCORE_NUM_THREADS, if set, limits the BLAS and OpenMP pools NumPy has loaded (docs/threads.md)
_threads.apply_environment()


def _dispatch(name: str, sub: str | None = None) -> Callable[..., Any]:
    op = name if sub is None else f"{sub}.{name}"

    def function(*args: Any, **kwargs: Any) -> Any:
        xp = _on_device(_registry.dispatch_namespace(op, (*args, *kwargs.values())), kwargs)
        owner = xp if sub is None else getattr(xp, sub)
        return getattr(owner, name)(*args, **kwargs)

    target = getattr(Namespace, name, None) if sub is None else None
    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    if target is not None:
        function.__signature__ = _signature(name)  # type: ignore[attr-defined]
    function.__doc__ = (
        getattr(target, "__doc__", None) or f"``{sub}.{name}`` of the array's backend."
    )
    return function


_CREATE = frozenset({"asarray", "from_numpy", "from_dlpack"})


def _on_device(xp: Namespace, kwargs: dict[str, Any]) -> Namespace:
    """``xp``, or the namespace of the same backend on the ``device=`` a call names."""
    device = kwargs.get("device")
    if device is None or device == xp.device.id or device is xp.device:
        return xp
    return namespace(xp.name, getattr(device, "id", device))


def _signature(name: str) -> inspect.Signature:
    """The namespace function's signature without ``self``."""
    sig = inspect.signature(getattr(Namespace, name))
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _create(name: str) -> Callable[..., Any]:
    """``asarray``, ``from_numpy``, ``from_dlpack``: new arrays live on the active backend.

    Host data (NumPy arrays and scalars included) never decides the backend; ``asarray`` of an
    array of a device backend leaves it with its backend (see :func:`_registry.placement`).
    """

    def function(obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        xp = _registry.placement(obj) if name == "asarray" else namespace()
        xp = _on_device(xp, kwargs)
        return getattr(xp, name)(obj, *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__signature__ = _signature(name)  # type: ignore[attr-defined]
    function.__doc__ = getattr(Namespace, name).__doc__
    return function


class _SubDispatch:
    """Module-level view of a sub-namespace: dispatches on the arrays passed."""

    def __init__(self, sub: str) -> None:
        self._sub = sub

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if not hasattr(getattr(namespace(), self._sub), name):
            raise AttributeError(f"arraycore.{self._sub} has no function {name!r}")
        fn = _dispatch(name, self._sub)
        setattr(self, name, fn)
        return fn

    def __repr__(self) -> str:
        return f"<arraycore.{self._sub}: dispatches to the active backend>"


nn = _SubDispatch("nn")
inplace = _SubDispatch("inplace")


class _LinalgDispatch:
    """``arraycore.linalg``: the standard's ``linalg`` extension, dispatching on the arrays
    passed, each function with the true signature of ``xp.linalg``'s."""

    def __repr__(self) -> str:
        return "<arraycore.linalg: dispatches to the arrays' backend>"


# typed as xp.linalg is: the loop below gives it a function of each signature
linalg: LinalgFunctions = _LinalgDispatch()  # type: ignore[assignment]
for _name, _fn in inspect.getmembers(LinalgNamespace, inspect.isfunction):
    if not _name.startswith("_"):
        _function = _dispatch(_name, "linalg")
        _sig = inspect.signature(_fn)
        _function.__signature__ = _sig.replace(  # type: ignore[attr-defined]
            parameters=list(_sig.parameters.values())[1:]
        )
        _function.__doc__ = _fn.__doc__
        setattr(linalg, _name, _function)


class _RandomDispatch:
    """``arraycore.random.default_rng(seed)``: a generator on the active backend."""

    def default_rng(
        self, seed: int = 0, *, backend: str | None = None, device: Any = None
    ) -> Generator:
        """A seeded :class:`Generator` on ``backend`` (default: the active one)."""
        return namespace(backend, device).random.default_rng(seed)


random = _RandomDispatch()

bool = np.dtype("bool")  # noqa: A001 - the standard's dtype name
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
e = Namespace.e
pi = Namespace.pi
inf = Namespace.inf
nan = Namespace.nan
newaxis = None
result_type = _dtypes.result_type
can_cast = _dtypes.can_cast
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo
isdtype = _dtypes.isdtype


def __array_namespace_info__() -> Any:
    """Inspection utilities of the active backend (devices, dtypes, capabilities)."""
    return namespace().__array_namespace_info__()


#: Names of the module-level functions: every public function of :class:`Namespace`, each a
#: dispatcher with the namespace function's own signature and docstring.
FUNCTIONS: tuple[str, ...] = tuple(
    name
    for name in sorted(dir(Namespace))
    if not name.startswith("_") and inspect.isfunction(inspect.getattr_static(Namespace, name))
)

for _name in FUNCTIONS:
    globals()[_name] = _create(_name) if _name in _CREATE else _dispatch(_name)
del _name


def __getattr__(name: str) -> Any:
    """Module attributes that do not exist: an error with the closest names."""
    close = difflib.get_close_matches(name, [*FUNCTIONS, "nn", "inplace", "random", "linalg"], n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise AttributeError(f"module 'arraycore' has no attribute {name!r}{hint}")


__all__ = [
    "ArrayBase",
    "ArrayNamespace",
    "Backend",
    "BackendError",
    "BackendMismatchError",
    "BackendNotFoundError",
    "BackendNotInstalledError",
    "BackendProtocolError",
    "BackendUnavailableError",
    "CaptureUnsupported",
    "Captured",
    "Device",
    "PerformanceWarning",
    "Generator",
    "Namespace",
    "checks",
    "checks_enabled",
    "current",
    "inplace",
    "namespace",
    "namespace_of",
    "linalg",
    "nn",
    "random",
    "use",
    "check_cpu_extra",
    "check_threads",
    "set_threads",
    "strict",
    "thread_info",
    "thread_setting",
    "threads",
    *FUNCTIONS,
]


if TYPE_CHECKING:  # mypy proves every namespace satisfies the typed protocol

    def _conforms(xp: Namespace) -> ArrayNamespace:
        return xp

    def _conforms_nn(xp: Namespace) -> NNFunctions:
        return xp.nn

    def _conforms_inplace(xp: Namespace) -> InplaceFunctions:
        return xp.inplace

    def _conforms_random(xp: Namespace) -> RandomFunctions:
        return xp.random

    def _conforms_linalg(xp: Namespace) -> LinalgFunctions:
        return xp.linalg
