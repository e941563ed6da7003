"""Derived defaults of the optional primitives: what arraycore computes when a backend does not
declare that its ``unary``/``binary`` implement an element-wise primitive added to the protocol
after its first version (``docs/backends.md``, "Protocol versions").

Each default is a function ``fn(xp, *operands)`` on operands already checked, promoted and
converted to the dtype the function computes in (``docs/dtypes.md``), built from the required
primitives of protocol 1.0 only (never from another optional primitive through the backend), so
a backend written against protocol 1.0 runs every function of the namespace. They are as
accurate as the conformance kit demands (float64 to a few ulp, well inside rtol 1e-10; float32
inside 2e-5), keep signed zeros, infinities and NaN as NumPy does, and are exact where NumPy's
answer is exact (integer shifts and inversion, ``trunc``, ``log2`` of powers of two). Where the
required primitives cannot give the answer exactly, the default takes the host path
(``docs/host-path.md``): ``nextafter`` and the bitwise and/or/xor of integers copy their operands
to the host and back, which :data:`ON_HOST` records for ``arraycore info``.

One thing the primitives of protocol 1.0 cannot see is the sign bit of a NaN: the defaults of
``copysign`` and ``atan2`` read a NaN ``x2`` as positive (and ``signbit``, derived from
``copysign``, as false). Zeros' signs are read by dividing 1 by them (``1 / -0.0 == -inf``).

The derivations evaluate every branch of a ``where`` on every element, so they run under
``numpy.errstate(all="ignore")``: a backend computing on NumPy does not warn about the branches
whose values are not used.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _host

#: The protocol version that added the 23 element-wise primitives below.
V1_1 = (1, 1)


class _Calc:
    """Formulas over one backend's required primitives, with constants of one dtype."""

    __slots__ = ("bk", "dt")

    def __init__(self, xp: Any, x: Any) -> None:
        self.bk = xp._backend
        self.dt = x.dtype

    def c(self, value: float | int | bool, dtype: Any = None) -> Any:
        return self.bk.full((), value, self.dt if dtype is None else dtype)

    def u(self, op: str, x: Any) -> Any:
        return self.bk.unary(op, x)

    def b(self, op: str, x: Any, y: Any) -> Any:
        return self.bk.binary(op, x, y)

    def where(self, cond: Any, x: Any, y: Any) -> Any:
        return self.bk.where(cond, x, y)

    def add(self, x: Any, y: Any) -> Any:
        return self.bk.binary("add", x, y)

    def sub(self, x: Any, y: Any) -> Any:
        return self.bk.binary("subtract", x, y)

    def mul(self, x: Any, y: Any) -> Any:
        return self.bk.binary("multiply", x, y)

    def div(self, x: Any, y: Any) -> Any:
        return self.bk.binary("divide", x, y)

    def neg(self, x: Any) -> Any:
        return self.bk.unary("negative", x)

    def abs(self, x: Any) -> Any:
        return self.bk.unary("abs", x)

    def signbit(self, x: Any) -> Any:
        """The sign bit of floating ``x`` (read as false for NaN)."""
        zero = self.c(0)
        negative_zero = self.b(
            "logical_and", self.b("equal", x, zero), self.b("less", self.div(self.c(1), x), zero)
        )
        return self.b("logical_or", self.b("less", x, zero), negative_zero)

    def odd(self, x: Any, magnitude: Any) -> Any:
        """An odd function's value from its value at ``|x|``: the sign of ``x``, zeros kept."""
        zero = self.c(0)
        signed = self.where(self.b("less", x, zero), self.neg(magnitude), magnitude)
        return self.where(self.b("equal", x, zero), x, signed)


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def quiet(xp: Any, *operands: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(xp, *operands)

    return quiet


def _eps(dt: Any) -> float:
    return float(np.finfo(dt).eps)


# -- rounding and logarithms ----------------------------------------------------------------------
@_quiet
def trunc(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    if x.dtype.kind != "f":
        return k.bk.astype(x, x.dtype)
    return k.where(k.b("less", x, k.c(0)), k.u("ceil", x), k.u("floor", x))


def _log_base(base: int) -> Callable[..., Any]:
    @_quiet
    def log_base(xp: Any, x: Any) -> Any:
        k = _Calc(xp, x)
        r = k.mul(k.u("log", x), k.c(1 / math.log(base)))
        n = k.u("round", r)  # exact powers of the base give exact integers, as in NumPy
        exact = k.b("equal", k.b("pow", k.c(base), n), x)  # (subnormal powers round coarsely)
        exact = k.b(
            "logical_and", exact, k.b("greater_equal", x, k.c(float(np.finfo(x.dtype).tiny)))
        )
        return k.where(exact, n, r)

    log_base.__name__ = log_base.__qualname__ = f"log{base}"
    return log_base


log2 = _log_base(2)
log10 = _log_base(10)


# -- trigonometric and hyperbolic functions ------------------------------------------------------
@_quiet
def tan(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    return k.div(k.u("sin", x), k.u("cos", x))


def _half_exp(k: _Calc, a: Any) -> Any:
    """``exp(a) / 2`` without overflowing where ``exp(a)`` alone would (``a`` up to 2 log(max))."""
    h = k.u("exp", k.mul(a, k.c(0.5)))
    return k.mul(k.mul(h, k.c(0.5)), h)


def _large(dt: Any) -> float:
    """Beyond this ``|x|``, ``exp(-|x|)`` is below half an ulp of ``exp(|x|)``."""
    return 1.0 - math.log(_eps(dt)) / 2


@_quiet
def sinh(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a = k.abs(x)
    t = k.u("expm1", a)
    near = k.mul(k.add(t, k.div(t, k.add(t, k.c(1)))), k.c(0.5))  # no cancellation near 0
    near = k.where(k.u("isinf", t), t, near)
    far = _half_exp(k, a)
    return k.odd(x, k.where(k.b("less", a, k.c(_large(x.dtype))), near, far))


@_quiet
def cosh(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a = k.abs(x)
    e = k.u("exp", a)
    near = k.mul(k.add(e, k.div(k.c(1), e)), k.c(0.5))
    return k.where(k.b("less", a, k.c(_large(x.dtype))), near, _half_exp(k, a))


@_quiet
def asinh(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a = k.abs(x)
    a2 = k.mul(a, a)
    near = k.u("log1p", k.add(a, k.div(a2, k.add(k.c(1), k.u("sqrt", k.add(k.c(1), a2))))))
    far = k.add(k.u("log", a), k.c(math.log(2)))  # 1 / (4 a^2) below half an ulp
    big = k.b("greater_equal", a, k.c(1 / math.sqrt(_eps(x.dtype))))
    return k.odd(x, k.where(big, far, near))


@_quiet
def acosh(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    t = k.sub(x, k.c(1))  # exact near 1
    near = k.u("log1p", k.add(t, k.u("sqrt", k.mul(t, k.add(t, k.c(2))))))
    far = k.add(k.u("log", x), k.c(math.log(2)))
    big = k.b("greater_equal", x, k.c(1 / math.sqrt(_eps(x.dtype))))
    return k.where(k.b("less", x, k.c(1)), k.c(math.nan), k.where(big, far, near))


@_quiet
def atanh(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a = k.abs(x)
    r = k.mul(k.c(0.5), k.u("log1p", k.div(k.add(a, a), k.sub(k.c(1), a))))
    return k.odd(x, r)


# fdlibm's s_atan.c: arctan of the four reduction points (high and low parts) and the
# coefficients of its odd polynomial on [0, 7/16].
_ATAN_HI = (4.63647609000806093515e-01, 7.85398163397448278999e-01,
            9.82793723247329054082e-01, 1.57079632679489655800e00)  # fmt: skip
_ATAN_LO = (2.26987774529616870924e-17, 3.06161699786838301793e-17,
            1.39033110312309984516e-17, 6.12323399573676603587e-17)  # fmt: skip
_ATAN_T = (
    3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01,
    -1.11111104054623557880e-01, 9.09088713343650656196e-02, -7.69187620504482999495e-02,
    6.66107313738753120669e-02, -5.83357013379057348645e-02, 4.97687799461593236017e-02,
    -3.65315727442169155270e-02, 1.62858201153657823623e-02,
)  # fmt: skip


def _atan_abs(k: _Calc, a: Any) -> Any:
    """arctan of ``a >= 0`` (or NaN): fdlibm's reduction to ``[0, 7/16]`` and polynomial."""
    c = k.c
    lt = functools.partial(k.b, "less")
    m = k.b("minimum", a, c(2.4375))
    reduced = k.where(
        lt(a, c(0.4375)),
        a,
        k.where(
            lt(a, c(0.6875)),
            k.div(k.sub(k.add(m, m), c(1)), k.add(c(2), m)),
            k.where(
                lt(a, c(1.1875)),
                k.div(k.sub(m, c(1)), k.add(m, c(1))),
                k.where(
                    lt(a, c(2.4375)),
                    k.div(k.sub(m, c(1.5)), k.add(c(1), k.mul(c(1.5), m))),
                    k.div(c(-1), k.b("maximum", a, c(2.4375))),
                ),
            ),
        ),
    )

    def pick(table: tuple[float, ...]) -> Any:
        return k.where(
            lt(a, c(0.6875)),
            c(table[0]),
            k.where(
                lt(a, c(1.1875)), c(table[1]), k.where(lt(a, c(2.4375)), c(table[2]), c(table[3]))
            ),
        )

    z = k.mul(reduced, reduced)
    w = k.mul(z, z)
    t = _ATAN_T
    s1 = c(t[10])
    for coef in (t[8], t[6], t[4], t[2], t[0]):
        s1 = k.add(c(coef), k.mul(w, s1))
    s1 = k.mul(z, s1)
    s2 = c(t[9])
    for coef in (t[7], t[5], t[3], t[1]):
        s2 = k.add(c(coef), k.mul(w, s2))
    s2 = k.mul(w, s2)
    xs = k.mul(reduced, k.add(s1, s2))
    small = k.sub(reduced, xs)
    reduced_result = k.sub(pick(_ATAN_HI), k.sub(k.sub(xs, pick(_ATAN_LO)), reduced))
    return k.where(lt(a, c(0.4375)), small, reduced_result)


@_quiet
def atan(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    return k.odd(x, _atan_abs(k, k.abs(x)))


def _asin_parts(k: _Calc, x: Any) -> tuple[Any, Any, Any]:
    """``|x|``, whether ``|x| <= 1/2``, and ``t``: ``asin(|x|)`` there, else
    ``asin(sqrt((1 - |x|) / 2))`` (fdlibm's split; both arguments at most 1/2, no cancellation)."""
    a = k.abs(x)
    low = k.b("less_equal", a, k.c(0.5))
    s = k.where(low, a, k.u("sqrt", k.mul(k.sub(k.c(1), a), k.c(0.5))))
    s = k.b("minimum", s, k.c(0.5))
    t = _atan_abs(k, k.div(s, k.u("sqrt", k.sub(k.c(1), k.mul(s, s)))))
    return a, low, t


@_quiet
def asin(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a, low, t = _asin_parts(k, x)
    high = k.sub(k.c(math.pi / 2), k.add(t, t))
    r = k.where(low, t, high)
    r = k.where(k.b("greater", a, k.c(1)), k.c(math.nan), r)  # outside [-1, 1]
    return k.odd(x, r)


@_quiet
def acos(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    a, low, t = _asin_parts(k, x)
    negative = k.b("less", x, k.c(0))
    middle = k.sub(k.c(math.pi / 2), k.where(negative, k.neg(t), t))
    twice = k.add(t, t)
    outer = k.where(negative, k.sub(k.c(math.pi), twice), twice)
    r = k.where(low, middle, outer)
    return k.where(k.b("greater", a, k.c(1)), k.c(math.nan), r)


@_quiet
def atan2(xp: Any, y: Any, x: Any) -> Any:
    k = _Calc(xp, y)
    ay, ax = k.abs(y), k.abs(x)
    lo, hi = k.b("minimum", ay, ax), k.b("maximum", ay, ax)
    # 0/0 and inf/inf are read as 0/1 and 1/1: atan2(0, 0) = 0, atan2(inf, inf) = pi/4
    both_inf = k.u("isinf", lo)
    num = k.where(both_inf, k.c(1), lo)
    den = k.where(k.b("logical_or", both_inf, k.b("equal", hi, k.c(0))), k.c(1), hi)
    t = _atan_abs(k, k.div(num, den))
    base = k.where(k.b("greater", ay, ax), k.sub(k.c(math.pi / 2), t), t)
    base = k.where(k.signbit(x), k.sub(k.c(math.pi), base), base)
    return k.where(k.signbit(y), k.neg(base), base)


# -- sign, magnitude, sums of exponentials --------------------------------------------------------
@_quiet
def copysign(xp: Any, x1: Any, x2: Any) -> Any:
    k = _Calc(xp, x1)
    magnitude = k.abs(x1)
    return k.where(k.signbit(x2), k.neg(magnitude), magnitude)


@_quiet
def hypot(xp: Any, x1: Any, x2: Any) -> Any:
    k = _Calc(xp, x1)
    a, b = k.abs(x1), k.abs(x2)
    lo, hi = k.b("minimum", a, b), k.b("maximum", a, b)
    r = k.div(lo, k.where(k.b("equal", hi, k.c(0)), k.c(1), hi))  # scaled: no overflow
    h = k.mul(hi, k.u("sqrt", k.add(k.c(1), k.mul(r, r))))
    infinite = k.b("logical_or", k.u("isinf", a), k.u("isinf", b))  # hypot(inf, nan) = inf
    return k.where(infinite, k.c(math.inf), h)


@_quiet
def logaddexp(xp: Any, x1: Any, x2: Any) -> Any:
    k = _Calc(xp, x1)
    top = k.b("maximum", x1, x2)
    r = k.add(top, k.u("log1p", k.u("exp", k.neg(k.abs(k.sub(x1, x2))))))
    # NumPy's npy_logaddexp: equal operands (infinities included) give x + log(2)
    return k.where(k.b("equal", x1, x2), k.add(x1, k.c(math.log(2))), r)


def nextafter(xp: Any, x1: Any, x2: Any) -> Any:
    return _host.run(xp, np.nextafter, x1, x2)


# -- bitwise functions ----------------------------------------------------------------------------
def bitwise_invert(xp: Any, x: Any) -> Any:
    k = _Calc(xp, x)
    if x.dtype.kind == "b":
        return k.u("logical_not", x)
    if x.dtype.kind == "u":
        return k.sub(k.c(int(np.iinfo(x.dtype).max)), x)
    return k.sub(k.neg(x), k.c(1))  # two's complement: ~x == -x - 1


def _bitwise(bool_op: str, host_op: Callable[..., Any]) -> Callable[..., Any]:
    def fn(xp: Any, x1: Any, x2: Any) -> Any:
        if x1.dtype.kind == "b":
            return xp._backend.binary(bool_op, x1, x2)
        return _host.run(xp, host_op, x1, x2)

    return fn


bitwise_and = _bitwise("logical_and", np.bitwise_and)
bitwise_or = _bitwise("logical_or", np.bitwise_or)
bitwise_xor = _bitwise("not_equal", np.bitwise_xor)


def _powers_of_two(k: _Calc, y: Any, inside: Any) -> Any:
    return k.b("pow", k.c(2), k.where(inside, y, k.c(0)))


@_quiet
def bitwise_left_shift(xp: Any, x1: Any, x2: Any) -> Any:
    k = _Calc(xp, x1)
    bits = 8 * x1.dtype.itemsize
    inside = k.b("less", x2, k.c(bits))
    if x1.dtype.kind == "i":
        inside = k.b("logical_and", inside, k.b("greater_equal", x2, k.c(0)))
    product = k.mul(x1, _powers_of_two(k, x2, inside))  # wraps around as the shift does
    return k.where(inside, product, k.c(0))


@_quiet
def bitwise_right_shift(xp: Any, x1: Any, x2: Any) -> Any:
    k = _Calc(xp, x1)
    bits = 8 * x1.dtype.itemsize
    if x1.dtype.kind == "u":
        inside = k.b("less", x2, k.c(bits))
        quotient = k.b("floor_divide", x1, _powers_of_two(k, x2, inside))
        return k.where(inside, quotient, k.c(0))
    # signed: floor division by 2**y is the arithmetic shift; 2**(bits - 1) does not fit, and
    # every shift of bits - 1 or more (or a negative one) leaves the sign: -1 or 0
    inside = k.b("logical_and", k.b("less", x2, k.c(bits - 1)), k.b("greater_equal", x2, k.c(0)))
    quotient = k.b("floor_divide", x1, _powers_of_two(k, x2, inside))
    sign = k.where(k.b("less", x1, k.c(0)), k.c(-1), k.c(0))
    return k.where(inside, quotient, sign)


#: Every optional element-wise primitive: the protocol version that added it, and its default.
OPTIONAL: dict[str, tuple[tuple[int, int], Callable[..., Any]]] = {
    name: (V1_1, globals()[name])
    for name in (
        "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "cosh", "log10",
        "log2", "sinh", "tan", "trunc", "atan2", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_left_shift", "bitwise_right_shift", "copysign", "hypot", "logaddexp",
        "nextafter",
    )
}  # fmt: skip

#: The defaults that copy their operands to the host (for integers, in the bitwise case).
ON_HOST: frozenset[str] = frozenset({"nextafter", "bitwise_and", "bitwise_or", "bitwise_xor"})
