"""The versioned backend protocol (docs/backends.md, "Protocol versions"): the required primitives
of protocol 1.0 stay required and stay the only required ones, every primitive added later is
optional with a derived default as accurate as NumPy's answer, backends declare what they
implement, and arraycore refuses what it cannot run with an error naming why."""

from __future__ import annotations

from importlib import metadata
from typing import Any, ClassVar

import numpy as np
import pytest

import arraycore
from arraycore import _optable, _registry
from arraycore.backend import (
    BINARY_OPS,
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    UNARY_OPS,
    Backend,
    protocol_problems,
)
from arraycore.errors import BackendProtocolError
from arraycore_tiny import TinyBackend

#: The element-wise primitives of protocol 1.0, as backends.md listed them when it was released.
#: Never edit these lists: a backend written then implements exactly these.
FIRST_UNARY = {"negative", "abs", "sqrt", "exp", "expm1", "log", "log1p", "tanh", "sin", "cos",
               "sign", "floor", "ceil", "round", "logical_not", "isnan", "isinf"}  # fmt: skip
FIRST_BINARY = {"add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow",
                "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
                "greater_equal", "logical_and", "logical_or"}  # fmt: skip
FIRST_ABSTRACT = {"devices", "owns", "from_numpy", "to_numpy", "full", "unary", "binary", "where",
                  "astype", "reduce", "arg_reduce", "matmul", "reshape", "permute_dims",
                  "broadcast_to", "getitem", "setitem", "take", "scatter_add", "rng_state",
                  "rng_uniform"}  # fmt: skip


def test_the_required_primitives_are_those_of_protocol_1_0() -> None:
    assert UNARY_OPS == FIRST_UNARY and BINARY_OPS == FIRST_BINARY
    assert set(Backend.__abstractmethods__) == FIRST_ABSTRACT
    assert Backend.protocol_version == (1, 0)


def test_every_later_primitive_is_optional_with_a_default() -> None:
    """Adding a primitive to the op table is a minor version: it comes with its version and a
    default built from the required primitives, and no backend has to implement it."""
    for op in _optable.ELEMENTWISE:
        if not op.primitive:
            continue
        if op.name in FIRST_UNARY | FIRST_BINARY:
            assert op.since == (1, 0) and op.fallback is None, op.name
        else:
            assert op.fallback is not None, f"{op.name}: an optional primitive needs a default"
            assert (1, 0) < op.since <= PROTOCOL_VERSION, op.name
            assert op.since[0] == PROTOCOL_VERSION[0], f"{op.name}: added in a minor version"
            assert OPTIONAL_OPS[op.name] == op.since
    assert len(OPTIONAL_OPS) == 23


# -- the defaults against NumPy --------------------------------------------------------------------
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, 1e-300, -1e-300,
           5e-324, 1e300, -1e300, 700.0, 710.0, -710.0, 1e8, 1e20, 0.4375, 0.6875, 1.1875, 2.4375,
           1e-8, 0.99999999, -0.9999999, 1.0000001, 1024.0, 1e-5, 100.0]  # fmt: skip
UNARY_FLOAT = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "log10", "log2", "sinh",
               "tan", "trunc"]  # fmt: skip
BINARY_FLOAT = ["atan2", "copysign", "hypot", "logaddexp", "nextafter"]
#: Most ulps a default is from NumPy's answer (measured: at most 4 in float32, 2 in float64).
ULPS = 8


@pytest.fixture(scope="module")
def tiny() -> Any:
    xp = arraycore.namespace("tiny")
    assert set(xp._fallbacks) == set(OPTIONAL_OPS)  # tiny declares none: every one is derived
    return xp


def _values(dtype: Any) -> np.ndarray:
    rng = np.random.default_rng(7)
    wide = np.exp(rng.uniform(-700, 700, 3000)) * rng.choice([-1.0, 1.0], 3000)
    values = [np.array(SPECIAL), rng.uniform(-10, 10, 3000), rng.uniform(-1, 1, 3000), wide]
    with np.errstate(all="ignore"):
        return np.concatenate(values).astype(dtype)


