"""Conformance of result dtypes and of the integer edge cases: every function against every dtype.

The expected dtype of every call comes from arraycore's rule table
(:data:`arraycore._dtype_rules.RULES`, ``docs/dtypes.md``), never from calling NumPy: every
function that takes arrays is called with small arrays of every dtype the device has (every
pair of dtypes, and Python ``bool``/``int``/``float`` scalars on either side, for functions of
two arrays), and the result's dtype, or the ``TypeError``, must be the rule's. Integer and bool
inputs of the functions that compute in floating point are also checked for values: they
compute in the dtype of the result (the device's default float), not in a narrower one.
``xp.inplace.<name>`` follows the rule of ``<name>``.

The integer edge cases the standard leaves to the implementation are pinned down as
``docs/dtypes.md`` decides them: ``pow`` of integers with a negative exponent is a
``ValueError``; integer ``floor_divide`` and ``remainder`` by zero give 0; a Python int outside
the range of an integer array's dtype is an ``OverflowError`` in arithmetic (``uint8_array +
300``), compares exactly, is a bool in the logical functions, a float in ``divide`` and no bound
in ``clip``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from arraycore import ArrayBase
from arraycore import _dtype_rules as rules
from arraycore.backend import BINARY_OPS, OPTIONAL_OPS, UNARY_OPS
from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
         "float32", "float64")  # fmt: skip
SCALARS = (True, 2, 1.5)


def _of(kind: str) -> list[str]:
    return [n for n, r in rules.RULES.items() if r.kind == kind]


def _index(xp: Any) -> Any:
    return xp.asarray(np.array([1, 0, 1], dtype=np.int64))


Call = Callable[..., Any]
# name -> (number of data arguments, the call given the namespace and the data arguments)
CALLS: dict[str, tuple[int, Call]] = {
    **{n: (1, lambda xp, x, n=n: getattr(xp, n)(x)) for n in _of("unary")},
    **{n: (2, lambda xp, a, b, n=n: getattr(xp, n)(a, b)) for n in _of("binary")},
    "where": (2, lambda xp, a, b: xp.where(xp.asarray(np.array([True, False])), a, b)),
    "clip": (2, lambda xp, x, lo: xp.clip(x, lo)),
    **{n: (1, lambda xp, x, n=n: getattr(xp, n)(x, axis=0)) for n in _of("reduction")},
    "matmul": (2, lambda xp, a, b: xp.matmul(a, b)),
    "tensordot": (2, lambda xp, a, b: xp.tensordot(a, b, axes=1)),
    "vecdot": (2, lambda xp, a, b: xp.vecdot(a, b)),
    "matrix_transpose": (1, lambda xp, x: xp.matrix_transpose(x)),
    "reshape": (1, lambda xp, x: xp.reshape(x, (4,))),
    "permute_dims": (1, lambda xp, x: xp.permute_dims(x, (1, 0))),
    "moveaxis": (1, lambda xp, x: xp.moveaxis(x, 0, 1)),
    "expand_dims": (1, lambda xp, x: xp.expand_dims(x, axis=0)),
    "squeeze": (1, lambda xp, x: xp.squeeze(x[:1], axis=0)),
    "broadcast_to": (1, lambda xp, x: xp.broadcast_to(x, (3, 2, 2))),
    "broadcast_arrays": (1, lambda xp, x: xp.broadcast_arrays(x)[0]),
    "concat": (2, lambda xp, a, b: xp.concat([a, b])),
    "stack": (2, lambda xp, a, b: xp.stack([a, b])),
    "flip": (1, lambda xp, x: xp.flip(x)),
    "tile": (1, lambda xp, x: xp.tile(x, (2, 1))),
    "getitem": (1, lambda xp, x: xp.getitem(x, (slice(None), 0))),
    "repeat": (1, lambda xp, x: xp.repeat(x, 2, axis=0)),
    "take": (1, lambda xp, x: xp.take(x, xp.asarray(np.array([1, 0])), axis=0)),
    "take_along_axis": (
        1,
        lambda xp, x: xp.take_along_axis(x, xp.asarray(np.array([[1, 0]])), axis=0),
    ),
    **{n: (1, lambda xp, x, n=n: getattr(xp, n)(x)) for n in ("empty_like", "zeros_like")},
    "ones_like": (1, lambda xp, x: xp.ones_like(x)),
    "full_like": (1, lambda xp, x: xp.full_like(x, True)),
    "astype": (2, lambda xp, x, like: xp.astype(x, like.dtype)),
    "diff": (1, lambda xp, x: xp.diff(x, axis=0)),
    "roll": (1, lambda xp, x: xp.roll(x, 1, axis=0)),
    "tril": (1, lambda xp, x: xp.tril(x)),
    "triu": (1, lambda xp, x: xp.triu(x, k=1)),
    "meshgrid": (1, lambda xp, x: xp.meshgrid(x[0], x[1])[0]),
    "unstack": (1, lambda xp, x: xp.unstack(x)[0]),
    "sort": (1, lambda xp, x: xp.sort(x)),
    "argsort": (1, lambda xp, x: xp.argsort(x)),
    "searchsorted": (2, lambda xp, a, v: xp.searchsorted(a[0], v)),
    "nonzero": (1, lambda xp, x: xp.nonzero(x)[0]),
    "unique_values": (1, lambda xp, x: xp.unique_values(x)),
    "unique_counts": (1, lambda xp, x: xp.unique_counts(x).values),
    "unique_inverse": (1, lambda xp, x: xp.unique_inverse(x).values),
    "unique_all": (1, lambda xp, x: xp.unique_all(x).values),
}
#: Functions whose two data arguments may also be Python scalars.
WITH_SCALARS = frozenset(_of("binary")) | {"where"}


def _host(dtype: str) -> np.ndarray:
    """Small values every function is defined for (positive, so no division by zero)."""
    if dtype == "bool":
        return np.array([[True, False], [True, True]])
    return np.array([[1, 2], [3, 1]], dtype=dtype)


def _reference(name: str) -> Any:
    return {"pow": np.power}.get(name) or getattr(np, name)


def _expected(xp: Any, name: str, operands: tuple[Any, ...]) -> Any:
    """The rule's result dtype for these operands, or ``TypeError`` where the rule says so."""
    info = xp.__array_namespace_info__()
    try:
        return rules.result_dtype(
            name,
            *operands,
            default_float=info.default_dtypes()["real floating"],
            dtypes=tuple(acst.device_dtypes(xp)),
        )
    except TypeError:
        return TypeError


