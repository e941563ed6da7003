"""Dtype rules: the result dtype of every namespace function, in one table.

:data:`RULES` maps each function that takes arrays to a :class:`DtypeRule`: the dtypes it
accepts and how its result dtype follows from the (promoted) dtype of its inputs.
``docs/dtypes.md`` is the same table in prose, with the reasons; the conformance kit checks every
function against every dtype with :func:`result_dtype`, and arraycore's derived functions convert
their inputs with :func:`compute_dtype` before a backend's primitive runs, so a backend that
implements only primitives cannot give another dtype.

A backend's overrides of these functions (NumPy's and CuPy's functions, say) see only inputs that
every array library treats alike unless the backend declares them conforming
(:attr:`arraycore.backend.Backend.conforming_overrides`): :func:`guard` sends integer and bool
inputs to arraycore's derived function, which applies the rules.

The integer edge cases that are values rather than dtypes live here too: Python ints out of an
integer dtype's range (:func:`check_python_int`, :func:`out_of_range_comparison`) and integer
powers with negative exponents (:data:`NEGATIVE_POWER`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _optable

_BOOL = np.dtype("bool")
_INT64 = np.dtype("int64")
_UINT64 = np.dtype("uint64")
_FLOAT = np.dtype("float64")  # what guard() assumes for arguments without a dtype


@dataclass(frozen=True)
class DtypeRule:
    """How one function treats dtypes.

    ``kind`` is the function's calling pattern (``"unary"``, ``"binary"``, ``"where"``,
    ``"clip"``, ``"reduction"``, ``"linalg"``, ``"layout"``, ``"search"``, ``"creation"``);
    ``accepts`` is
    a key of :data:`arraycore._optable.ACCEPTS` (``"all"``, ``"numeric"``: bool input is a
    ``TypeError``, ``"integer"``, ``"integer or bool"``); ``result`` names a rule of
    :data:`RESULTS`.
    """

    kind: str
    accepts: str
    result: str


RESULTS: dict[str, str] = {
    "same": "the input's dtype; with several arrays or Python scalars, their promoted dtype",
    "float": (
        "floating input: its (promoted) dtype; integer or bool input: the device's default "
        "floating dtype (float64, or float32 on a device without float64)"
    ),
    "bool": "bool",
    "int64": "int64 (the default integer and index dtype)",
    "accumulate": (
        "bool and signed integers: int64; unsigned integers: uint64; floating: the input's "
        "dtype; ``dtype=`` when given"
    ),
    "x": "the dtype of the array ``x`` (other arguments are converted to it)",
    "requested": "the ``dtype`` argument",
}
"""Every result rule of :data:`RULES`, as ``docs/dtypes.md`` states it."""


def _rules(kind: str, accepts: str, result: str, names: str) -> dict[str, DtypeRule]:
    return dict.fromkeys(names.split(), DtypeRule(kind, accepts, result))


RULES: dict[str, DtypeRule] = {
    **{
        op.name: DtypeRule("unary" if op.arity == 1 else "binary", op.accepts, op.result)
        for op in _optable.ELEMENTWISE
    },
    "where": DtypeRule("where", "all", "same"),
    "clip": DtypeRule("clip", "all", "x"),
    **_rules("reduction", "all", "accumulate", "sum prod cumulative_sum cumulative_prod"),
    **_rules("reduction", "all", "int64", "count_nonzero"),
    **_rules("reduction", "all", "same", "max min"),
    **_rules("reduction", "all", "bool", "any all"),
    **_rules("reduction", "all", "float", "mean var std"),
    **_rules("reduction", "all", "int64", "argmax argmin"),
    **_rules("linalg", "all", "same", "matmul tensordot vecdot"),
    **_rules(
        "layout",
        "all",
        "same",
        "matrix_transpose reshape permute_dims moveaxis expand_dims squeeze broadcast_to "
        "broadcast_arrays concat stack flip tile getitem",
    ),
    **_rules("layout", "all", "x", "repeat take take_along_axis"),
    **_rules("layout", "all", "same", "diff roll tril triu meshgrid unstack"),
    **_rules("search", "all", "same", "sort unique_values unique_counts unique_inverse unique_all"),
    **_rules("search", "all", "int64", "argsort searchsorted nonzero"),
    **_rules("creation", "all", "same", "empty_like zeros_like ones_like full_like"),
    "astype": DtypeRule("creation", "all", "requested"),
}
"""The dtype rule of every namespace function that takes arrays, by name.

