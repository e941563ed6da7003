"""The op table: every element-wise function of arraycore, declared once.

Each :class:`Elementwise` entry says everything arraycore and its backends need to know about one
function, and everything else is derived from it:

- the namespace function (``xp.atan2``) and the module-level dispatcher (``arraycore.atan2``),
  with the standard's signature ``(x, /)`` or ``(x1, x2, /)`` and the entry's docstring;
- ``xp.inplace.<name>`` (the ``out=`` form) and the array operators (``x ^ y``);
- the dtype rule (:data:`arraycore._dtype_rules.RULES`, ``docs/dtypes.md``): which dtypes it
  accepts and which dtype it returns;
- the backend protocol: a *primitive* entry is one a backend's ``unary``/``binary`` computes
  (:data:`arraycore.backend.UNARY_OPS` and ``BINARY_OPS`` are the primitive names), a *derived*
  one arraycore builds from other primitives;
- the NumPy reference (``numpy``: the NumPy function of the same meaning), which the NumPy
  backend calls, the CUDA backend finds in CuPy under the same name, and the conformance kit
  compares against;
- the kernel expression of generated backends (``kernel``: C, shared by OpenCL C and CUDA C):
  the OpenCL backend compiles one kernel per (entry, dtype) from it;
- the conformance kit's cases (``domain``: which values the kit draws for each operand).

Adding a function is one entry here (and, for a primitive, a kernel expression where a backend
generates its kernels from the table, as OpenCL does). ``docs/optable.md`` walks through one.

Kernel expressions are C expressions of ``x`` (and ``y``) in the compute type (``float`` for
float16), keyed by the dtype class of the operands: ``"float"``, ``"signed"``, ``"unsigned"``,
``"bool"`` (stored as 0/1 bytes), or ``"int"`` for both integer classes. ``{ct}`` is the compute
type's C name and ``{bits}`` the dtype's width in bits; helper functions the expressions call
(``floordiv_{ct}``, ``logaddexp_{ct}``, ...) are in each generator's prelude.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import _optional

#: What an entry's ``accepts`` may be: the dtypes a function takes (others are a TypeError).
ACCEPTS: dict[str, str] = {
    "all": "every dtype",
    "numeric": "every dtype but bool",
    "integer": "integer dtypes",
    "integer or bool": "integer and bool dtypes",
}


@dataclass(frozen=True)
class Elementwise:
    """One element-wise function of the standard (see the module docstring for each field)."""

    name: str
    arity: int
    accepts: str
    result: str
    doc: str
    numpy: str = ""
    primitive: bool = True
    kernel: Mapping[str, str] = field(default_factory=dict)
    domain: tuple[str, ...] = ("any",)
    operators: tuple[str, ...] = ()
    #: Input dtype kinds (``"b"``, ``"iu"``) for which the function is the identity (a copy).
    identity_kinds: str = ""
    #: For derived entries: ``fn(xp, *operands)`` on operands already in the compute dtype.
    derive: Callable[..., Any] | None = None
    #: For primitive entries: the backend protocol version that made it a primitive. Those of
    #: protocol 1.0 are required of every backend; a later one is optional (a backend declares
    #: it in ``Backend.optional_primitives``) and has a ``fallback``.
    since: tuple[int, int] = (1, 0)
    #: For optional primitives: ``fn(xp, *operands)`` from the required primitives, what
    #: arraycore computes for a backend that does not implement the primitive
    #: (:mod:`arraycore._optional`).
    fallback: Callable[..., Any] | None = None

    @property
    def reference(self) -> str:
        """The NumPy function this entry means (its name, in ``numpy``)."""
        return self.numpy or self.name


def _u(name: str, accepts: str, result: str, doc: str, **kw: Any) -> Elementwise:
    return Elementwise(name, 1, accepts, result, doc, **kw)


def _b(name: str, accepts: str, result: str, doc: str, **kw: Any) -> Elementwise:
    if "domain" not in kw:
        kw["domain"] = ("any", "any")
    return Elementwise(name, 2, accepts, result, doc, **kw)


def _float(expr: str) -> dict[str, str]:
    return {"float": expr}


# -- derived entries: compositions of primitives on operands in the compute dtype -----------------
def _copy(xp: Any, x: Any) -> Any:
    return xp._backend.astype(x, x.dtype)


def _zeros(xp: Any, x: Any) -> Any:
    return xp._backend.full(tuple(x.shape), 0, x.dtype)


def _square(xp: Any, x: Any) -> Any:
    return xp._backend.binary("multiply", x, x)


def _reciprocal(xp: Any, x: Any) -> Any:
    return xp._backend.binary("divide", xp._backend.full((), 1, x.dtype), x)


def _isfinite(xp: Any, x: Any) -> Any:
    bk = xp._backend
    if x.dtype.kind != "f":
        return bk.full(tuple(x.shape), True, xp.bool)
    bad = bk.binary("logical_or", bk.unary("isnan", x), bk.unary("isinf", x))
    return bk.unary("logical_not", bad)


def _signbit(xp: Any, x: Any) -> Any:
    bk = xp._backend
    if x.dtype.kind == "b":
        return bk.full(tuple(x.shape), False, xp.bool)
    if x.dtype.kind != "f":
        return bk.binary("less", x, bk.full((), 0, x.dtype))
    one = xp._primitive("copysign", bk.full((), 1, x.dtype), x)
    return bk.binary("less", one, bk.full((), 0, x.dtype))


def _logical_xor(xp: Any, x1: Any, x2: Any) -> Any:
    return xp._backend.binary("not_equal", x1, x2)


def _non_bool(xp: Any, x: Any) -> Any:
    """isnan/isinf of integers and bools: all False without a kernel."""
    return xp._backend.full(tuple(x.shape), False, xp.bool)


# -- kernel expressions shared by several entries -------------------------------------------------
_SIGN_FLOAT = "isnan(x) ? x : (x > ({ct})0 ? ({ct})1 : (x < ({ct})0 ? ({ct})-1 : ({ct})0))"
_MAX_FLOAT = "(x > y || isnan(x)) ? x : y"
_MIN_FLOAT = "(x < y || isnan(x)) ? x : y"
_LEFT_SHIFT = "(y < 0 || y >= {bits}) ? ({ct})0 : ({ct})(x << y)"
_RIGHT_SHIFT = {
    "signed": "(y < 0 || y >= {bits}) ? (x < 0 ? ({ct})-1 : ({ct})0) : ({ct})(x >> y)",
    "unsigned": "(y >= {bits}) ? ({ct})0 : ({ct})(x >> y)",
}

#: Every element-wise function, in the order of the standard's list.
ELEMENTWISE: tuple[Elementwise, ...] = (
    _u("abs", "all", "same", "Element-wise absolute value.", identity_kinds="b",
       kernel={"float": "fabs(x)", "signed": "x < 0 ? -x : x", "unsigned": "x"},
       operators=("__abs__",)),
    _u("acos", "all", "float", "Element-wise inverse cosine, in radians.", numpy="arccos",
       kernel=_float("acos(x)"), domain=("unit",)),
    _u("acosh", "all", "float", "Element-wise inverse hyperbolic cosine.", numpy="arccosh",
       kernel=_float("acosh(x)"), domain=("acosh",)),
    _b("add", "all", "same", "Element-wise ``x1 + x2``.",
       kernel={"float": "x + y", "int": "x + y", "bool": "x | y"},
       operators=("__add__", "__radd__", "__iadd__")),
    _u("asin", "all", "float", "Element-wise inverse sine, in radians.", numpy="arcsin",
       kernel=_float("asin(x)"), domain=("unit",)),
    _u("asinh", "all", "float", "Element-wise inverse hyperbolic sine.", numpy="arcsinh",
       kernel=_float("asinh(x)")),
    _u("atan", "all", "float", "Element-wise inverse tangent, in radians.", numpy="arctan",
       kernel=_float("atan(x)")),
    _b("atan2", "all", "float",
       "Element-wise angle of the point ``(x2, x1)``, in radians, with the quadrant's sign.",
       numpy="arctan2", kernel=_float("atan2(x, y)")),
    _u("atanh", "all", "float", "Element-wise inverse hyperbolic tangent.", numpy="arctanh",
       kernel=_float("atanh(x)"), domain=("open_unit",)),
    _b("bitwise_and", "integer or bool", "same", "Element-wise bitwise (for bool: logical) and.",
       kernel={"int": "x & y", "bool": "x & y"}, operators=("__and__", "__rand__", "__iand__")),
    _b("bitwise_left_shift", "integer", "same",
       "Element-wise ``x1 << x2`` (shifts past the width give 0).", numpy="left_shift",
       kernel={"int": _LEFT_SHIFT}, domain=("any", "shift"),
       operators=("__lshift__", "__rlshift__", "__ilshift__")),
    _u("bitwise_invert", "integer or bool", "same",
       "Element-wise bitwise inversion (for bool: logical not).", numpy="invert",
       kernel={"int": "~x", "bool": "x == 0"}, operators=("__invert__",)),
    _b("bitwise_or", "integer or bool", "same", "Element-wise bitwise (for bool: logical) or.",
       kernel={"int": "x | y", "bool": "x | y"}, operators=("__or__", "__ror__", "__ior__")),
    _b("bitwise_right_shift", "integer", "same",
       "Element-wise arithmetic ``x1 >> x2`` (shifts past the width give 0, or -1 for "
       "negative signed values).", numpy="right_shift",
       kernel=_RIGHT_SHIFT, domain=("any", "shift"),
       operators=("__rshift__", "__rrshift__", "__irshift__")),
    _b("bitwise_xor", "integer or bool", "same",
       "Element-wise bitwise (for bool: logical) exclusive or.",
       kernel={"int": "x ^ y", "bool": "x ^ y"}, operators=("__xor__", "__rxor__", "__ixor__")),
    _u("ceil", "all", "same", "Element-wise ceiling (integers unchanged).", identity_kinds="biu",
       kernel=_float("ceil(x)")),
    _u("conj", "all", "same", "Complex conjugate: a copy for real input (no complex dtypes yet).",
       primitive=False, derive=_copy),
    _b("copysign", "all", "float", "Element-wise ``|x1|`` with the sign bit of ``x2``.",
       kernel=_float("copysign(x, y)")),
    _u("cos", "all", "float", "Element-wise cosine.", kernel=_float("cos(x)")),
    _u("cosh", "all", "float", "Element-wise hyperbolic cosine.", kernel=_float("cosh(x)")),
    _b("divide", "all", "float", "Element-wise true division (integers give the default float).",
       kernel=_float("x / y"), domain=("any", "nonzero"),
       operators=("__truediv__", "__rtruediv__", "__itruediv__")),
    _b("equal", "all", "bool", "Element-wise ``x1 == x2``.",
       kernel={"float": "x == y", "int": "x == y", "bool": "x == y"}, operators=("__eq__",)),
    _u("exp", "all", "float", "Element-wise exponential.", kernel=_float("exp(x)")),
    _u("expm1", "all", "float", "Element-wise ``exp(x) - 1``, accurate near zero.",
       kernel=_float("expm1(x)")),
    _u("floor", "all", "same", "Element-wise floor (integers unchanged).", identity_kinds="biu",
       kernel=_float("floor(x)")),
    _b("floor_divide", "numeric", "same", "Element-wise ``x1 // x2`` (integers by 0 give 0).",
       kernel={"float": "floordiv_{ct}(x, y)", "int": "ifloordiv_{ct}(x, y)"},
       domain=("any", "nonzero"), operators=("__floordiv__", "__rfloordiv__", "__ifloordiv__")),
    _b("greater", "all", "bool", "Element-wise ``x1 > x2``.",
       kernel={"float": "x > y", "int": "x > y", "bool": "x > y"}, operators=("__gt__",)),
    _b("greater_equal", "all", "bool", "Element-wise ``x1 >= x2``.",
       kernel={"float": "x >= y", "int": "x >= y", "bool": "x >= y"}, operators=("__ge__",)),
    _b("hypot", "all", "float", "Element-wise ``sqrt(x1**2 + x2**2)``.", kernel=_float("hypot(x, y)")),
    _u("imag", "all", "same", "Imaginary part: zeros for real input (no complex dtypes yet).",
       primitive=False, derive=_zeros),
    _u("isfinite", "all", "bool", "Element-wise test for finite values.", primitive=False,
       derive=_isfinite),
    _u("isinf", "all", "bool", "Element-wise test for positive or negative infinity.",
       kernel=_float("isinf(x)")),
    _u("isnan", "all", "bool", "Element-wise test for NaN.", kernel=_float("isnan(x)")),
    _b("less", "all", "bool", "Element-wise ``x1 < x2``.",
       kernel={"float": "x < y", "int": "x < y", "bool": "x < y"}, operators=("__lt__",)),
    _b("less_equal", "all", "bool", "Element-wise ``x1 <= x2``.",
       kernel={"float": "x <= y", "int": "x <= y", "bool": "x <= y"}, operators=("__le__",)),
    _u("log", "all", "float", "Element-wise natural logarithm.", kernel=_float("log(x)"),
       domain=("positive",)),
    _u("log1p", "all", "float", "Element-wise ``log(1 + x)``, accurate near zero.",
       kernel=_float("log1p(x)"), domain=("log1p",)),
    _u("log2", "all", "float", "Element-wise base-2 logarithm.", kernel=_float("log2(x)"),
       domain=("positive",)),
    _u("log10", "all", "float", "Element-wise base-10 logarithm.", kernel=_float("log10(x)"),
       domain=("positive",)),
    _b("logaddexp", "all", "float", "Element-wise ``log(exp(x1) + exp(x2))`` without overflow.",
       kernel=_float("logaddexp_{ct}(x, y)")),
    _b("logical_and", "all", "bool", "Element-wise logical and (inputs taken as bool).",
       kernel={"bool": "(x != 0) && (y != 0)"}, domain=("bool", "bool")),
    _u("logical_not", "all", "bool", "Element-wise logical not (input taken as bool).",
       kernel={"bool": "x == 0"}, domain=("bool",)),
    _b("logical_or", "all", "bool", "Element-wise logical or (inputs taken as bool).",
       kernel={"bool": "(x != 0) || (y != 0)"}, domain=("bool", "bool")),
    _b("logical_xor", "all", "bool", "Element-wise logical exclusive or (inputs taken as bool).",
       primitive=False, derive=_logical_xor, domain=("bool", "bool")),
    _b("maximum", "all", "same", "Element-wise maximum (NaN propagates).",
       kernel={"float": _MAX_FLOAT, "int": "x > y ? x : y", "bool": "x | y"}),
    _b("minimum", "all", "same", "Element-wise minimum (NaN propagates).",
       kernel={"float": _MIN_FLOAT, "int": "x < y ? x : y", "bool": "x & y"}),
    _b("multiply", "all", "same", "Element-wise ``x1 * x2``.",
       kernel={"float": "x * y", "int": "x * y", "bool": "x & y"},
       operators=("__mul__", "__rmul__", "__imul__")),
    _u("negative", "numeric", "same", "Element-wise ``-x``.",
       kernel={"float": "-x", "int": "-x"}, operators=("__neg__",)),
    _b("nextafter", "all", "float", "Element-wise next representable value after ``x1`` "
       "towards ``x2``.", kernel=_float("nextafter(x, y)")),
    _b("not_equal", "all", "bool", "Element-wise ``x1 != x2``.",
       kernel={"float": "x != y", "int": "x != y", "bool": "x != y"}, operators=("__ne__",)),
    _u("positive", "numeric", "same", "Element-wise ``+x`` (a copy).", primitive=False,
       derive=_copy, operators=("__pos__",)),
    _b("pow", "numeric", "same", "Element-wise ``x1 ** x2``.", numpy="power",
       kernel={"float": "pow(x, y)", "int": "ipow_{ct}(x, y)"}, domain=("base", "exponent"),
       operators=("__pow__", "__rpow__", "__ipow__")),
    _u("real", "all", "same", "Real part: a copy for real input (no complex dtypes yet).",
       primitive=False, derive=_copy),
    _u("reciprocal", "all", "float", "Element-wise ``1 / x``.", primitive=False,
       derive=_reciprocal, domain=("nonzero",)),
    _b("remainder", "numeric", "same", "Element-wise ``x1 % x2``, with the sign of ``x2``.",
       kernel={"float": "pymod_{ct}(x, y)", "int": "imod_{ct}(x, y)"},
       domain=("any", "nonzero"), operators=("__mod__", "__rmod__", "__imod__")),
    _u("round", "all", "same", "Element-wise rounding to the nearest integer, halves to even.",
       identity_kinds="biu", kernel=_float("rint(x)")),
    _u("sign", "numeric", "same", "Element-wise sign: -1, 0 or 1 (NaN stays NaN).",
       kernel={"float": _SIGN_FLOAT, "signed": "x > 0 ? 1 : (x < 0 ? -1 : 0)",
               "unsigned": "x > 0 ? 1 : 0"}),
    _u("signbit", "all", "bool", "Element-wise test of the sign bit (true for -0.0).",
       primitive=False, derive=_signbit),
    _u("sin", "all", "float", "Element-wise sine.", kernel=_float("sin(x)")),
    _u("sinh", "all", "float", "Element-wise hyperbolic sine.", kernel=_float("sinh(x)")),
    _u("square", "all", "same", "Element-wise ``x * x``.", primitive=False, derive=_square),
    _u("sqrt", "all", "float", "Element-wise square root.", kernel=_float("sqrt(x)"),
       domain=("nonnegative",)),
    _b("subtract", "numeric", "same", "Element-wise ``x1 - x2``.",
       kernel={"float": "x - y", "int": "x - y"},
       operators=("__sub__", "__rsub__", "__isub__")),
    _u("tan", "all", "float", "Element-wise tangent.", kernel=_float("tan(x)")),
    _u("tanh", "all", "float", "Element-wise hyperbolic tangent.", kernel=_float("tanh(x)")),
    _u("trunc", "all", "same", "Element-wise rounding towards zero (integers unchanged).",
       identity_kinds="biu", kernel=_float("trunc(x)")),
)  # fmt: skip

# The primitives added after protocol 1.0: optional, with their version and their default.
ELEMENTWISE = tuple(
    replace(op, since=_optional.OPTIONAL[op.name][0], fallback=_optional.OPTIONAL[op.name][1])
    if op.name in _optional.OPTIONAL
    else op
    for op in ELEMENTWISE
)

#: The entries by name.
BY_NAME: dict[str, Elementwise] = {op.name: op for op in ELEMENTWISE}

#: Names of the primitive unary and binary entries: what a backend's ``unary``/``binary`` take.
UNARY_PRIMITIVES: frozenset[str] = frozenset(
    op.name for op in ELEMENTWISE if op.primitive and op.arity == 1
)
BINARY_PRIMITIVES: frozenset[str] = frozenset(
    op.name for op in ELEMENTWISE if op.primitive and op.arity == 2
)
#: The element-wise primitives of protocol 1.0, frozen: every backend implements these.
REQUIRED_UNARY: frozenset[str] = frozenset(
    {"abs", "ceil", "cos", "exp", "expm1", "floor", "isinf", "isnan", "log", "log1p",
     "logical_not", "negative", "round", "sign", "sin", "sqrt", "tanh"}
)  # fmt: skip
REQUIRED_BINARY: frozenset[str] = frozenset(
    {"add", "divide", "equal", "floor_divide", "greater", "greater_equal", "less", "less_equal",
     "logical_and", "logical_or", "maximum", "minimum", "multiply", "not_equal", "pow",
     "remainder", "subtract"}
)  # fmt: skip
#: The element-wise primitives added since: a backend declares those it implements.
OPTIONAL_PRIMITIVES: dict[str, tuple[int, int]] = {
    op.name: op.since for op in ELEMENTWISE if op.primitive and op.fallback is not None
}
#: isnan and isinf of integers and bools need no kernel.
NON_FLOAT_CONSTANT: dict[str, Callable[..., Any]] = {"isnan": _non_bool, "isinf": _non_bool}


def kernel_expression(op: Elementwise, dtype_class: str) -> str | None:
    """The kernel expression of ``op`` for operands of a dtype class, or None where the entry
    has none (the dtype is not accepted, or arraycore never asks the backend for it)."""
    table = op.kernel
    if dtype_class in table:
        return table[dtype_class]
    if dtype_class in ("signed", "unsigned"):
        return table.get("int")
    return None