def _operand_sets(xp: Any, name: str) -> list[tuple[Any, ...]]:
    names = [d.name for d in acst.supported_dtypes(xp, names=NAMES)]
    if CALLS[name][0] == 1:
        return [(d,) for d in names]
    found: list[tuple[Any, ...]] = [(a, b) for a in names for b in names]
    if name in WITH_SCALARS:
        found += [(d, s) for d in names for s in SCALARS] + [(s, d) for d in names for s in SCALARS]
    return found


def _quietly(fn: Call, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_result_dtype(xp: Any, name: str) -> None:
    """Every dtype (and pair of dtypes, and Python scalar) gives the rule's result dtype."""
    _, call = CALLS[name]
    failures = []
    for operands in _operand_sets(xp, name):
        want = _expected(xp, name, operands)
        hosts = [o if isinstance(o, bool | int | float) else _host(o) for o in operands]
        args = [xp.asarray(h) if isinstance(h, np.ndarray) else h for h in hosts]
        try:
            result = _quietly(call, xp, *args)
        except Exception as exc:
            if want is not TypeError or not isinstance(exc, TypeError):
                failures.append(f"{name}{operands}: {type(exc).__name__}: {exc}; rule: {want}")
            continue
        got = np.dtype(result.dtype)
        if want is TypeError or got != want:
            failures.append(f"{name}{operands}: {got}; rule: {getattr(want, '__name__', want)}")
        elif rules.RULES[name].result == "float" and any(
            getattr(h, "dtype", np.dtype("f8")).kind in "biu" for h in hosts
        ):
            # Integer and bool inputs compute in the result's dtype, not in a narrower one.
            kwargs = {"axis": 0} if rules.RULES[name].kind == "reduction" else {}
            inputs = [h.astype(want) if isinstance(h, np.ndarray) else h for h in hosts]
            expected = np.asarray(_quietly(_reference(name), *inputs, **kwargs))
            assert_close(result, expected.astype(want), err_msg=f"{name}{operands}")
    assert not failures, "\n".join(failures)


def test_every_function_of_the_rule_table_is_called() -> None:
    assert set(CALLS) == set(rules.RULES)


@pytest.mark.parametrize("name", sorted(UNARY_OPS | BINARY_OPS | set(OPTIONAL_OPS)))
def test_inplace_result_dtype(xp: Any, name: str) -> None:
    """``xp.inplace.<name>`` into an ``out`` of the rule's dtype gives ``<name>``'s values; a
    dtype the rule rejects is the same ``TypeError``."""
    arity = CALLS[name][0]
    fn, inplace = getattr(xp, name), getattr(xp.inplace, name)
    for dtype in (d.name for d in acst.supported_dtypes(xp, names=NAMES)):
        want = _expected(xp, name, (dtype,) * arity)
        args = [xp.asarray(_host(dtype)) for _ in range(arity)]
        if want is TypeError:
            with pytest.raises(TypeError):
                inplace(*args, out=xp.asarray(np.zeros((2, 2), dtype)))
            continue
        out = xp.asarray(np.zeros((2, 2), want))
        assert _quietly(inplace, *args, out=out) is out, f"inplace.{name} returned no out"
        assert_close(out, to_host(_quietly(fn, *args)), err_msg=f"inplace.{name}({dtype})")


def test_bool_results_of_rounding_square_and_matmul(xp: Any) -> None:
    """Bool stays bool where the rule says so: rounding and squaring leave it as it is, and
    matmul, tensordot and vecdot of bools are OR of ANDs (as in NumPy)."""
    host = np.array([[True, False], [False, False]])
    x = xp.asarray(host)
    for name in ("round", "floor", "ceil", "square", "abs"):
        assert_close(getattr(xp, name)(x), host, err_msg=name)
    other = np.array([[True, True], [False, True]])
    y = xp.asarray(other)
    want = (host.astype(int) @ other.astype(int)) != 0
    assert_close(xp.matmul(x, y), want)
    assert_close(xp.tensordot(x, y, axes=1), want)
    assert_close(xp.vecdot(x, y), np.array([True, False]))
    long = np.ones(300, dtype=bool)  # 300 products: a count in 8 bits would wrap to 44
    assert_close(xp.vecdot(xp.asarray(long), xp.asarray(long)), np.True_)
    assert_close(xp.sum(xp.asarray(long), dtype=xp.bool), np.True_)


# -- integer edge cases --------------------------------------------------------------------------
def _ints(xp: Any) -> list[np.dtype]:
    return acst.supported_dtypes(xp, "integral")


def test_integer_pow_with_a_negative_exponent_raises(xp: Any) -> None:
    """``x ** -1`` of integers is a ValueError on every backend, as in NumPy (a Python int
    exponent is checked on the host; an array exponent with one reduction on the device)."""
    for dtype in acst.supported_dtypes(xp, "signed integer"):
        x = xp.asarray(np.array([2, 1, -1, 3], dtype))
        negative = xp.asarray(np.array([1, 0, 2, -1], dtype))
        cases: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
            (xp.pow, (x, -1), {}),
            (xp.pow, (x, negative), {}),
            (xp.pow, (2, negative), {}),
            (xp.inplace.pow, (x, negative), {"out": x}),
        ]
        if isinstance(x, ArrayBase | np.ndarray):  # CuPy's ``**`` is CuPy's (no check)
            cases.append((pow, (x, -1), {}))  # x ** -1
        for fn, args, kwargs in cases:
            with pytest.raises(ValueError, match="negative integer powers"):
                fn(*args, **kwargs)
        assert_close(x, np.array([2, 1, -1, 3], dtype), err_msg="a failed inplace.pow wrote")
        assert_close(xp.pow(x, 0), np.ones(4, dtype))
        assert_close(
            xp.pow(x, xp.asarray(np.array([3, 0, 3, 2], dtype))), np.array([8, 1, -1, 9], dtype)
        )
    u = xp.asarray(np.array([2, 3], np.uint8))
    assert_close(xp.pow(u, u), np.array([4, 27], np.uint8))
    floats = acst.supported_dtypes(xp, "real floating")[-1]
    assert_close(
        xp.pow(xp.asarray(np.array([2.0, 4.0], floats)), -1), np.array([0.5, 0.25], floats)
    )


