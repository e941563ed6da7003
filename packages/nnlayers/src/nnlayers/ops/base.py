"""The op base class, the op registry and the helpers op declarations share.

An op is declared once, as a subclass of :class:`Op`:

- ``infer(*specs) -> Spec``: the output shape and dtype; raise ``ValueError`` with the problem
  (the graph adds the op, the node's name, where it was built and the input shapes). It may
  store derived static facts on ``self`` (``self.axes``): ``infer`` runs once symbolically and
  once more, on a copy of the op, for every concrete set of feed shapes.
- ``forward(xp, *inputs) -> output`` through the arraycore namespace ``xp`` only. An op with
  ``has_residual = True`` returns ``(output, residual)`` and gets the residual back in backward.
- ``backward(xp, dy, inputs, output, residual, needs) -> tuple`` with one gradient per input
  (``None`` where ``needs[i]`` is false). ``inputs`` holds only the inputs the op declared it
  keeps (``keep_inputs``; others are ``None``, already released) and ``output`` is ``None``
  unless ``keep_output``.
- optionally ``accumulate_grad(xp, acc, dy)``, for a one-input op whose gradient is ``dy`` placed
  into zeros of the input's shape (a basic slice): add ``dy`` into its part of ``acc`` in place.
  The plan calls it instead of ``backward`` when ``acc``, the input's gradient so far, is an
  array the plan owns (see ``graph/plan.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from arraycore import ArrayNamespace

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec, broadcast_shapes

Inputs = tuple[Any, ...]
"""The inputs a backward receives (``None`` for those it did not keep)."""
Needs = tuple[bool, ...]
"""Which inputs need a gradient."""
Grads = tuple[Any, ...]
"""One gradient per input (``None`` where not needed)."""

REGISTRY: dict[str, type[Op]] = {}
"""Every op class by name (the op-table test checks that each differentiable one is covered)."""


class Op:
    """Base class of every op: one declaration holds inference, forward, backward and what is kept.

    See ``packages/nnlayers/docs/graph.md`` for a worked example.
    """

    name: ClassVar[str] = ""
    #: Whether gradients flow through this op (comparisons, one_hot, stop_gradient: no).
    differentiable: ClassVar[bool] = True
    #: Indices of the inputs backward reads (``True`` for all of them).
    keep_inputs: ClassVar[tuple[int, ...] | bool] = ()
    #: Whether backward reads the output.
    keep_output: ClassVar[bool] = False
    #: Whether forward returns ``(output, residual)``.
    has_residual: ClassVar[bool] = False
    #: Whether backward returns only new arrays that share memory with nothing else: not ``dy``,
    #: not a view of it or of an input, and not one array for two inputs. An op that does not
    #: declare it is taken to possibly return ``dy`` or a view (identities, reshapes, slices), and
    #: the plan copies a parameter gradient that comes straight from such an op, so every
    #: parameter owns its ``.grad`` whatever the graph looks like.
    fresh_grads: ClassVar[bool] = False
    #: Inputs that never receive a gradient (batch-norm running statistics).
    nondiff_inputs: ClassVar[tuple[int, ...]] = ()
    #: Whether forward depends on the train/eval phase or draws random numbers (``self.state``).
    phase_dependent: ClassVar[bool] = False
    #: Whether forward always returns a new array that shares memory with no other array, so
    #: that the plan may let the op that reads it last write its own result into it.
    fresh_output: ClassVar[bool] = False
    #: Inputs whose buffer :meth:`forward_inplace` can overwrite with the output. The plan uses
    #: it only when that input is a fresh array of the output's shape and dtype that nothing
    #: reads afterwards (not backward either).
    inplace_inputs: ClassVar[tuple[int, ...]] = ()
    #: An op that only plans put in place of graph ops (a fusion, see
    #: :func:`nnlayers.graph.fusion.fuse`): nobody builds expressions with it, so it is not in
    #: :data:`REGISTRY` (no op-table, oracle or export entry of its own).
    plan_only: ClassVar[bool] = False

    state: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name and not cls.plan_only:
            REGISTRY[cls.name] = cls

    @classmethod
    def copy_of(cls, op: Op) -> Any:
        """An op of this class (a fusion's plan-only op) with the settings and inferred state
        of the plan's ``op``, whose work it takes over."""
        fused = cls.__new__(cls)
        fused.__dict__.update(vars(op))
        return fused

    def __call__(self, *inputs: Any) -> Expr:
        """Apply this op to expressions (Python numbers and NumPy arrays become constants)."""
        like = next((x for x in inputs if isinstance(x, Expr)), None)
        self._settings = dict(vars(self))
        return Expr(self, tuple(as_expr(x, like) for x in inputs))

    if TYPE_CHECKING:
        # Each op declares these with its own arity.
        infer: Callable[..., Spec]
        forward: Callable[..., Any]
    else:

        def infer(self, *specs: Spec) -> Spec:
            """Output spec from the input specs; raise ``ValueError`` naming the problem."""
            raise NotImplementedError(f"op {self.name!r} has no infer()")

        def forward(self, xp: ArrayNamespace, *inputs: Any) -> Any:
            """The output (and residual, see ``has_residual``) from the input arrays."""
            raise NotImplementedError(f"op {self.name!r} has no forward()")

    def backward(
        self,
        xp: ArrayNamespace,
        dy: Any,
        inputs: tuple[Any, ...],
        output: Any,
        residual: Any,
        needs: tuple[bool, ...],
    ) -> tuple[Any, ...]:
        """One gradient per input (``None`` where not needed)."""
        raise NotImplementedError(f"op {self.name!r} is not differentiable")

    def label_input(self, *specs: Spec) -> tuple[int, int | None] | None:
        """``(input index, number of classes)`` when one input holds integer class labels that
        must lie in ``[0, classes)`` (the graph checks host feeds of it), else None."""
        return None

    def index_input(self, *specs: Spec) -> tuple[int, int] | None:
        """``(input index, axis length n)`` when ``forward`` hands one input to arraycore as
        indices into an axis of length ``n`` (``xp.take``: each in ``[-n, n)``), else None.

        The graph checks host feeds of a placeholder read there (a :class:`FeedError` naming
        it), and in a step whose feed of it is known to be in range (checked on the host that
        step, or by ``fit`` before training) the op runs without arraycore's own check of
        them, which on a device waits for the queue."""
        return None

    #: Whether ``forward`` hands its :meth:`label_input` to an arraycore function that checks
    #: their range itself (``xp.nn.softmax_cross_entropy``, ``xp.nn.one_hot``): where that
    #: check runs on the host anyway, the graph leaves fed labels to it (see ``Graph._feed``).
    arraycore_checks_labels = False

    def forward_inplace(self, xp: ArrayNamespace, k: int, *inputs: Any) -> Any:
        """Forward writing its result into ``inputs[k]`` (one of :attr:`inplace_inputs`)."""
        raise NotImplementedError(f"op {self.name!r} has no forward_inplace()")

    def kept_inputs(self, needs: tuple[bool, ...], n_inputs: int) -> tuple[int, ...]:
        """Inputs backward will read, given which inputs need a gradient."""
        keep = self.keep_inputs
        return tuple(range(n_inputs)) if keep is True else tuple(keep)  # type: ignore[arg-type]

    def attributes(self) -> dict[str, Any]:
        """The op's settings for dumps (``axis=1``): what its constructor stored."""
        settings = getattr(self, "_settings", None)
        return dict(vars(self) if settings is None else settings)


class Unary(Op):
    """An element-wise op of one floating input: same spec out."""

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        return x


class _OutOfPlace:
    """Stands in for ``xp.inplace`` where the target is a 0-d value: NumPy hands 0-d results out
    as immutable scalars, so ``f(*args, out=y)`` computes ``f(*args)`` anew instead."""

    def __init__(self, xp: ArrayNamespace) -> None:
        self._xp = xp

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._xp, name)

        def run(*args: Any, out: Any) -> Any:
            return fn(*args)

        return run


