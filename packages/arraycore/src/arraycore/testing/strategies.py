"""Hypothesis strategies of the conformance kit, shipped for backend authors' own tests too.

Shapes are small (up to :data:`MAX_DIMS` axes of at most :data:`MAX_SIDE`), with size-1 axes
and, now and then, a zero-size axis. Values are drawn on the host as NumPy arrays in a *domain*
that keeps the operation under test well defined and free of overflow (see :data:`DOMAINS`);
:func:`on_device` then puts them on the backend under test either contiguous or as a strided,
reversed or transposed view made on the device, so that the backend's own views are exercised.

>>> from hypothesis import given
>>> from arraycore.testing import strategies as acst
>>> @given(data=acst.st.data())
... def test_negative(xp, data):  # doctest: +SKIP
...     dtype = data.draw(acst.dtypes(xp, "numeric"))
...     host = data.draw(acst.arrays(dtype, acst.shapes()))
...     x = acst.on_device(xp, host, data.draw(acst.layouts()))
...     assert_close(xp.negative(x), numpy.negative(host))
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "DOMAINS",
    "KIT_DTYPES",
    "LAYOUTS",
    "MAX_DIMS",
    "MAX_SIDE",
    "arrays",
    "axes",
    "broadcastable_shapes",
    "device_dtypes",
    "dtypes",
    "elements",
    "layouts",
    "on_device",
    "scalars",
    "shapes",
    "st",
    "supported_dtypes",
]

MAX_DIMS = 4
"""Most axes a generated shape has."""
MAX_SIDE = 4
"""Largest size of one axis of a generated shape."""

KIT_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
)
"""The dtypes the kit draws by default (``float16`` only where a test asks for it)."""

LAYOUTS: tuple[str, ...] = ("contiguous", "strided", "reversed", "transposed")
"""How :func:`on_device` lays an array out on the device."""

# Largest magnitude of "small" integers per dtype: products of two of them fit the dtype.
_INT_BOUND = {"int8": 11, "int16": 100, "int32": 1000, "int64": 1000, "uint8": 15, "uint16": 200,
              "uint32": 1000, "uint64": 1000}  # fmt: skip

DOMAINS: dict[str, str] = {
    "any": "floats in [-10, 10]; integers whose pairwise products fit the dtype",
    "positive": "floats in [1/64, 10] (log, sqrt, division); integers in [1, bound]",
    "nonnegative": "floats in [0, 10]; integers in [0, bound]",
    "nonzero": "floats with 1/8 <= |x| <= 10; non-zero integers (divisors)",
    "log1p": "floats in [-7/8, 10]",
    "unit": "floats in [-1, 1]",
    "open_unit": "floats in [-63/64, 63/64] (atanh)",
    "acosh": "floats in [1, 10]",
    "shift": "shift counts: integers in [0, 3]",
    "halves": "multiples of 1/2 in [-8, 8] (rounding ties)",
    "base": "bases of pow: floats in [1/8, 4]; integers in [0, 3] (signed: [-3, 3])",
    "exponent": "exponents of pow: floats in [-3, 3]; integers in [0, 4]",
    "bool": "True and False (any dtype: 0 and 1)",
}
"""The value domains :func:`elements` knows, with what each draws."""


# -- dtypes ---------------------------------------------------------------------------------------
def device_dtypes(xp: Any) -> dict[str, np.dtype]:
    """Every dtype the device of ``xp`` has: the standard's (``dtypes()``) and ``float16``."""
    info = xp.__array_namespace_info__()
    return {**info.dtypes(), **info.dtypes(kind="float16")}


def supported_dtypes(
    xp: Any, kind: Any = None, *, names: tuple[str, ...] = KIT_DTYPES
) -> list[np.dtype]:
    """The dtypes among ``names`` that the device of ``xp`` supports, optionally of ``kind``.

    ``kind`` is one of the standard's kind names (``"bool"``, ``"integral"``,
    ``"real floating"``, ``"numeric"``, ...) or a tuple of them.
    """
    info = xp.__array_namespace_info__()
    available = dict(info.dtypes(kind=kind))
    if "float16" in names and kind in (None, "real floating", "numeric"):
        available.update(info.dtypes(kind="float16"))  # listed only when asked for by name
    return [np.dtype(n) for n in names if n in available]