``xp.inplace.<name>`` follows the rule of ``<name>``: ``out`` has the result's dtype.
"""

COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
LOGICAL = frozenset({"logical_and", "logical_or", "logical_not", "logical_xor"})

#: Functions whose overrides :func:`guard` wraps (with ``inplace.<name>`` for element-wise ones):
#: not layout, creation and search functions, whose results keep the input's dtype (or int64)
#: in every array library.
GUARDED: frozenset[str] = frozenset(
    [n for n, r in RULES.items() if r.kind not in ("layout", "creation", "search")]
    + [f"inplace.{n}" for n, r in RULES.items() if r.kind in ("unary", "binary")]
)

NEGATIVE_POWER = (
    "{op}: integers to negative integer powers are not allowed (as in NumPy); give pow a "
    "floating base or exponent for reciprocals"
)


def not_defined(name: str, dtype: np.dtype) -> TypeError:
    """The error for a dtype that ``name`` does not accept."""
    hint = {"negative": "; use logical_not", "subtract": "; use logical_xor"}.get(name, "")
    return TypeError(f"{name}: not defined for {dtype} arrays{hint}")


def _python_scalar(x: Any) -> bool:
    return isinstance(x, bool | int | float) and not isinstance(x, np.generic)


def promoted(operands: tuple[Any, ...], default_float: np.dtype) -> np.dtype:
    """The dtype that arrays (given by dtype) and Python scalars meet in.

    Arrays promote with the standard's table as NumPy 2 extends it (``result_type``); a Python
    ``bool`` takes the arrays' dtype, an ``int`` the arrays' dtype (int64 with bool arrays), a
    ``float`` the arrays' floating dtype or, with integer and bool arrays, ``default_float``.
    """
    scalars = [o for o in operands if _python_scalar(o)]
    arrays = [np.dtype(o) for o in operands if not _python_scalar(o)]
    if not arrays:
        raise TypeError("at least one argument must be an array")
    dt = np.result_type(*arrays) if len(arrays) > 1 else arrays[0]
    for o in scalars:
        if isinstance(o, bool):
            continue
        if isinstance(o, int) and dt.kind == "b":
            dt = _INT64
        elif isinstance(o, float) and dt.kind != "f":
            dt = default_float
    return dt


def compute_dtype(name: str, dtype: np.dtype, default_float: np.dtype) -> np.dtype:
    """The dtype a backend's primitive computes ``name`` in for promoted input ``dtype``.

    Raises the ``TypeError`` of :func:`not_defined` for a dtype the function does not accept.
    """
    rule = RULES[name]
    if (rule.accepts == "numeric" and dtype.kind == "b") or (
        rule.accepts.startswith("integer")
        and (dtype.kind == "f" or (dtype.kind == "b" and rule.accepts == "integer"))
    ):
        raise not_defined(name, dtype)
    if rule.result == "float" and dtype.kind != "f":
        return default_float
    if name in LOGICAL:
        return _BOOL
    return dtype


def result_dtype(
    name: str, *operands: Any, default_float: np.dtype, dtypes: Collection[str] | None = None
) -> np.dtype:
    """The dtype of ``name``'s result for these operands (dtypes, or Python scalars).

    Operands are the data arguments (``x1, x2`` of ``where``, ``x`` and the bounds of ``clip``,
    ``x`` and the requested dtype of ``astype``).
    A dtype ``name`` does not accept raises ``TypeError``, as the function does; so does a
    promoted dtype of two arrays that is not among the device's ``dtypes`` (int32 with float32
    is float64, which a device may lack).
    """
    rule = RULES[name]
    if rule.result in ("x", "requested"):
        given: np.dtype = np.dtype(operands[0 if rule.result == "x" else -1])
        return given
    dt = promoted(operands, default_float)
    if dtypes is not None and dt.name not in dtypes:
        raise TypeError(f"{name}: the promoted dtype {dt} is not available on the device")
    dt = compute_dtype(name, dt, default_float)
    if rule.result in ("same", "float"):
        return dt
    if rule.result == "bool":
        return _BOOL
    if rule.result == "int64":
        return _INT64
    if rule.result == "accumulate":
        if dt.kind == "u":
            return _UINT64
        return _INT64 if dt.kind in "bi" else dt
    raise ValueError(f"{name}: unknown result rule {rule.result!r}")


# -- Python ints out of an integer dtype's range -------------------------------------------------
def check_python_int(name: str, value: int, dtype: np.dtype) -> None:
    """Raise ``OverflowError`` (as NumPy 2 does) if ``value`` does not fit integer ``dtype``."""
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise OverflowError(
            f"{name}: Python integer {value} is out of bounds for {dtype} "
            f"(range {info.min} to {info.max})"
        )


def clamp_python_int(value: int, dtype: np.dtype) -> int:
    """``value`` limited to integer ``dtype``'s range (an out-of-range ``clip`` bound)."""
    info = np.iinfo(dtype)
    return max(int(info.min), min(int(info.max), value))