def inplace_on(xp: ArrayNamespace, y: Any) -> Any:
    """``xp.inplace`` for updating ``y``, a new array the caller owns (always reassign the
    result: ``y = ip.add(y, 1.0, out=y)``); for a 0-d ``y`` an out-of-place stand-in."""
    return xp.inplace if y.shape else _OutOfPlace(xp)


def concrete(shape: Any, what: str) -> tuple[int, ...]:
    """A shape a kernel can take: every size known (the plan fixes ``None`` sizes from the feeds
    before any kernel runs, so a ``None`` here is a bug, reported with the op's name)."""
    if any(s is None for s in shape):
        raise RuntimeError(f"{what}: shape {tuple(shape)} is still symbolic at run time")
    return tuple(int(s) for s in shape)


def require_float(op: str, *specs: Spec) -> None:
    """Raise unless every spec is floating point."""
    for s in specs:
        if not s.is_float:
            raise TypeError(f"needs floating-point inputs, got {s.dtype.name}")


def require_same_dtype(**specs: Spec) -> None:
    """Raise unless every named input has one dtype (kernels such as cuDNN's convolutions and
    batch-norm take a single dtype; a float64 filter on float32 images is a mistake to report
    when the graph is built, not a cast to hide)."""
    dtypes = {name: s.dtype for name, s in specs.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {dt.name}" for name, dt in dtypes.items())
        raise TypeError(
            f"needs one floating-point dtype for all its inputs, got {listed}; "
            "cast one with ex.astype(..., dtype) or give the Parameter that dtype"
        )


def result_dtype(*specs: Spec) -> np.dtype:
    """NumPy promotion of the inputs' dtypes."""
    return np.result_type(*(s.dtype for s in specs))


def reduction_plan(
    in_shape: tuple[Any, ...], out_shape: tuple[Any, ...]
) -> tuple[tuple[int, ...], bool]:
    """Axes over which a gradient of ``out_shape`` sums back to ``in_shape``, and whether a
    reshape drops leading axes afterwards."""
    lead = len(out_shape) - len(in_shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(in_shape) if d == 1 and out_shape[lead + i] != 1
    )
    return axes, lead > 0


def unbroadcast(
    xp: ArrayNamespace, g: Any, shape: tuple[Any, ...], plan: tuple[tuple[int, ...], bool]
) -> Any:
    """The gradient ``g`` of a broadcast result, summed back to the input's ``shape``."""
    axes, drop = plan
    if not axes:
        return g
    if drop and len(axes) == len(g.shape) - len(shape):
        # only leading axes go (a bias): summing them away gives the shape directly
        return xp.sum(g, axis=axes)
    g = xp.sum(g, axis=axes, keepdims=True)
    return xp.reshape(g, shape) if drop else g


class Broadcasting(Op):
    """Base of element-wise ops with NumPy broadcasting over all of their inputs.

    ``infer`` records, per input, how to sum a gradient back to its shape (``self.plans``).
    """

    def infer(self, *specs: Spec) -> Spec:
        shape = broadcast_shapes(*(s.shape for s in specs))
        self.in_shapes = tuple(s.shape for s in specs)
        self.plans = tuple(reduction_plan(s.shape, shape) for s in specs)
        return Spec(shape, self.out_dtype(*specs))

    def out_dtype(self, *specs: Spec) -> np.dtype:
        """The result dtype: floating-point promotion of the inputs."""
        require_float(self.name, *specs)
        return result_dtype(*specs)

    def reduce(self, xp: ArrayNamespace, g: Any, i: int) -> Any:
        """Gradient ``g`` summed back to the shape of input ``i``."""
        plan = self.plans[i]
        if not plan[0]:
            return g  # input i has the output's shape (no call in between: the common case)
        return unbroadcast(xp, g, self.in_shapes[i], plan)
