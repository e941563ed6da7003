"""``Parameter``: a named trainable source holding a value array and, after backward, its grad."""

from __future__ import annotations

from typing import Any

import numpy as np

from .expr.node import Expr
from .expr.spec import DEFAULT_FLOAT, Spec


class Parameter(Expr):
    """A source whose value lives across runs: weights (``trainable=True``) or state such as
    batch-norm running statistics (``trainable=False``, updated in place by their op).

    The value is copied at construction (host data becomes float32 unless ``dtype`` says
    otherwise) and moved to the graph's backend when a graph that uses it is compiled.
    ``backward()`` stores the gradient in ``grad``.

    >>> import numpy as np
    >>> W = Parameter(np.zeros((3, 2)), name="W")
    >>> W.shape, W.dtype.name, W.trainable
    ((3, 2), 'float32', True)
    """

    __slots__ = ("_value", "grad", "trainable")

    def __init__(
        self, value: Any, *, name: str | None = None, dtype: Any = None, trainable: bool = True
    ) -> None:
        if hasattr(value, "shape") and not isinstance(
            value, np.ndarray | np.generic | list | tuple
        ):
            dt = np.dtype(value.dtype) if dtype is None else np.dtype(dtype)
            if dt != value.dtype:
                raise TypeError(f"Parameter {name!r}: give a value of dtype {dt.name}")
            stored: Any = value
        else:
            host = np.asarray(value)
            if dtype is not None:
                dt = np.dtype(dtype)
            elif host.dtype.kind == "f" or not isinstance(value, np.ndarray | np.generic):
                dt = DEFAULT_FLOAT
            else:
                dt = host.dtype
            stored = np.array(host, dtype=dt, copy=True)
        super().__init__(None, (), Spec(tuple(int(d) for d in value_shape(stored)), dt), name)
        self._value = stored
        self.grad: Any = None
        self.trainable = trainable

    @property
    def value(self) -> Any:
        """The current value (a backend array once a graph using it has been compiled)."""
        return self._value

    @value.setter
    def value(self, new: Any) -> None:
        if tuple(new.shape) != self.spec.shape:
            raise ValueError(
                f"Parameter {self.name!r}: new value has shape {tuple(new.shape)}, "
                f"expected {self.spec.shape}"
            )
        self._value = new

    def to_backend(self, xp: Any) -> Any:
        """Move the value to the namespace ``xp`` (no copy when it is already there)."""
        self._value = xp.asarray(self._value, dtype=self.spec.dtype)
        return self._value

    def __repr__(self) -> str:
        label = "Parameter" if self.trainable else "Parameter (not trainable)"
        return f"<{label} {self.name!r} {self.spec}>"


def value_shape(value: Any) -> tuple[int, ...]:
    """Shape of an array of any backend."""
    return tuple(value.shape)
