"""``Expr``: a node of an expression graph. Building one computes nothing.

An ``Expr`` is either a *source* (a placeholder, a constant or a :class:`nnlayers.Parameter`) or
the result of an op applied to other expressions. Shapes and dtypes are inferred on demand
(``expr.shape``) or when a graph is compiled, never while building, so a shape error surfaces at
setup with the op, the node's name, the line that built it and the shapes involved.
"""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import ShapeError
from .spec import DEFAULT_FLOAT, Shape, Spec, as_dtype, format_shape

if TYPE_CHECKING:
    from ..ops.base import Op

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def _build_site() -> tuple[str, int] | None:
    """File and line of the first caller frame outside nnlayers (where the user built the node)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


class Expr:
    """A node of an expression graph: NumPy-like operators build new nodes, computing nothing.

    >>> import nnlayers.expr as ex
    >>> x = ex.placeholder((None, 3), name="x")
    >>> y = ex.sum(ex.exp(x) * 2.0, axis=1, keepdims=True)
    >>> y.shape
    (None, 1)
    """

    __slots__ = ("op", "inputs", "name", "site", "_spec", "__weakref__")
    # NumPy defers to our reflected operators (np_array * expr -> Expr.__rmul__).
    __array_ufunc__ = None

    def __init__(
        self,
        op: Op | None,
        inputs: tuple[Expr, ...] = (),
        spec: Spec | None = None,
        name: str | None = None,
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.name = name
        self.site = _build_site()
        self._spec = spec

    # -- static information ------------------------------------------------------------------
    @property
    def spec(self) -> Spec:
        """Shape and dtype, inferred (once) from the sources; raises :class:`ShapeError`."""
        if self._spec is None:
            infer_specs([self])
        return self._spec  # type: ignore[return-value]

    @property
    def shape(self) -> Shape:
        """The static shape; ``None`` marks a size fixed only by the feeds (the batch axis)."""
        return self.spec.shape

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values this node computes."""
        return self.spec.dtype

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.spec.shape)

    @property
    def is_source(self) -> bool:
        """Whether this node is a placeholder, constant or parameter (it has no op)."""
        return self.op is None

    @property
    def kind(self) -> str:
        """``placeholder``, ``constant``, ``parameter`` or the op's name."""
        return self.op.name if self.op is not None else type(self).__name__.lower()

    def named(self, name: str) -> Expr:
        """Give this node a name (shown in errors, dumps and the NaN guard); returns ``self``."""
        self.name = name
        return self

    def describe(self) -> str:
        """``matmul 'logits'`` style label for messages."""
        return f"{self.kind} {self.name!r}" if self.name else self.kind

    def where_built(self) -> str:
        """``file:line: source`` of the line that built this node, or ``""``."""
        if self.site is None:
            return ""
        filename, lineno = self.site
        text = linecache.getline(filename, lineno).strip()
        return f"{filename}:{lineno}" + (f": {text}" if text else "")

    def __repr__(self) -> str:
        spec = f" {self._spec}" if self._spec is not None else ""
        return f"<Expr {self.describe()}{spec}>"

    def __bool__(self) -> bool:
        raise TypeError(
            "an expression has no truth value while the graph is built; use ex.where() for "
            "element-wise choices"
        )

    def __iter__(self) -> Any:
        raise TypeError("an expression is not iterable; use ex.split() or slicing")

    def __len__(self) -> int:
        first = self.shape[0] if self.shape else None
        if first is None:
            raise TypeError(f"len() of {self.describe()} with shape {format_shape(self.shape)}")
        return first

    # -- operators (NumPy semantics, Python numbers and NumPy arrays become constants) ----------
    def __add__(self, other: Any) -> Expr:
        return _call("add", self, other)

    def __radd__(self, other: Any) -> Expr:
        return _call("add", other, self)

    def __sub__(self, other: Any) -> Expr:
        return _call("subtract", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return _call("subtract", other, self)

    def __mul__(self, other: Any) -> Expr:
        return _call("multiply", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return _call("multiply", other, self)

    def __truediv__(self, other: Any) -> Expr:
        return _call("divide", self, other)

    def __rtruediv__(self, other: Any) -> Expr:
        return _call("divide", other, self)

    def __pow__(self, other: Any) -> Expr:
        return _call("power", self, other)

    def __rpow__(self, other: Any) -> Expr:
        return _call("power", other, self)

    def __neg__(self) -> Expr:
        return _call("negative", self)

    def __pos__(self) -> Expr:
        return self

    def __abs__(self) -> Expr:
        return _call("abs", self)

    def __lt__(self, other: Any) -> Expr:
        return _call("less", self, other)

    def __le__(self, other: Any) -> Expr:
        return _call("less_equal", self, other)

    def __gt__(self, other: Any) -> Expr:
        return _call("greater", self, other)

    def __ge__(self, other: Any) -> Expr:
        return _call("greater_equal", self, other)

    def __matmul__(self, other: Any) -> Expr:
        from ..ops.math.linalg import matmul

        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Expr:
        from ..ops.math.linalg import matmul

        return matmul(other, self)

    def __getitem__(self, key: Any) -> Expr:
        from ..ops.array.indexing import getitem

        return getitem(self, key)

    # -- NumPy-style methods ----------------------------------------------------------------------
    @property
    def T(self) -> Expr:  # noqa: N802 - NumPy's name
        """Axes reversed, as ``numpy.ndarray.T``."""
        from ..ops.array.shape import transpose

        return transpose(self)

    def reshape(self, *shape: Any) -> Expr:
        """``ex.reshape(self, shape)``."""
        from ..ops.array.shape import reshape

        return reshape(self, shape[0] if len(shape) == 1 else shape)

    def astype(self, dtype: Any) -> Expr:
        """``ex.astype(self, dtype)``."""
        from ..ops.math.elementwise import astype

        return astype(self, dtype)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Expr:
        """``ex.sum(self, axis, keepdims)``."""
        from ..ops.math.reduction import sum as sum_

        return sum_(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Expr:
        """``ex.mean(self, axis, keepdims)``."""
        from ..ops.math.reduction import mean

        return mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Expr:
        """``ex.max(self, axis, keepdims)``."""
        from ..ops.math.reduction import max as max_

        return max_(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Expr:
        """``ex.min(self, axis, keepdims)``."""
        from ..ops.math.reduction import min as min_

        return min_(self, axis=axis, keepdims=keepdims)


def _call(function: str, *args: Any) -> Expr:
    """``ex.<function>(*args)`` from the element-wise family (imported late: ops import us)."""
    from ..ops.math import elementwise

    return cast(Expr, getattr(elementwise, function)(*args))


class Placeholder(Expr):
    """A value fed at run time; sizes given as ``None`` (the batch axis) come from the feed."""

    __slots__ = ()


class Constant(Expr):
    """A fixed value (host or backend array), moved to the graph's backend when it compiles."""

    __slots__ = ("value",)

    def __init__(self, value: Any, spec: Spec, name: str | None = None) -> None:
        super().__init__(None, (), spec, name)
        self.value = value


def placeholder(shape: Any, dtype: Any = None, name: str | None = None) -> Placeholder:
    """A source fed at run time. ``shape`` may use ``None`` for the batch axis; float32 default.

    >>> x = placeholder((None, 784), name="images")
    >>> x.shape, x.dtype.name
    ((None, 784), 'float32')
    """
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    if not isinstance(shape, tuple | list):
        raise ShapeError(
            f"placeholder {name!r}: the shape must be a tuple of sizes, with None for a size "
            f"known only when fed (e.g. (None, 784)); got {shape!r}"
        )
    dims = tuple(None if d is None else int(d) for d in shape)
    if any(d is not None and d < 0 for d in dims):
        raise ShapeError(f"placeholder {name!r}: negative size in shape {format_shape(dims)}")
    return Placeholder(None, (), Spec(dims, as_dtype(dtype)), name)


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Constant:
    """A constant: a Python number, a nested list, a NumPy array or a backend array.

    Floating values become float32 unless ``dtype`` says otherwise; integers stay int64 (or the
    NumPy array's integer dtype); backend arrays keep their dtype.
    """
    if (
        hasattr(value, "shape")
        and hasattr(value, "dtype")
        and not isinstance(value, np.ndarray | np.generic)
    ):
        dt = as_dtype(dtype, np.dtype(value.dtype))
        return Constant(value, Spec(tuple(int(d) for d in value.shape), dt), name)
    host = np.asarray(value)
    if dtype is not None:
        dt = np.dtype(dtype)
    elif host.dtype.kind == "f":
        dt = DEFAULT_FLOAT
    elif host.dtype.kind in "iu" and not isinstance(value, np.ndarray | np.generic):
        dt = np.dtype("int64")
    else:
        dt = host.dtype
    host = host.astype(dt, copy=False)
    return Constant(host, Spec(tuple(host.shape), dt), name)


def as_expr(value: Any, like: Expr | None = None) -> Expr:
    """``value`` as an expression: Python numbers and NumPy floats take the dtype of ``like``.

    This mirrors NumPy 2's weak scalars: ``x * 2.0`` keeps ``x``'s float32, and a float64 NumPy
    array mixed into a float32 expression is cast to float32 rather than widening the graph.
    """
    if isinstance(value, Expr):
        return value
    like_dtype = like.dtype if like is not None else None
    if isinstance(value, (*_SCALARS, np.ndarray)):
        host = np.asarray(value)
        if like_dtype is not None and host.dtype.kind in "biuf" and like_dtype.kind == "f":
            return constant(host, dtype=like_dtype if host.dtype.kind != "b" else None)
        if like_dtype is not None and host.dtype.kind in "iu" and like_dtype.kind in "iu":
            return constant(host, dtype=like_dtype)
        return constant(value)
    if isinstance(value, list | tuple):
        return as_expr(np.asarray(value), like)
    return constant(value)


def as_exprs(*values: Any) -> tuple[Expr, ...]:
    """Each value as an expression, Python numbers and NumPy arrays taking the dtype of the first
    expression among them (so a float64 graph stays float64 whatever the argument order)."""
    like = next((v for v in values if isinstance(v, Expr)), None)
    return tuple(as_expr(v, like) for v in values)


def infer_specs(outputs: list[Expr]) -> None:
    """Infer the spec of every node that ``outputs`` depend on.

    Only nodes without a spec are visited, so asking for shapes while building stays linear.
    """
    from ..graph.topo import topological_order

    def known(node: Expr) -> bool:
        return node._spec is not None

    pending = [o for o in outputs if o._spec is None]
    for node in topological_order(pending, skip=known):
        node._spec = run_infer(node.op, node, [i.spec for i in node.inputs])  # type: ignore[arg-type]


def run_infer(op: Op, node: Expr, specs: list[Spec]) -> Spec:
    """``op.infer(*specs)``, its failures turned into a :class:`ShapeError` that names the node."""
    try:
        return op.infer(*specs)
    except (ShapeError, ValueError, TypeError) as exc:
        raise ShapeError(shape_message(op, node, specs, str(exc))) from exc


def shape_message(op: Op, node: Expr, specs: list[Spec], problem: str) -> str:
    """The text of a shape error: op, node name, build site and every input's name and spec."""
    label = f"{op.name} {node.name!r}" if node.name else op.name
    # arraycore's shape rules (arraycore.nn_shapes) name the op themselves: name it once
    lines = [f"{label}: {problem.removeprefix(f'{op.name}: ')}"]
    site = node.where_built()
    if site:
        lines.append(f"  built at {site}")
    for i, (inp, spec) in enumerate(zip(node.inputs, specs, strict=True)):
        lines.append(f"  input {i}: {inp.describe()} {spec}")
    return "\n".join(lines)
