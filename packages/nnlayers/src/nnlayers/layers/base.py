"""``Layer``: a reusable callable on expressions that makes its parameters when first applied.

A layer is configured with sizes that cannot be inferred (``Affine(128)``: 128 outputs) and
learns the rest from the first expression it is applied to (the input width). Applying a layer
again reuses the same parameters (shared weights).
"""

from __future__ import annotations

import copy
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from .. import init as initializers
from ..expr.node import Expr, as_expr
from ..expr.spec import DEFAULT_FLOAT, Spec, format_shape
from ..ops.math import activation as _activation
from ..ops.nn import softmax as _softmax
from ..parameter import Parameter

Activation = Callable[[Expr], Expr]

ACTIVATIONS: dict[str, Activation] = {
    "relu": _activation.relu,
    "tanh": _activation.tanh,
    "sigmoid": _activation.sigmoid,
    "leaky_relu": _activation.leaky_relu,
    "elu": _activation.elu,
    "gelu": _activation.gelu,  # exact, x Phi(x): PyTorch's and Keras's "gelu"
    "gelu_exact": _activation.gelu_exact,  # the same (its name before "gelu" was exact)
    "gelu_tanh": _activation.gelu_tanh,  # PyTorch's gelu(x, approximate="tanh")
    "softplus": _activation.softplus,
    "softmax": _softmax.softmax,
    "log_softmax": _softmax.log_softmax,
}
"""Activations layers accept by name (``Affine(128, activation="relu")``)."""


def get_activation(fn: str | Activation | None) -> Activation | None:
    """An activation from its name, a callable on expressions, or ``None`` (linear)."""
    if fn is None or fn == "linear":
        return None
    if isinstance(fn, str):
        if fn not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {fn!r}; choose one of {', '.join(sorted(ACTIVATIONS))} "
                "or pass a function of an expression"
            )
        return ACTIVATIONS[fn]
    if not callable(fn):
        raise TypeError(f"an activation must be a name or a callable, got {fn!r}")
    return fn