def dtypes(xp: Any, kind: Any = None, *, names: tuple[str, ...] = KIT_DTYPES) -> Any:
    """A strategy drawing from :func:`supported_dtypes` (float64 only where the device has it)."""
    found = supported_dtypes(xp, kind, names=names)
    if not found:
        raise ValueError(f"backend {xp.name!r} supports none of {names} of kind {kind!r}")
    return st.sampled_from(found)


# -- shapes ---------------------------------------------------------------------------------------
@st.composite
def shapes(
    draw: st.DrawFn,
    *,
    min_dims: int = 0,
    max_dims: int = MAX_DIMS,
    min_side: int = 1,
    max_side: int = MAX_SIDE,
    allow_empty: bool = True,
) -> tuple[int, ...]:
    """A small shape; about one in eight (when ``allow_empty``) has one zero-size axis."""
    ndim = draw(st.integers(min_dims, max_dims))
    shape = [draw(st.integers(min_side, max_side)) for _ in range(ndim)]
    if allow_empty and ndim and draw(st.integers(0, 7)) == 0:
        shape[draw(st.integers(0, ndim - 1))] = 0
    return tuple(shape)


@st.composite
def broadcastable_shapes(
    draw: st.DrawFn,
    num_shapes: int = 2,
    *,
    min_dims: int = 0,
    max_dims: int = MAX_DIMS,
    allow_empty: bool = True,
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """``(input_shapes, result_shape)``: shapes that broadcast together, and the result.

    Each input keeps a trailing part of the result's axes (it may have fewer dimensions) and
    has size 1 on some of them.
    """
    result = draw(shapes(min_dims=min_dims, max_dims=max_dims, allow_empty=allow_empty))
    inputs = []
    for _ in range(num_shapes):
        ndim = draw(st.integers(0, len(result))) if draw(st.booleans()) else len(result)
        tail = result[len(result) - ndim :]
        inputs.append(tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in tail))
    # The result is what the inputs broadcast to (a dropped axis may have been the only one).
    return tuple(inputs), tuple(np.broadcast_shapes(*inputs))


@st.composite
def axes(
    draw: st.DrawFn, ndim: int, *, allow_none: bool = True, allow_tuple: bool = True
) -> int | tuple[int, ...] | None:
    """An ``axis`` argument for an array of ``ndim`` axes: None, an int or a tuple of ints.

    Ints are negative about half the time; tuples are unique, in any order, possibly empty.
    """
    choices = ["none"] if allow_none else []
    if ndim:
        choices.append("int")
    if allow_tuple:
        choices.append("tuple")
    choice = draw(st.sampled_from(choices)) if choices else "none"
    if choice == "none":
        return None

    def signed(a: int) -> int:
        return a - ndim if draw(st.booleans()) else a

    if choice == "int":
        return signed(draw(st.integers(0, ndim - 1)))
    picked = draw(st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim))
    return tuple(signed(a) for a in picked) if ndim else ()


# -- values ---------------------------------------------------------------------------------------
def _float_bound(value: float, dtype: np.dtype, *, up: bool) -> float:
    """``value`` rounded into ``dtype`` towards the inside of the interval it bounds."""
    rounded = dtype.type(value)
    if up and rounded < value:
        rounded = np.nextafter(rounded, dtype.type(np.inf))
    if not up and rounded > value:
        rounded = np.nextafter(rounded, dtype.type(-np.inf))
    return float(rounded)


def _floats(dtype: np.dtype, low: float, high: float) -> Any:
    width: Literal[16, 32, 64] = 16 if dtype.itemsize == 2 else 32 if dtype.itemsize == 4 else 64
    return st.floats(
        _float_bound(low, dtype, up=True),
        _float_bound(high, dtype, up=False),
        width=width,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=False,
    )