def _check(got: np.ndarray, want: np.ndarray, dtype: Any, name: str, atol: float = 0.0) -> None:
    assert got.dtype == want.dtype, name
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    finite = np.isfinite(want) & np.isfinite(got)
    with np.errstate(all="ignore"):
        close = np.abs(got - want) <= ULPS * np.finfo(dtype).eps * np.abs(want) + atol
    bad = ~same & ~(finite & close)
    assert not bad.any(), f"{name}: got {got[bad][:5]}, NumPy {want[bad][:5]}"
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), f"{name}: signed 0"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_unary_defaults_match_numpy(tiny: Any, name: str, dtype: str) -> None:
    host = _values(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, _optable.BY_NAME[name].reference)(host)
    _check(tiny.to_numpy(getattr(tiny, name)(tiny.asarray(host))), want, dtype, name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BINARY_FLOAT)
def test_binary_defaults_match_numpy(tiny: Any, name: str, dtype: str) -> None:
    host = _values(dtype)
    special = _values(dtype)[: len(SPECIAL)]
    pairs = [
        (host, np.random.default_rng(3).permutation(host)),
        (np.repeat(special, len(special)), np.tile(special, len(special))),  # every pair
    ]
    # logaddexp of operands near -log(2) apart cancels to near 0: NumPy's own answer is only as
    # good as its operands' last bits there, hence an absolute tolerance of a few ulps of them
    atol = 16 * float(np.finfo(dtype).eps) if name == "logaddexp" else 0.0
    for x1, x2 in pairs:
        with np.errstate(all="ignore"):
            want = getattr(np, _optable.BY_NAME[name].reference)(x1, x2)
        got = tiny.to_numpy(getattr(tiny, name)(tiny.asarray(x1), tiny.asarray(x2)))
        finite_x2 = ~np.isnan(x2)  # the sign bit of a NaN x2 is read as +, see _optional
        if name in ("copysign", "atan2"):
            got, want = got[finite_x2], want[finite_x2]
        _check(got, want, dtype, name, atol)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "bool"])  # fmt: skip
def test_bitwise_defaults_are_exact(tiny: Any, dtype: str) -> None:
    rng = np.random.default_rng(1)
    if dtype == "bool":
        a, b = rng.integers(0, 2, 200).astype(bool), rng.integers(0, 2, 200).astype(bool)
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True)
        b = rng.permutation(a)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        ref = getattr(np, name)(a, b)
        assert np.array_equal(
            tiny.to_numpy(getattr(tiny, name)(tiny.asarray(a), tiny.asarray(b))), ref
        )
    assert np.array_equal(tiny.to_numpy(tiny.bitwise_invert(tiny.asarray(a))), ~a)
    if dtype == "bool":
        return
    bits = 8 * np.dtype(dtype).itemsize
    shifts = rng.integers(0, bits + 3, 500).astype(dtype)
    inside = shifts < bits
    small = np.where(inside, shifts, 0).astype(dtype)
    left = np.where(inside, np.left_shift(a, small), 0).astype(dtype)
    sign = np.where(a < 0, -1, 0).astype(dtype) if dtype[0] == "i" else np.zeros_like(a)
    right = np.where(inside, np.right_shift(a, small), sign).astype(dtype)
    x, s = tiny.asarray(a), tiny.asarray(shifts)
    assert np.array_equal(tiny.to_numpy(tiny.bitwise_left_shift(x, s)), left)
    assert np.array_equal(tiny.to_numpy(tiny.bitwise_right_shift(x, s)), right)


def test_inplace_forms_and_operators_use_the_defaults(tiny: Any) -> None:
    host = np.array([0.25, -0.75, 2.0, -0.0])
    out = tiny.asarray(np.zeros(4))
    assert tiny.inplace.atan(tiny.asarray(host), out=out) is out
    np.testing.assert_allclose(tiny.to_numpy(out), np.arctan(host), rtol=1e-15)
    ints = tiny.asarray(np.array([5, -3, 12], np.int32))
    assert tiny.to_numpy(ints & 6).tolist() == [4, 4, 4]
    assert tiny.to_numpy(~ints).tolist() == [-6, 2, -13]
    assert tiny.to_numpy(ints << 2).tolist() == [20, -12, 48]
    assert tiny.to_numpy(tiny.signbit(tiny.asarray(host))).tolist() == [False, True, False, True]


