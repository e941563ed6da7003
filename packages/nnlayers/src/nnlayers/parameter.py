"""``Parameter``: a named source holding a value across runs and, after backward, its gradient.

>>> import numpy as np
>>> import nnlayers
>>> W = nnlayers.Parameter.create((784, 128), "he_normal", seed=0, name="W")
>>> b = nnlayers.Parameter(np.zeros(128), name="b", weight_decay=0.0)
>>> W.shape, round(float(W.numpy().std()), 2), b.weight_decay, W.lr_multiplier
((784, 128), 0.05, 0.0, 1.0)

Sharing (tied weights) is identity: use one ``Parameter`` object in two places (or apply one
layer twice) and the graph sums both gradient contributions into its single ``grad``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from arraycore import ArrayNamespace, BackendMismatchError

from . import init as initializers
from .expr.node import Expr
from .expr.spec import DEFAULT_FLOAT, Spec


class Parameter(Expr):
    """A source whose value lives across runs: weights (``trainable=True``) or state such as
    batch-norm running statistics (``trainable=False``, updated in place by their op).

    The value is copied at construction (host data becomes float32 unless ``dtype`` says
    otherwise) and moved to the graph's backend when a graph that uses it is compiled.
    ``backward()`` stores the gradient in ``grad``.

    Optimisers read two per-parameter settings: ``weight_decay`` (``None``: the optimiser's own
    setting; ``0.0``: never decayed, as layers do for biases and normalisation parameters) and
    ``lr_multiplier`` (the learning rate is scaled by it; ``0.0`` freezes the parameter while it
    still receives a gradient).

    :meth:`freeze` (or ``frozen = True``; :meth:`nnlayers.layers.Layer.freeze` for a whole
    layer) stops training a weight for fine-tuning: it is then not ``trainable``, gets no
    gradient and no update, and models built before the change follow it at their next step.
    :meth:`unfreeze` undoes it; state (``trainable=False`` from the start) stays state.

    >>> import numpy as np
    >>> W = Parameter(np.zeros((3, 2)), name="W")
    >>> W.shape, W.dtype.name, W.trainable
    ((3, 2), 'float32', True)
    >>> W.freeze().trainable, W.unfreeze().trainable
    (False, True)
    """

    __slots__ = (
        "_value", "grad", "_trainable", "_frozen", "weight_decay", "lr_multiplier", "owner",
        "_home",
    )  # fmt: skip

    def __init__(
        self,
        value: Any,
        *,
        name: str | None = None,
        dtype: Any = None,
        trainable: bool = True,
        weight_decay: float | None = None,
        lr_multiplier: float = 1.0,
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
            # C order whatever the source's (a QR factor, a transposed view): the optimiser's
            # state and scratch are C-ordered, and an in-place update mixing the two orders
            # strides through memory (SGD on a 128 x 512 Fortran-ordered weight: 17x slower)
            stored = np.array(host, dtype=dt, copy=True, order="C")
        super().__init__(None, (), Spec(tuple(int(d) for d in value_shape(stored)), dt), name)
        self._value = stored
        self.grad: Any = None
        self._trainable = bool(trainable)
        self._frozen = False
        if weight_decay is not None and weight_decay < 0:
            raise ValueError(f"Parameter {name!r}: weight_decay must be >= 0, got {weight_decay}")
        if lr_multiplier < 0:
            raise ValueError(f"Parameter {name!r}: lr_multiplier must be >= 0, got {lr_multiplier}")
        self.weight_decay = weight_decay
        self.lr_multiplier = float(lr_multiplier)
        self.owner: Any = None  # the layer that made it, if any (used to keep names unique)
        self._home: Any = None  # the namespace of the first graph that used it

    @classmethod
    def create(
        cls,
        shape: Any,
        init: Any = "glorot_uniform",
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        fans: tuple[int, int] | None = None,
        name: str | None = None,
        dtype: Any = None,
        trainable: bool = True,
        weight_decay: float | None = None,
        lr_multiplier: float = 1.0,
    ) -> Parameter:
        """A parameter of ``shape`` drawn by ``init`` (a name such as ``"he_normal"``, a number
        or a callable ``(shape, rng, dtype) -> array``, see :mod:`nnlayers.init`).

        Values come from ``rng``, else from ``seed``, else from the next seed of the sequence that
        :func:`nnlayers.seed` restarts.
        """
        generator = rng if rng is not None else initializers.rng(seed)
        dt = DEFAULT_FLOAT if dtype is None else np.dtype(dtype)
        function = initializers.get(init)
        if isinstance(function, initializers.Initializer):
            value = function(shape, generator, dt, fans=fans)
        else:
            value = np.asarray(function(shape, generator, dt), dtype=dt)
        want = (shape,) if isinstance(shape, int) else tuple(shape)
        if tuple(value.shape) != want:
            raise ValueError(
                f"Parameter {name!r}: the initialiser {init!r} gave shape {value.shape}, "
                f"expected {want}"
            )
        return cls(
            value,
            name=name,
            dtype=dt,
            trainable=trainable,
            weight_decay=weight_decay,
            lr_multiplier=lr_multiplier,
        )

    # -- training or not --------------------------------------------------------------------------
    @property
    def trainable(self) -> bool:
        """Whether training updates it: a weight that is not frozen (state such as batch-norm
        running statistics, made with ``trainable=False``, never is)."""
        return self._trainable and not self._frozen

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)
        _changed()

    @property
    def frozen(self) -> bool:
        """Whether :meth:`freeze` holds it fixed (``trainable`` is then False)."""
        return self._frozen

    @frozen.setter
    def frozen(self, value: bool) -> None:
        if bool(value) != self._frozen:
            self._frozen = bool(value)
            _changed()

    def freeze(self) -> Parameter:
        """Hold the value fixed: no gradient, no update (fine-tuning). Returns ``self``."""
        self.frozen = True
        return self

    def unfreeze(self) -> Parameter:
        """Train it again (a weight; state stays state). Returns ``self``."""
        self.frozen = False
        return self

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

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(int(d) for d in self.spec.shape if d is not None)

    def to_backend(self, xp: ArrayNamespace) -> Any:
        """Place the value on the namespace ``xp`` for a graph (no copy when it is already there).

        The first graph that uses a parameter decides its backend and device; a graph of another
        one is an error, never a silent move that would leave the first graph reading a value
        on the wrong device. :meth:`move_to` moves it on purpose.
        """
        home = self._home
        if home is not None and home is not xp:
            raise BackendMismatchError(
                f"Parameter {self.name!r} lives on {home} (its first graph's), and a graph on "
                f"{xp} uses it too; a parameter belongs to one backend and device: build the "
                "second model with its own parameters, or move this one with "
                "parameter.move_to(xp) (the first graph then no longer runs)"
            )
        self._value = xp.asarray(self._value, dtype=self.spec.dtype)
        self._home = xp
        return self._value

    def move_to(self, xp: ArrayNamespace) -> Parameter:
        """Move the value (and drop the gradient) to the namespace ``xp``, explicitly, through
        the host; graphs compiled on the old backend no longer run with it. Returns ``self``."""
        self._value = xp.asarray(self.numpy(), dtype=self.spec.dtype)
        self.grad = None
        self._home = xp
        _MOVES[0] += 1  # every compiled graph checks its parameters' homes at its next run
        return self

    def numpy(self) -> np.ndarray:
        """A host (NumPy) copy of the value, from whatever backend holds it."""
        if isinstance(self._value, np.ndarray):
            return self._value.copy()
        import arraycore

        return np.array(arraycore.namespace_of(self._value).to_numpy(self._value), copy=True)

    def assign(self, new: Any) -> None:
        """Overwrite the value with ``new`` (host or backend data of the same shape), in place
        when the value already lives on a backend, so graphs and optimisers keep seeing it."""
        shape = tuple(np.shape(new)) if not hasattr(new, "shape") else tuple(new.shape)
        if shape != self.spec.shape:
            raise ValueError(
                f"Parameter {self.name!r}: cannot assign a value of shape {shape}, "
                f"expected {self.spec.shape}"
            )
        if isinstance(self._value, np.ndarray) and isinstance(new, np.ndarray | list | tuple):
            self._value[...] = np.asarray(new, dtype=self.spec.dtype)
            return
        import arraycore

        xp = arraycore.namespace_of(self._value)
        if isinstance(new, np.ndarray | list | tuple | np.generic):
            new = xp.asarray(np.asarray(new), dtype=self.spec.dtype)
        xp.inplace.copy(new, out=self._value)

    def __repr__(self) -> str:
        label = "Parameter"
        if self._frozen:
            label = "Parameter (frozen)"
        elif not self._trainable:
            label = "Parameter (not trainable)"
        return f"<{label} {self.name!r} {self.spec}>"


#: Bumped whenever a parameter's ``trainable`` or ``frozen`` changes: a model compares it at
#: each step (one integer comparison) and rebuilds its gradient graph only when it moved.
_VERSION = [0]


def _changed() -> None:
    _VERSION[0] += 1


#: Bumped by every :meth:`Parameter.move_to`: a compiled graph compares it at each run (one
#: integer comparison) and checks where its parameters live only when it changed.
_MOVES = [0]


def placement_version() -> int:
    """A counter that changes whenever any parameter is moved to a backend (``move_to``)."""
    return _MOVES[0]


def trainable_version() -> int:
    """A counter that changes whenever any parameter is frozen, unfrozen or made (not)
    trainable."""
    return _VERSION[0]


def value_shape(value: Any) -> tuple[int, ...]:
    """Shape of an array of any backend."""
    return tuple(value.shape)