def elements(dtype: Any, domain: str = "any") -> Any:
    """A strategy for one element of ``dtype`` in ``domain`` (a key of :data:`DOMAINS`)."""
    dt = np.dtype(dtype)
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known: {', '.join(DOMAINS)}")
    if dt.kind == "b":
        return st.booleans()
    if dt.kind == "f":
        if domain == "bool":
            return st.sampled_from([0.0, 1.0])
        if domain == "nonzero":
            magnitude = _floats(dt, 0.125, 10.0)
            return st.tuples(magnitude, st.booleans()).map(lambda t: -t[0] if t[1] else t[0])
        if domain == "halves":
            return st.integers(-16, 16).map(lambda k: k / 2)
        low, high = {
            "any": (-10.0, 10.0),
            "positive": (1 / 64, 10.0),
            "nonnegative": (0.0, 10.0),
            "log1p": (-0.875, 10.0),
            "unit": (-1.0, 1.0),
            "open_unit": (-63 / 64, 63 / 64),
            "acosh": (1.0, 10.0),
            "shift": (0.0, 3.0),
            "base": (0.125, 4.0),
            "exponent": (-3.0, 3.0),
        }[domain]
        return _floats(dt, low, high)
    bound = _INT_BOUND[dt.name]
    signed = dt.kind == "i"
    low = -bound if signed else 0
    if domain == "bool":
        return st.integers(0, 1)
    if domain == "acosh":
        return st.integers(1, bound)
    if domain in ("positive", "nonnegative"):
        return st.integers(1 if domain == "positive" else 0, bound)
    if domain == "nonzero":
        return st.integers(low, bound).filter(lambda v: v != 0)
    if domain == "base":
        return st.integers(-3 if signed else 0, 3)
    if domain == "exponent":
        return st.integers(0, 4)
    if domain == "shift":
        return st.integers(0, 3)
    if domain in ("log1p", "unit", "open_unit", "halves"):
        return st.integers(-1 if signed else 0, 1)
    return st.integers(low, bound)


def arrays(dtype: Any, shape: Any, domain: str = "any") -> Any:
    """A strategy for host ``numpy.ndarray`` of ``dtype`` and ``shape`` (a shape or a strategy)."""
    dt = np.dtype(dtype)
    return hnp.arrays(dt, shape, elements=elements(dt, domain))


def scalars(dtype: Any, domain: str = "any") -> Any:
    """A Python scalar (bool, int or float) that may be combined with an array of ``dtype``.

    The Array API standard allows a Python ``bool`` with any dtype, an ``int`` with integer and
    floating dtypes, and a ``float`` with floating dtypes only.
    """
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        return elements(dt, domain).map(int)
    return elements(dt, domain).map(float)


def layouts(*, contiguous_only: bool = False) -> Any:
    """A strategy for a layout name of :data:`LAYOUTS` (for :func:`on_device`)."""
    return st.just("contiguous") if contiguous_only else st.sampled_from(LAYOUTS)


# -- device placement --------------------------------------------------------------------------------
def _gap_value(dtype: np.dtype) -> Any:
    """What fills the elements a strided view skips: a value that shows if a backend reads them."""
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def on_device(xp: Any, host: np.ndarray, layout: str = "contiguous") -> Any:
    """``host`` as an array of the backend of ``xp``, laid out as ``layout`` says.

    - ``"contiguous"``: ``xp.asarray(host)``.
    - ``"strided"``: every second element of a bigger device array (``big[1::2, 1::2, ...]``).
    - ``"reversed"``: the same with negative steps (``big[-2::-2, ...]``).
    - ``"transposed"``: a strided view whose axes are then reversed with ``xp.permute_dims``.

    The skipped elements of the bigger array hold NaN (floats) or the dtype's maximum, so a
    backend that reads past a view's strides gives visibly wrong results. 0-d arrays are always
    contiguous.
    """
    host = np.asarray(host)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if layout == "contiguous" or host.ndim == 0:
        return xp.asarray(host)
    perm = tuple(reversed(range(host.ndim)))
    target = host.transpose(perm) if layout == "transposed" else host
    big = np.full(tuple(2 * s + 1 for s in target.shape), _gap_value(host.dtype), host.dtype)
    if layout == "reversed":
        key = tuple(slice(2 * s - 1, 0, -2) if s else slice(1, 1) for s in target.shape)
    else:
        key = tuple(slice(1, 2 * s, 2) if s else slice(1, 1) for s in target.shape)
    big[key] = target
    view = xp.asarray(big)[key]
    if layout == "transposed":
        view = xp.permute_dims(view, perm)
    assert tuple(view.shape) == host.shape, (view.shape, host.shape)
    assert math.prod(view.shape) == host.size
    return view
