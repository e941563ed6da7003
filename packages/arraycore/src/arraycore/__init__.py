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

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _dtypes, _registry
from ._array import ArrayBase
from ._checks import checks
from ._namespace import Generator, Namespace
from ._registry import current, namespace, namespace_of, use
from .backend import Backend, Device
from .errors import (
    BackendError,
    BackendMismatchError,
    BackendNotFoundError,
    BackendNotInstalledError,
    BackendUnavailableError,
)

__version__ = "0.1.0"
__array_api_version__ = "2024.12"


def _dispatch(name: str, sub: str | None = None) -> Callable[..., Any]:
    op = name if sub is None else f"{sub}.{name}"

    def function(*args: Any, **kwargs: Any) -> Any:
        xp = _registry.dispatch_namespace(op, (*args, *kwargs.values()))
        owner = xp if sub is None else getattr(xp, sub)
        return getattr(owner, name)(*args, **kwargs)

    target = getattr(Namespace, name, None) if sub is None else None
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        getattr(target, "__doc__", None) or f"``{sub}.{name}`` of the array's backend."
    )
    return function


def _create(name: str) -> Callable[..., Any]:
    """``asarray``, ``from_numpy``, ``from_dlpack``: new arrays live on the active backend.

    Host data (NumPy arrays and scalars included) never decides the backend; ``asarray`` of an
    array of a device backend leaves it with its backend (see :func:`_registry.placement`).
    """

    def function(obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        xp = _registry.placement(obj) if name == "asarray" else namespace()
        return getattr(xp, name)(obj, *args, **kwargs)

    function.__name__ = function.__qualname__ = name
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


asarray = _create("asarray")
empty = _dispatch("empty")
zeros = _dispatch("zeros")
ones = _dispatch("ones")
full = _dispatch("full")
arange = _dispatch("arange")
linspace = _dispatch("linspace")
eye = _dispatch("eye")
empty_like = _dispatch("empty_like")
zeros_like = _dispatch("zeros_like")
ones_like = _dispatch("ones_like")
full_like = _dispatch("full_like")
astype = _dispatch("astype")
add = _dispatch("add")
subtract = _dispatch("subtract")
multiply = _dispatch("multiply")
divide = _dispatch("divide")
floor_divide = _dispatch("floor_divide")
remainder = _dispatch("remainder")
pow = _dispatch("pow")
negative = _dispatch("negative")
positive = _dispatch("positive")
abs = _dispatch("abs")
sqrt = _dispatch("sqrt")
square = _dispatch("square")
exp = _dispatch("exp")
expm1 = _dispatch("expm1")
log = _dispatch("log")
log1p = _dispatch("log1p")
tanh = _dispatch("tanh")
sin = _dispatch("sin")
cos = _dispatch("cos")
sign = _dispatch("sign")
floor = _dispatch("floor")
ceil = _dispatch("ceil")
round = _dispatch("round")
maximum = _dispatch("maximum")
minimum = _dispatch("minimum")
clip = _dispatch("clip")
equal = _dispatch("equal")
not_equal = _dispatch("not_equal")
less = _dispatch("less")
less_equal = _dispatch("less_equal")
greater = _dispatch("greater")
greater_equal = _dispatch("greater_equal")
logical_and = _dispatch("logical_and")
logical_or = _dispatch("logical_or")
logical_not = _dispatch("logical_not")
isnan = _dispatch("isnan")
isinf = _dispatch("isinf")
isfinite = _dispatch("isfinite")
where = _dispatch("where")
sum = _dispatch("sum")
prod = _dispatch("prod")
mean = _dispatch("mean")
var = _dispatch("var")
std = _dispatch("std")
max = _dispatch("max")
min = _dispatch("min")
argmax = _dispatch("argmax")
argmin = _dispatch("argmin")
all = _dispatch("all")
any = _dispatch("any")
cumulative_sum = _dispatch("cumulative_sum")
matmul = _dispatch("matmul")
tensordot = _dispatch("tensordot")
vecdot = _dispatch("vecdot")
matrix_transpose = _dispatch("matrix_transpose")
reshape = _dispatch("reshape")
permute_dims = _dispatch("permute_dims")
expand_dims = _dispatch("expand_dims")
squeeze = _dispatch("squeeze")
broadcast_to = _dispatch("broadcast_to")
broadcast_arrays = _dispatch("broadcast_arrays")
concat = _dispatch("concat")
stack = _dispatch("stack")
flip = _dispatch("flip")
tile = _dispatch("tile")
repeat = _dispatch("repeat")
moveaxis = _dispatch("moveaxis")
take = _dispatch("take")
take_along_axis = _dispatch("take_along_axis")
getitem = _dispatch("getitem")
setitem = _dispatch("setitem")
to_numpy = _dispatch("to_numpy")
from_numpy = _create("from_numpy")
from_dlpack = _create("from_dlpack")

__all__ = [
    "ArrayBase",
    "Backend",
    "BackendError",
    "BackendMismatchError",
    "BackendNotFoundError",
    "BackendNotInstalledError",
    "BackendUnavailableError",
    "Device",
    "Generator",
    "Namespace",
    "checks",
    "current",
    "inplace",
    "namespace",
    "namespace_of",
    "nn",
    "random",
    "use",
    "asarray",
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "linspace",
    "eye",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "astype",
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "remainder",
    "pow",
    "negative",
    "positive",
    "abs",
    "sqrt",
    "square",
    "exp",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "sin",
    "cos",
    "sign",
    "floor",
    "ceil",
    "round",
    "maximum",
    "minimum",
    "clip",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "isnan",
    "isinf",
    "isfinite",
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
    "matmul",
    "tensordot",
    "vecdot",
    "matrix_transpose",
    "reshape",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "broadcast_to",
    "broadcast_arrays",
    "concat",
    "stack",
    "flip",
    "tile",
    "repeat",
    "moveaxis",
    "take",
    "take_along_axis",
    "getitem",
    "setitem",
    "to_numpy",
    "from_numpy",
    "from_dlpack",
]
