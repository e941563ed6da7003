"""The dtype rule table: its documentation, the functions it covers, how overrides are bound to
it, and that the conformance kit catches a backend that departs from it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import Namespace
from arraycore import _dtype_rules as rules
from arraycore.testing.conformance import test_dtype_rules as kit
from arraycore_tiny import TinyArray, TinyBackend

DOC = Path(__file__).parents[1] / "docs" / "dtypes.md"
F64, F32 = np.dtype("float64"), np.dtype("float32")

#: Namespace functions outside the rule table: they create arrays from Python data or shapes,
#: move them, or are about dtypes themselves.
OUTSIDE = {
    "arange", "asarray", "empty", "eye", "full", "linspace", "ones", "zeros", "from_dlpack",
    "from_numpy", "to_numpy", "setitem", "result_type", "can_cast", "finfo", "iinfo", "isdtype",
}  # fmt: skip


def test_the_documented_table_is_the_rule_table() -> None:
    text = DOC.read_text()
    documented: dict[str, tuple[str, str]] = {}
    table = text.split("## The rule of every function")[1].split("\n## ")[0]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for name in re.findall(r"`(\w+)`", cells[0]):
                documented[name] = (cells[1], cells[2])
    assert documented == {n: (r.accepts, r.result) for n, r in rules.RULES.items()}
    for result in rules.RESULTS:
        assert f"\n| {result} |" in text, f"result rule {result!r} is not documented"


def test_every_namespace_function_that_takes_arrays_has_a_rule() -> None:
    public = {
        n for n in dir(Namespace) if not n.startswith("_") and callable(getattr(Namespace, n))
    }
    assert public - OUTSIDE == set(rules.RULES)


@pytest.mark.parametrize(
    ("name", "operands", "default_float", "want"),
    [
        ("sqrt", ("int8",), F64, "float64"),  # NumPy: float16
        ("exp", ("int16",), F64, "float64"),  # NumPy: float32
        ("sqrt", ("int8",), F32, "float32"),  # a device without float64
        ("sqrt", ("float16",), F64, "float16"),
        ("round", ("bool",), F64, "bool"),  # NumPy: float16
        ("square", ("bool",), F64, "bool"),  # NumPy: int8
        ("matmul", ("bool", "bool"), F64, "bool"),
        ("divide", ("int8", "int8"), F32, "float32"),
        ("mean", ("int32",), F32, "float32"),
        ("sum", ("uint8",), F64, "uint64"),
        ("sum", ("bool",), F64, "int64"),
        ("add", ("int8", 1.5), F32, "float32"),  # NumPy: float64
        ("add", ("bool", 2), F64, "int64"),
        ("add", ("uint8", 300), F64, "uint8"),  # the dtype; the value is an OverflowError
        ("add", ("int8", "float16"), F64, "float16"),
        ("less", ("int8", 1.5), F64, "bool"),
        ("clip", ("int8", "float32"), F64, "int8"),
        ("argmax", ("bool",), F64, "int64"),
        ("astype", ("int8", "float16"), F64, "float16"),
    ],
)
def test_result_dtype(name: str, operands: tuple[Any, ...], default_float: Any, want: str) -> None:
    assert rules.result_dtype(name, *operands, default_float=default_float) == np.dtype(want)


@pytest.mark.parametrize(
    ("name", "operands"),
    [
        ("negative", ("bool",)),
        ("positive", ("bool",)),
        ("floor_divide", ("bool", "bool")),  # NumPy: int8
        ("pow", ("bool", True)),
        ("subtract", ("bool", "bool")),
    ],
)
def test_dtypes_a_function_rejects(name: str, operands: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError, match=f"{name}: not defined for bool"):
        rules.result_dtype(name, *operands, default_float=F64)


def test_a_promoted_dtype_the_device_lacks() -> None:
    with pytest.raises(TypeError, match="float64"):
        rules.result_dtype(
            "add", "int32", "float32", default_float=F32, dtypes=("int32", "float32")
        )


def test_numpy_binds_the_numpy_functions_that_follow_the_rules() -> None:
    xp = arraycore.namespace("numpy")
    for name in ("add", "multiply", "divide", "less", "mean", "argmax", "positive"):
        assert getattr(xp, name) is getattr(np, name), name
    # matmul is NumPy's, large float32 products handed to oneDNN where installed
    i8 = np.ones((2, 2), np.int8)
    assert xp.matmul(i8, i8).dtype == np.matmul(i8, i8).dtype
    assert xp.matmul(i8, i8.astype(np.float32)).dtype == np.float32
    assert xp.inplace.add is np.add
    assert xp.sqrt is not np.sqrt  # NumPy's sqrt of int8 is float16: it is guarded
    x32 = np.array([4.0], np.float32)
    assert xp.sqrt(x32).dtype == np.float32
    assert xp.sqrt(np.array([4], np.int8)).dtype == np.float64
    assert xp.sqrt(4.0) == 2.0  # Python scalars still reach NumPy


class _SqrtBackend(TinyBackend):
    """Overrides ``sqrt`` with NumPy's own (float16 for int8), as a CuPy-based backend would."""

    name = "sqrtoverride"

    def overrides(self) -> dict[str, Any]:
        return {"sqrt": lambda x, /: TinyArray(np.sqrt(x._data), self.device.id)}


class _WronglyConformingBackend(_SqrtBackend):
    """Declares that override conforming: it is then bound as it is, and wrong for int8."""

    conforming_overrides = frozenset({"sqrt"})


@pytest.fixture(autouse=True)
def _tiny_loaded() -> None:
    """The kit copies results to the host with ``arraycore.to_numpy``, which finds the namespace
    of a ``TinyArray`` among the loaded ones."""
    arraycore.namespace("tiny")


def test_an_override_sees_only_inputs_without_integer_or_bool_arrays() -> None:
    xp = Namespace(_SqrtBackend(None))
    assert xp.sqrt(xp.asarray(np.array([4], np.int8))).dtype == np.float64
    assert xp.sqrt(xp.asarray(np.array([4.0], np.float16))).dtype == np.float16
    kit.test_result_dtype(xp, "sqrt")
    wrong = Namespace(_WronglyConformingBackend(None))
    assert wrong.sqrt(wrong.asarray(np.array([4], np.int8))).dtype == np.float16
    with pytest.raises(AssertionError, match=r"sqrt\('int8',\): float16; rule: float64"):
        kit.test_result_dtype(wrong, "sqrt")


class _CDivisionBackend(TinyBackend):
    """Integer division as C on a GPU might do it: ``x // 0`` has every bit set, ``x % 0`` is x."""

    name = "cdivision"

    def binary(self, op: str, x1: Any, x2: Any, out: Any = None) -> Any:
        with np.errstate(divide="ignore"):
            result = super().binary(op, x1, x2, out)
        data = result._data
        if op in ("floor_divide", "remainder") and data.dtype.kind in "iu":
            zero = np.broadcast_to(x2._data, data.shape) == 0
            fill = np.broadcast_to(x1._data, data.shape) if op == "remainder" else np.array(-1)
            data[zero] = np.broadcast_to(fill, data.shape)[zero].astype(data.dtype)
        return result


def test_the_kit_pins_down_integer_division_by_zero() -> None:
    xp = Namespace(_CDivisionBackend(None))
    assert xp.to_numpy(xp.floor_divide(xp.asarray(np.array([7], np.int32)), 0)).tolist() == [-1]
    with pytest.raises(AssertionError):
        kit.test_integer_division_and_remainder_by_zero_give_zero(xp)