_MIRROR = {
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
    "equal": "equal",
    "not_equal": "not_equal",
}


def out_of_range_comparison(
    name: str, value: int, dtype: np.dtype, scalar_first: bool
) -> bool | None:
    """The constant result of comparing an integer array with a Python int outside its range
    (exact, as NumPy 2 compares), or None when ``value`` fits ``dtype``."""
    info = np.iinfo(dtype)
    if info.min <= value <= info.max:
        return None
    op = _MIRROR[name] if scalar_first else name  # now: element <op> value
    above = value > info.max
    return {
        "equal": False,
        "not_equal": True,
        "less": above,
        "less_equal": above,
        "greater": not above,
        "greater_equal": not above,
    }[op]


# -- overrides ---------------------------------------------------------------------------------------
def guard(
    name: str,
    override: Callable[..., Any],
    derived: Callable[..., Any],
    owns: Callable[[Any], bool],
) -> Callable[..., Any]:
    """``override`` for inputs without integer or bool arrays, ``derived`` for the others.

    Array libraries agree on floating inputs but not on integer and bool ones (NumPy's ``sqrt``
    of int8 is float16); arraycore's derived function applies :data:`RULES` to them. ``owns``
    tells the backend's own arrays: anything else (Python scalars, the tracing proxies of
    ``cupy.fuse``) goes to ``override`` as before.
    """

    def _plain(x: Any) -> bool:
        return getattr(x, "dtype", _FLOAT).kind not in "biu" or not owns(x)

    kind = RULES[name.removeprefix("inplace.")].kind
    fn: Callable[..., Any]
    if name.startswith("inplace.") and kind == "unary":

        def fn(x: Any, /, *, out: Any) -> Any:
            return override(x, out=out) if _plain(x) else derived(x, out=out)

    elif name.startswith("inplace."):

        def fn(x1: Any, x2: Any, /, *, out: Any) -> Any:
            if _plain(x1) and _plain(x2):
                return override(x1, x2, out=out)
            return derived(x1, x2, out=out)

    elif kind == "unary":

        def fn(x: Any, /) -> Any:
            return override(x) if _plain(x) else derived(x)

    elif kind == "binary":

        def fn(x1: Any, x2: Any, /) -> Any:
            return override(x1, x2) if _plain(x1) and _plain(x2) else derived(x1, x2)

    elif kind == "where":

        def fn(condition: Any, x1: Any, x2: Any, /) -> Any:
            if _plain(x1) and _plain(x2):
                return override(condition, x1, x2)
            return derived(condition, x1, x2)

    else:

        def fn(*args: Any, **kwargs: Any) -> Any:
            dtype = kwargs.get("dtype")
            if (
                all(_plain(a) for a in args)
                and all(_plain(v) for k, v in kwargs.items() if k != "dtype")
                and (dtype is None or np.dtype(dtype).kind not in "biu")
            ):
                return override(*args, **kwargs)
            return derived(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name.rpartition(".")[2]
    fn.__doc__ = derived.__doc__
    return fn