def snake_case(name: str) -> str:
    """``Conv2DTranspose`` -> ``conv2d_transpose``, ``LSTM`` -> ``lstm``."""
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name)
    return re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Layer:
    """Base class of layers: ``h = layer(x)`` builds expressions; parameters appear lazily.

    Subclasses implement :meth:`build` (make parameters with :meth:`add_param` from the input's
    spec; called once, at the first application) and :meth:`forward` (the expression).

    ``name`` prefixes the parameter names (``"affine/weight"``; default: the class name in
    snake case; :class:`nnlayers.models.Model` makes clashing names unique). ``seed`` fixes the
    initial values; without it the layer takes the next seed of :func:`nnlayers.seed`'s sequence
    when it is built.

    :meth:`freeze` (Keras's ``layer.trainable = False``) holds every parameter of the layer and
    its parts fixed for fine-tuning, including those it makes later; a frozen batch-norm layer
    also stops updating its running statistics and normalises with them, as Keras does.

    Parts are tracked as in PyTorch and Keras 3: a layer or :class:`~nnlayers.Parameter`
    assigned to a public attribute (``self.conv1 = Conv2D(8, 3)`` in ``__init__``), or held in
    a list, tuple or dict assigned to one (``self.blocks = [Block(), Block()]``), belongs to
    this layer: its parameters are this layer's, :meth:`freeze` reaches it, and assigning
    the attribute again replaces it. When this layer is first applied, each part not yet
    applied that has no name of its own is named under it (``f"{self.name}/conv1"``,
    ``blocks/0``, ``heads/<key>``), and, if this layer has a ``seed``, each part without one
    gets a seed derived from it and the attribute's path, so a seeded block starts the same
    every run and its parts differ. A :class:`~nnlayers.models.Model` holding two such blocks
    names the second one's parameters ``<name>_1/...``. ``name`` and ``seed`` are accepted by
    every layer's constructor.
    """

    #: public attributes a subclass manages itself and that are not tracked as parts
    _untracked: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, name: str | None = None, seed: int | None = None) -> None:
        state = self.__dict__
        state["_tracked"] = {}  # public attribute -> layer, parameter, list, tuple or dict
        state["_named_by"] = None  # (parent, key) while this layer's name is f"{parent}/{key}"
        state["_adopted"] = False  # whether this layer has named and seeded its parts
        state["name"] = name or snake_case(type(self).__name__)
        state["_name_given"] = name is not None
        self.seed = seed
        self.built = False
        self._params: dict[str, Parameter] = {}
        self._parts: dict[str, Layer] = {}
        self._rng: np.random.Generator | None = None
        self.input_spec: Spec | None = None
        self._frozen = False

    # -- application ------------------------------------------------------------------------
    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        if "_tracked" not in self.__dict__:
            raise TypeError(
                f"{type(self).__name__}.__init__ did not call super().__init__(): call it "
                "first, before assigning attributes"
            )
        if not isinstance(x, Expr) and hasattr(x, "shape") and hasattr(x, "dtype"):
            return self._apply_to_array(x, args, kwargs)
        x = as_expr(x)
        spec = x.spec
        if not self.built:
            self._adopt_parts()
            self._rng = initializers.rng(self.seed)
            self.input_spec = spec
            self.build(spec)
            self.built = True
            self._rng = None
        return self.forward(x, *args, **kwargs)

    def _apply_to_array(self, x: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``layer(array)``: the output computed now, in the eval phase (dropout off,
        batch-norm's running statistics), as a backend array (a tuple of them for a layer of
        several outputs), as Keras's ``layer(x)`` and PyTorch's ``module.eval(); module(x)``
        do. Floating inputs take the dtype of the layer's parameters (float32 for a layer not
        built yet, as Keras casts NumPy's float64), so a layer first called on a NumPy array
        does not build float64 weights. The compiled graph is kept per input shape and dtype
        (a few of them) when there are no other arguments."""
        from ..expr.node import placeholder
        from ..graph.graph import Graph

        dtype = np.dtype(str(x.dtype))
        if dtype.kind == "f":
            own = next((p.dtype for p in self._all_parameters() if p.dtype.kind == "f"), None)
            dtype = own if own is not None else DEFAULT_FLOAT
        key = (tuple(int(d) for d in x.shape), dtype.str)
        cache: dict[Any, Any] = self.__dict__.setdefault("_eager_graphs", {})
        found = cache.get(key) if not args and not kwargs else None
        if found is None:
            source = placeholder(key[0], dtype, name="x")
            out = self(source, *args, **kwargs)
            many = isinstance(out, tuple | list)
            outputs = list(out) if many else [out]
            if not all(isinstance(o, Expr) for o in outputs):
                raise TypeError(
                    f"{type(self).__name__} {self.name!r}: forward returned "
                    f"{type(out).__name__}, not expressions; it cannot run on arrays"
                )
            found = (source, Graph(outputs, wrt=[], training=False), many)
            if not args and not kwargs:
                if len(cache) >= 8:
                    cache.pop(next(iter(cache)))
                cache[key] = found
        source, graph, many = found
        values = graph.forward({source: x}, keep_for_backward=False)
        return tuple(values) if many else values[0]

    def build(self, spec: Spec) -> None:
        """Make the parameters for inputs of ``spec`` (nothing for parameter-free layers)."""

    def forward(self, x: Expr, *args: Any, **kwargs: Any) -> Any:
        """The output expression for input ``x``."""
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    # -- parameters -------------------------------------------------------------------------
    def add_param(
        self,
        name: str,
        shape: tuple[int, ...],
        init: Any,
        *,
        dtype: Any = None,
        trainable: bool = True,
        weight_decay: float | None = None,
        lr_multiplier: float = 1.0,
        fans: tuple[int, int] | None = None,
    ) -> Parameter:
        """Make, register and return the parameter ``<layer name>/<name>`` (call from build).

        ``init`` may also be a :class:`Parameter` or an expression: it is then used as is
        (shared, tied weights) after a shape check.
        """
        if isinstance(init, Expr):
            if tuple(init.shape) != tuple(shape):
                raise ValueError(
                    f"{type(self).__name__} {self.name!r}: the given {name} has shape "
                    f"{format_shape(init.shape)}, the input needs {format_shape(shape)}"
                )
            if isinstance(init, Parameter):
                self._params[name] = init
            return init  # type: ignore[return-value]
        if self._rng is None:
            self._rng = initializers.rng(self.seed)
        p = Parameter.create(
            shape,
            init,
            rng=self._rng,
            fans=fans,
            name=f"{self.name}/{name}",
            dtype=dtype,
            trainable=trainable,
            weight_decay=weight_decay,
            lr_multiplier=lr_multiplier,
        )
        p.owner = self
        if self.__dict__.get("_frozen", False):
            p.freeze()
        self._params[name] = p
        return p

    def add_sublayer(self, key: str, layer: Layer) -> Layer:
        """Make ``layer`` a part of this one (call from build): its parameters become this
        layer's and it is reachable as ``self.<key>``, as in PyTorch. Name it under this
        layer's name (``f"{self.name}/{key}"``) and seed it with :meth:`child_seed`: unlike a
        part assigned as an attribute, it is taken as it is. (Assigning ``self.<key> = layer``
        in ``__init__`` or ``build`` does both for you.)"""
        self._parts[key] = layer
        self.__dict__.pop(key, None)
        self._tracked.pop(key, None)
        object.__setattr__(self, key, layer)
        if self.__dict__.get("_frozen", False):
            layer.freeze()
        return layer

    def child_seed(self, index: int) -> int | None:
        """The seed of part ``index`` of a layer made with ``seed=``: parts of one seeded layer
        start the same every time and differ from each other; ``None`` (the next seed of
        :func:`nnlayers.seed`'s sequence) for an unseeded layer."""
        return None if self.seed is None else self.seed * 7919 + index

    def sublayers(self) -> list[Layer]:
        """The layers this one is made of: those given to :meth:`add_sublayer`, then those
        assigned to its attributes (also in lists, tuples and dicts), each once."""
        found = list(self._parts.values())
        seen = {id(layer) for layer in found}
        seen.add(id(self))
        for _, part in self._tracked_parts():
            if isinstance(part, Layer) and id(part) not in seen:
                seen.add(id(part))
                found.append(part)
        return found

    # -- parts assigned as attributes ---------------------------------------------------------
    def __setattr__(self, key: str, value: Any) -> None:
        state = self.__dict__
        tracked = state.get("_tracked")
        if tracked is None:
            if next(_parts_in(value, key), None) is not None:
                raise AttributeError(
                    f"cannot assign the layer or parameter {key!r} before Layer.__init__() call: "
                    f"call super().__init__() first in {type(self).__name__}.__init__"
                )
            object.__setattr__(self, key, value)
            return
        if key == "name" and "_name_given" in state:
            state["_name_given"] = True  # set explicitly: no longer named under a parent
            state["_named_by"] = None
        if not key.startswith("_") and key not in type(self)._untracked:
            parts = state.get("_parts", {})
            if key in parts:  # replacing a part given to add_sublayer
                if isinstance(value, Layer):
                    parts[key] = value
                    if state.get("_frozen", False):
                        value.freeze()
                    object.__setattr__(self, key, value)
                    return
                del parts[key]
            tracked.pop(key, None)
            if isinstance(value, Layer | Parameter | list | tuple | dict):
                tracked[key] = value
                if state.get("_frozen", False) or state.get("_adopted", False):
                    for path, part in _parts_in(value, key):
                        if state.get("_adopted", False):
                            self._adopt(path, part, set())
                        if state.get("_frozen", False):
                            part.freeze()
        object.__setattr__(self, key, value)

    def __delattr__(self, key: str) -> None:
        self.__dict__.get("_tracked", {}).pop(key, None)
        self.__dict__.get("_parts", {}).pop(key, None)
        object.__delattr__(self, key)

    def _tracked_parts(self) -> Iterator[tuple[str, Layer | Parameter]]:
        """``(path, part)`` for every layer and parameter held by a tracked attribute."""
        for key, value in self.__dict__.get("_tracked", {}).items():
            yield from _parts_in(value, key)

    def _adopt_parts(self) -> None:
        """Name and seed the parts assigned as attributes (at the first application, so the
        names follow this layer's final name); parts assigned later are adopted at once."""
        self.__dict__["_adopted"] = True
        seen: set[int] = set()
        for path, part in list(self._tracked_parts()):
            self._adopt(path, part, seen)

    def _adopt(self, path: str, part: Layer | Parameter, seen: set[int]) -> None:
        if id(part) in seen or part is self:
            return
        seen.add(id(part))
        if isinstance(part, Parameter):
            if part.name is None:
                part.name = f"{self.name}/{path}"
            if part.owner is None:
                part.owner = self
            return
        if part.built or any(part is given for given in self._parts.values()):
            return  # applied already, or given to add_sublayer: taken as it is
        link = part.__dict__.get("_named_by")
        if link is not None and link[0] is not self:
            return  # a part of another layer first (shared): named and seeded there
        if not part.__dict__.get("_name_given", True):
            part.__dict__["name"] = f"{self.name}/{path}"
            part.__dict__["_named_by"] = (self, path)
        if part.seed is None and self.seed is not None:
            part.seed = derived_seed(self.seed, path)

    def _naming_root(self) -> Layer:
        """The outermost layer this one's name was derived from by naming parts under their
        parent (``self`` if none): a model making names unique renames from there, so a
        second block gives ``block_1/conv1/...`` rather than ``block/conv1_1/...``."""
        layer = self
        for _ in range(256):
            link = layer.__dict__.get("_named_by")
            if link is None:
                break
            parent, key = link
            if layer.name != f"{parent.name}/{key}":
                break
            layer = parent
        return layer

    def __deepcopy__(self, memo: dict[int, Any]) -> Layer:
        # a copy keeps its link to a parent only if the parent is copied with it
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key != "_named_by":
                new.__dict__[key] = copy.deepcopy(value, memo)
        link = self.__dict__.get("_named_by")
        if link is not None and id(link[0]) in memo:
            new.__dict__["_named_by"] = (memo[id(link[0])], link[1])
        elif "_named_by" in self.__dict__:
            new.__dict__["_named_by"] = None
        return new

    def _own_parameters(self) -> Iterator[Parameter]:
        yield from self._params.values()
        for _, part in self._tracked_parts():
            if isinstance(part, Parameter):
                yield part

    def _all_parameters(self) -> Iterator[Parameter]:
        seen: set[int] = set()
        for p in self._own_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                yield p
        for layer in self.sublayers():
            for p in layer._all_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

    # -- fine-tuning ------------------------------------------------------------------------
    @property
    def trainable(self) -> bool:
        """False once :meth:`freeze` was called (and not undone); setting it freezes or
        unfreezes, as in Keras."""
        return not self.__dict__.get("_frozen", False)

    @trainable.setter
    def trainable(self, value: bool) -> None:
        if value:
            self.unfreeze()
        else:
            self.freeze()

    def freeze(self) -> Layer:
        """Hold every parameter of this layer and its parts fixed (no gradient, no update; a
        batch-norm layer keeps its running statistics and uses them). Parameters the layer
        makes later are frozen too. Models already built follow at their next step. Returns
        ``self``."""
        self._set_frozen(True)
        return self

    def unfreeze(self) -> Layer:
        """Undo :meth:`freeze` for this layer and its parts. Returns ``self``."""
        self._set_frozen(False)
        return self

    def _set_frozen(self, frozen: bool) -> None:
        self._frozen = frozen
        for p in self._own_parameters():
            p.frozen = frozen
        for layer in self.sublayers():
            layer._set_frozen(frozen)

    @property
    def params(self) -> list[Parameter]:
        """Trainable parameters (empty until the layer has been applied), each listed once."""
        return [p for p in self._all_parameters() if p.trainable]

    @property
    def buffers(self) -> list[Parameter]:
        """Parameters not trained: state (batch-norm running statistics) and frozen weights,
        each listed once."""
        return [p for p in self._all_parameters() if not p.trainable]

    def __getattr__(self, name: str) -> Any:
        # ``layer.weight`` reads the parameter ``weight`` once the layer is built.
        params = self.__dict__.get("_params")
        if params is not None and name in params:
            return params[name]
        if params is not None and not self.__dict__.get("built", False):
            raise AttributeError(
                f"{type(self).__name__} {self.__dict__.get('name')!r} has no attribute "
                f"{name!r} yet: parameters appear when the layer is first applied"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def summary(
        self, input_shape: Any = None, *, print_fn: Callable[[str], Any] = print, **options: Any
    ) -> None:
        """Print a table of this layer and its parts (output shape, parameter count) and the
        totals, as Keras's ``model.summary()``, without running anything. ``input_shape`` is one
        example's shape (no batch axis), needed until the layer has been applied; ``options``
        as :func:`nnlayers.summary` (``depth=``, ``input_dtype=``, ``call_kwargs=``), which
        returns the table instead; ``print_fn`` receives the whole text."""
        from ..summary import summary

        print_fn(str(summary(self, input_shape, **options)))

    def __repr__(self) -> str:
        config = self.config()
        args = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return f"{type(self).__name__}({args})"

    def config(self) -> dict[str, Any]:
        """The settings shown by ``repr`` (subclasses add theirs)."""
        return {"name": self.name}


def derived_seed(seed: int, path: str) -> int:
    """The seed of the part at attribute ``path`` of a layer seeded with ``seed``."""
    key = [int(seed) & 0xFFFFFFFFFFFFFFFF, zlib.crc32(path.encode())]
    state = np.random.SeedSequence(key).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def _parts_in(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Layer | Parameter]]:
    """``(path, part)`` for the layers and parameters in ``value`` and, recursively, in the
    lists, tuples and dicts it holds (``blocks/0``, ``heads/<key>``)."""
    if isinstance(value, Layer | Parameter):
        yield path, value
    elif depth < 8 and isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _parts_in(item, f"{path}/{i}", depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for k, item in value.items():
            yield from _parts_in(item, f"{path}/{k}", depth + 1)


def float_dtype(spec: Spec) -> np.dtype:
    """Parameters follow a floating input's dtype (float64 gradient checks); else float32."""
    return spec.dtype if spec.is_float else DEFAULT_FLOAT


def known(layer: Layer, spec: Spec, axes: tuple[int, ...], what: str) -> tuple[int, ...]:
    """The sizes of ``axes`` of ``spec``, which must be known to build ``layer``."""
    sizes = tuple(spec.shape[a] for a in axes)
    if None in sizes:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r}: needs the {what} of its input to be known, "
            f"got shape {format_shape(spec.shape)}"
        )
    return sizes  # type: ignore[return-value]


def require_ndim(layer: Layer, spec: Spec, ndims: tuple[int, ...], layout: str) -> None:
    """Raise a clear error unless the input has one of ``ndims`` axes."""
    if spec.ndim not in ndims:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r}: needs {layout} inputs, got shape "
            f"{format_shape(spec.shape)}"
        )


def require_images(layer: Layer, spec: Spec) -> None:
    """Raise a clear error unless the input is NCHW images: 4 axes, and not what looks like
    channels-last images (Keras's habit: ``(N, 32, 32, 3)``, a square image in axes 1-2 and 1,
    3 or 4 channels last), which a channels-first layer would silently read as 32 channels of
    32x3 pixels."""
    require_ndim(layer, spec, (4,), "NCHW image")
    _, h, w, c = spec.shape
    if c in (1, 3, 4) and h is not None and h == w and h >= 8:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r}: input {format_shape(spec.shape)} looks "
            f"channels-last (N, H, W, C): axis 3 (of size {c}) looks like the channels and "
            f"axes 1-2 like {h}x{w} images. nnlayers is channels-first (N, C, H, W), as PyTorch: "
            f"give the model input_shape ({c}, {h}, {w}) and feed x.transpose(0, 3, 1, 2)"
        )