def test_integer_division_and_remainder_by_zero_give_zero(xp: Any) -> None:
    """``x // 0`` and ``x % 0`` of integers are 0, NumPy's values (which it warns about); no
    backend raises or waits for the device to check."""
    for dtype in _ints(xp):
        host = np.array([7, 0, 5, 1], dtype)
        divisor = np.array([0, 0, 2, 0], dtype)
        x, d = xp.asarray(host), xp.asarray(divisor)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_close(xp.floor_divide(x, d), np.array([0, 0, 2, 0], dtype), err_msg=str(dtype))
            assert_close(xp.remainder(x, d), np.array([0, 0, 1, 0], dtype), err_msg=str(dtype))
            assert_close(x // 0, np.zeros(4, dtype), err_msg=str(dtype))
            assert_close(x % 0, np.zeros(4, dtype), err_msg=str(dtype))
            assert_close(xp.floor_divide(3, d), np.array([0, 0, 1, 0], dtype), err_msg=str(dtype))
            out = xp.asarray(np.ones(4, dtype))
            xp.inplace.remainder(x, d, out=out)
            assert_close(out, np.array([0, 0, 1, 0], dtype), err_msg=str(dtype))


ARITHMETIC = (
    "add",
    "subtract",
    "multiply",
    "floor_divide",
    "remainder",
    "pow",
    "maximum",
    "minimum",
)


def test_python_int_out_of_range_is_an_overflow_error(xp: Any) -> None:
    """``uint8_array + 300``: a Python int must fit the integer dtype it meets (NumPy 2)."""
    for dtype in _ints(xp):
        info = np.iinfo(dtype)
        host = np.array([1, 2], dtype)
        x = xp.asarray(host)
        for value in (int(info.max) + 1, int(info.min) - 1):
            for name in ARITHMETIC:
                for args in ((x, value), (value, x)):
                    with pytest.raises(OverflowError):
                        getattr(xp, name)(*args)
            with pytest.raises(OverflowError):
                xp.where(xp.asarray(np.array([True, False])), x, value)
            with pytest.raises(OverflowError):
                xp.inplace.add(x, value, out=x)
            with pytest.raises(OverflowError):
                x + value
        assert_close(x, host, err_msg="a failed inplace.add wrote")
    flags = xp.asarray(np.array([True, False]))
    with pytest.raises(OverflowError):  # a Python int with bool arrays is int64
        xp.add(flags, 2**63)
    assert_close(xp.add(flags, 2**40), np.array([2**40 + 1, 2**40], np.int64))


def test_python_int_out_of_range_elsewhere(xp: Any) -> None:
    """Comparisons are exact (NumPy 2), the logical functions take the int as a bool (within
    int64), divide converts it to float, and clip treats an out-of-range bound as no bound."""
    for dtype in _ints(xp):
        info = np.iinfo(dtype)
        host = np.array([int(info.min), 0, int(info.max)], dtype)
        x = xp.asarray(host)
        for value in (int(info.max) + 1, int(info.min) - 1, 2**70, -(2**70)):
            for name in rules.COMPARISONS:
                exact = host.astype(object)
                want = getattr(np, name)(exact, value).astype(bool)
                assert_close(getattr(xp, name)(x, value), want, err_msg=f"{name}(x, {value})")
                want = getattr(np, name)(value, exact).astype(bool)
                assert_close(getattr(xp, name)(value, x), want, err_msg=f"{name}({value}, x)")
        big = int(info.max) + 1
        if big < 2**63:  # beyond int64, a Python int is an OverflowError here too
            assert_close(xp.logical_and(x, 2 * big), host != 0)
            assert_close(xp.logical_or(2 * big, x), np.ones(3, bool))
        with pytest.raises(OverflowError):
            xp.logical_and(x, 2**64)
        fdt = xp.__array_namespace_info__().default_dtypes()["real floating"]
        assert_close(xp.divide(x, big), (host.astype(fdt) / fdt.type(big)).astype(fdt))
        assert_close(xp.clip(x, int(info.min) - 5, big + 5), host)
        assert_close(xp.clip(x, 0, big), np.maximum(host, 0))
