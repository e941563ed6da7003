"""The NaN/Inf guard: checks every array a step makes and names the first op that made a bad one.

It syncs with the device after each step, so it is a debugging mode (``check_finite=True``),
compiled in only when asked for: a plan without it runs the bare callables.
"""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ..errors import NonFiniteError
from ..expr.node import Expr


def is_finite(xp: ArrayNamespace, x: Any) -> bool:
    """Whether every element of a floating array is finite (non-float arrays always are)."""
    if x is None or getattr(x, "dtype", None) is None or x.dtype.kind != "f":
        return True
    return bool(xp.all(xp.isfinite(x)))


def describe_node(node: Expr) -> str:
    """The op, the user's name and where the node was built."""
    site = node.where_built()
    return node.describe() + (f" (built at {site})" if site else "")


def check_source(xp: ArrayNamespace, node: Expr, value: Any) -> None:
    """Raise if a fed or stored source value already holds a NaN or an infinity."""
    if not is_finite(xp, value):
        raise NonFiniteError(f"NaN/Inf guard: {describe_node(node)} holds a NaN or an infinity")


def guard_forward(fn: Any, xp: ArrayNamespace, node: Expr, has_residual: bool) -> Any:
    """``fn`` followed by a finiteness check of its output."""

    def run(*inputs: Any) -> Any:
        result = fn(*inputs)
        y = result[0] if has_residual else result
        if not is_finite(xp, y):
            shapes = ", ".join(str(tuple(x.shape)) for x in inputs if x is not None)
            raise NonFiniteError(
                f"NaN/Inf guard: forward of {describe_node(node)} produced a NaN or an infinity "
                f"from finite inputs of shapes {shapes}"
            )
        return result

    return run


def guard_backward(
    fn: Any, xp: ArrayNamespace, node: Expr, nodes: list[Expr], inputs: tuple[int, ...]
) -> Any:
    """``fn`` (a bound backward) followed by a finiteness check of every gradient it returns."""

    def run(dy: Any, *args: Any) -> Any:
        grads = fn(dy, *args)
        for k, g in enumerate(grads):
            if g is not None and not is_finite(xp, g):
                raise NonFiniteError(
                    f"NaN/Inf guard: backward of {describe_node(node)} produced a NaN or an "
                    f"infinity in the gradient of input {k} ({nodes[inputs[k]].describe()}) from "
                    f"a finite incoming gradient"
                )
        return grads

    return run


def _mismatch(value: Any, spec: Any) -> str | None:
    """How ``value`` differs from ``spec`` (shape, dtype), or None."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return f"a {type(value).__name__}, not an array"
    problems = []
    if tuple(int(d) for d in shape) != tuple(spec.shape):
        problems.append(f"shape {tuple(shape)} where inference declared {tuple(spec.shape)}")
    if str(dtype) != spec.dtype.name:
        problems.append(f"dtype {dtype} where inference declared {spec.dtype.name}")
    return "; ".join(problems) or None


def check_specs_forward(fn: Any, node: Expr, spec: Any, has_residual: bool) -> Any:
    """``fn`` followed by a check that its output has the shape and dtype setup inferred."""

    def run(*inputs: Any) -> Any:
        result = fn(*inputs)
        problem = _mismatch(result[0] if has_residual else result, spec)
        if problem:
            raise AssertionError(f"spec check: forward of {describe_node(node)} returned {problem}")
        return result

    return run


def check_specs_backward(fn: Any, node: Expr, out_spec: Any, in_specs: list[Any]) -> Any:
    """``fn`` (a bound backward) followed by a check that each gradient has its input's shape
    and its input's dtype (or the output's, which the plan casts from)."""

    def run(dy: Any, *args: Any) -> Any:
        grads = fn(dy, *args)
        for k, (g, spec) in enumerate(zip(grads, in_specs, strict=True)):
            if g is None:
                continue
            problem = _mismatch(g, spec)
            if problem and str(getattr(g, "dtype", "")) == out_spec.dtype.name:
                problem = _mismatch(g, type(spec)(spec.shape, out_spec.dtype))
            if problem:
                raise AssertionError(
                    f"spec check: backward of {describe_node(node)} returned, for input {k}, "
                    f"{problem}"
                )
        return grads

    return run