def test_host_path_defaults_are_listed(tiny: Any) -> None:
    listed = tiny.__array_namespace_info__().host_functions()
    assert {"nextafter", "bitwise_and", "bitwise_or", "bitwise_xor"} <= set(listed)
    assert (
        "nextafter" not in arraycore.namespace("numpy").__array_namespace_info__().host_functions()
    )


# -- declarations ----------------------------------------------------------------------------------
class _Recording(TinyBackend):
    """The tiny backend declaring log2 and hypot, recording what its primitives are asked."""

    name = "recording"
    optional_primitives = frozenset({"log2", "hypot"})
    asked: ClassVar[set[str]] = set()

    def unary(self, op: str, x: Any, out: Any = None) -> Any:
        self.asked.add(op)
        return super().unary(op, x, out)

    def binary(self, op: str, x1: Any, x2: Any, out: Any = None) -> Any:
        self.asked.add(op)
        return super().binary(op, x1, x2, out)


def test_declared_primitives_go_to_the_backend_and_no_undeclared_one_does() -> None:
    xp = arraycore.Namespace(_Recording())
    x = xp.asarray(np.array([0.5, 2.0, 3.0]))
    for name in ("log2", "log10", "atan", "tan", "cosh", "trunc"):
        getattr(xp, name)(x)
    for name in ("hypot", "atan2", "copysign", "logaddexp"):
        getattr(xp, name)(x, x)
    assert {"log2", "hypot"} <= _Recording.asked
    assert not (_Recording.asked & (set(OPTIONAL_OPS) - {"log2", "hypot"}))


class _Future(TinyBackend):
    name = "future"
    protocol_version = (PROTOCOL_VERSION[0] + 1, 0)


class _NewerMinor(TinyBackend):
    name = "newerminor"
    protocol_version = (PROTOCOL_VERSION[0], PROTOCOL_VERSION[1] + 5)
    optional_primitives = frozenset({"log2", "a_primitive_of_a_later_minor"})


class _Misspelt(TinyBackend):
    name = "misspelt"
    optional_primitives = frozenset({"log_2"})


class _Incomplete(Backend):
    """A backend missing required primitives (its author stopped half-way)."""

    name = "incomplete"

    @classmethod
    def devices(cls) -> list[Any]:
        return []

    def owns(self, x: Any) -> bool:
        return False


def test_protocol_problems() -> None:
    assert protocol_problems(TinyBackend) == []
    assert protocol_problems(_NewerMinor) == []  # a newer minor is accepted, unknown names too
    [future] = protocol_problems(_Future)
    assert (
        f"protocol {PROTOCOL_VERSION[0] + 1}.0" in future and "pip install -U arraycore" in future
    )
    [misspelt] = protocol_problems(_Misspelt)
    assert "log_2" in misspelt
    [incomplete] = protocol_problems(_Incomplete)
    assert "from_numpy" in incomplete and "scatter_add" in incomplete and "unary" in incomplete


def _register(monkeypatch: pytest.MonkeyPatch, name: str, target: str) -> None:
    real = _registry.entry_points

    def with_extra() -> dict[str, metadata.EntryPoint]:
        found = real()
        found[name] = metadata.EntryPoint(name, target, _registry.ENTRY_POINT_GROUP)
        return found

    monkeypatch.setattr(_registry, "entry_points", with_extra)
    monkeypatch.delitem(_registry._classes, name, raising=False)


@pytest.mark.parametrize(
    ("name", "words"),
    [("_Future", "pip install -U arraycore"), ("_Incomplete", "does not implement the required")],
)
def test_refused_at_load_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, name: str, words: str
) -> None:
    _register(monkeypatch, "refused", f"test_protocol_versions:{name}")
    with pytest.raises(BackendProtocolError, match=words):
        arraycore.namespace("refused")
