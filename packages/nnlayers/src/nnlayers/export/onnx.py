"""ONNX export: the inference graph of a model's outputs, written as one ``.onnx`` file.

:func:`onnx` walks the expression graph in topological order and hands each node to the
converter that :data:`CONVERTERS` lists under its op's name (``"conv2d"``, ``"lstm"``, ...), so
a new op is one entry there (:func:`converter` registers one). The graph is the eval phase's:
dropout is the identity, batch norm uses its running statistics. Placeholders become the
graph's inputs (a size ``None``, the batch axis, becomes a symbolic dimension ``batch``),
parameters become initializers under their own names, and each output gets the name the model
gives it (``probabilities`` for a classifier).

The ``onnx`` and ``onnxruntime`` packages are optional (``pip install "nnlayers[onnx]"``) and
imported only when an export runs. The converters themselves are in :mod:`.onnx_ops`.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import atomic_path
from ..errors import NNLayersError
from ..expr.node import Constant, Expr, Placeholder, infer_specs, placeholder
from ..expr.spec import DEFAULT_FLOAT, Spec, format_shape
from ..graph.topo import topological_order
from ..parameter import Parameter
from .onnx_ops import CONVERTERS, NOT_EXPORTED, Converter, converter

#: The opset :func:`onnx` writes by default (onnxruntime 1.18 and later run it).
DEFAULT_OPSET = 21
#: The oldest opset the converters can write (LayerNormalization appeared in 17).
MIN_OPSET = 17
#: The newest opset the converters are written against.
MAX_OPSET = 25

INSTALL = 'pip install "nnlayers[onnx]"'

__all__ = [
    "CONVERTERS", "DEFAULT_OPSET", "INSTALL", "MAX_OPSET", "MIN_OPSET", "NOT_EXPORTED",
    "Builder", "Converter", "ExportError", "check_against_nnlayers", "converter",
    "describe_node", "import_onnx", "import_onnxruntime", "onnx", "onnx_model",
]  # fmt: skip


class ExportError(NNLayersError, ValueError):
    """A model that cannot be exported: an op without a converter, inputs that do not fit, or an
    exported graph that disagrees with nnlayers (``check=True``)."""


def import_onnx() -> Any:
    """The ``onnx`` package, or an ``ImportError`` that says how to install it."""
    return _import("onnx")


def import_onnxruntime() -> Any:
    """The ``onnxruntime`` package, or an ``ImportError`` that says how to install it."""
    return _import("onnxruntime")


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"ONNX export needs the {name!r} package, which is not installed: {INSTALL} "
            "(installs onnx and onnxruntime)"
        ) from exc


# -- the public functions ----------------------------------------------------------------------
def onnx(
    model: Any,
    path: str | os.PathLike[str],
    example_inputs: Any = None,
    *,
    opset: int = DEFAULT_OPSET,
    check: bool = False,
) -> Path:
    """Write the inference graph of ``model`` to the ONNX file ``path`` (atomically); returns it.

    ``model`` is a :class:`nnlayers.Model` (its named outputs, from the inputs they read: a
    classifier's ``probabilities`` from its ``inputs``), an expression, a list or a dict of
    name -> expression (the placeholders they read are the inputs), or a layer or any function
    of one expression (called on a placeholder shaped like ``example_inputs`` with a ``None``
    batch axis).

    ``example_inputs`` is one array, a sequence of arrays (one per input, in the model's order)
    or a dict keyed by placeholders or their names (which also fixes the inputs' order). It is
    needed for a layer, checked against the inputs otherwise, and with ``check=True`` run
    through onnxruntime and through nnlayers (eval phase), which must agree (within ``1e-4`` of
    the largest value for a float32 graph, ``1e-2`` where it computes in float16) or
    :class:`ExportError` says by how much they differ; nothing is written then.

    ``opset`` is the ONNX operator set (17 to 25). An op without a converter raises
    :class:`ExportError` naming it, the node and the layer it belongs to.

    >>> import numpy as np, nnlayers
    >>> from nnlayers.layers import Affine, Sequential
    >>> net = Sequential([Affine(8, activation="relu"), Affine(3)], seed=0)
    >>> model = nnlayers.Classifier(net, input_shape=(4,))
    >>> x = np.zeros((2, 4), dtype="float32")
    >>> nnlayers.export.onnx(model, "classifier.onnx", x, check=True)  # doctest: +SKIP
    PosixPath('classifier.onnx')
    """
    proto = onnx_model(model, example_inputs, opset=opset, check=check)
    lib = import_onnx()
    with atomic_path(path, label="ONNX model") as temp:
        lib.save_model(proto, os.fspath(temp))
    return Path(os.fspath(path))


def onnx_model(
    model: Any, example_inputs: Any = None, *, opset: int = DEFAULT_OPSET, check: bool = False
) -> Any:
    """The ``onnx.ModelProto`` that :func:`onnx` writes (same arguments, no file).

    >>> import nnlayers.expr as ex
    >>> x = ex.placeholder((None, 3), name="x")
    >>> proto = onnx_model({"y": ex.softmax(ex.relu(x) * 2.0)})
    >>> [n.op_type for n in proto.graph.node]
    ['Relu', 'Mul', 'Softmax', 'Identity']
    >>> [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    ['batch', 3]
    """
    lib = import_onnx()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"ONNX export: opset must be an int from {MIN_OPSET} to {MAX_OPSET}")
    if check and example_inputs is None:
        raise ValueError("ONNX export: check=True needs example_inputs to run")
    inputs, outputs, arrays = _signature(model, example_inputs)
    proto = Builder(lib, opset).build(inputs, outputs)
    lib.checker.check_model(proto)
    if check and arrays is not None:
        check_against_nnlayers(proto, inputs, outputs, arrays)
    return proto


# -- what the model's inputs and outputs are -------------------------------------------------
def _signature(
    model: Any, example_inputs: Any
) -> tuple[list[Placeholder], dict[str, Expr], list[Any] | None]:
    """The placeholders fed (in order), the named outputs, and the example arrays in input
    order (``None`` without examples)."""
    from ..models.model import Model

    keyed = isinstance(example_inputs, Mapping)
    if isinstance(model, Model):
        if not model.outputs:
            raise ExportError(
                f"ONNX export: {type(model).__name__} has no outputs to export; pass the "
                "expressions to export instead (a dict of name -> expression)"
            )
        outputs = dict(model.outputs)
        read = _placeholders(list(outputs.values()))
        inputs = [p for p in model.inputs if any(p is r for r in read)]
        missing = [r for r in read if all(r is not p for p in inputs)]
        if missing:
            names = ", ".join(p.describe() for p in missing)
            raise ExportError(f"ONNX export: the outputs read placeholders not in inputs: {names}")
    elif isinstance(model, Expr | Mapping) or (
        isinstance(model, list | tuple) and all(isinstance(m, Expr) for m in model)
    ):
        outputs = _named_outputs(model)
        inputs = _placeholders(list(outputs.values()))
    elif callable(model):
        if example_inputs is None:
            raise TypeError(
                f"ONNX export: a layer or function ({type(model).__name__}) needs example_inputs "
                "to build its graph from"
            )
        if keyed:
            raise TypeError("ONNX export: give a layer its example_inputs as arrays, not a dict")
        examples = _as_list(example_inputs)
        inputs = [
            placeholder(
                (None, *(int(d) for d in np.shape(a)[1:])),
                _input_dtype(a),
                name="inputs" if len(examples) == 1 else f"inputs{i}",
            )
            for i, a in enumerate(examples)
        ]
        outputs = _named_outputs(model(*inputs))
    else:
        raise TypeError(
            "ONNX export: model must be an nnlayers Model, an expression, a list or dict of "
            f"expressions, or a layer; got {type(model).__name__}"
        )
    if example_inputs is None:
        return inputs, outputs, None
    if keyed:
        inputs, arrays = _keyed(inputs, example_inputs)
    else:
        arrays = _as_list(example_inputs)
    _check_examples(inputs, arrays)
    return inputs, outputs, arrays


def _placeholders(outputs: list[Expr]) -> list[Placeholder]:
    return [n for n in topological_order(outputs) if isinstance(n, Placeholder)]


def _named_outputs(result: Any) -> dict[str, Expr]:
    if isinstance(result, Expr):
        return {result.name or "output": result}
    if isinstance(result, Mapping):
        items = list(result.items())
    elif isinstance(result, list | tuple):
        items = [
            (e.name if isinstance(e, Expr) and e.name else f"output{i}", e)
            for i, e in enumerate(result)
        ]
    else:
        raise TypeError(f"ONNX export: the model gave {type(result).__name__}, not expressions")
    for name, e in items:
        if not isinstance(e, Expr):
            raise TypeError(
                f"ONNX export: output {name!r} is {type(e).__name__}, not an expression"
            )
    names = [str(k) for k, _ in items]
    if len(set(names)) != len(names):
        raise ExportError(f"ONNX export: output names {names} repeat; name the outputs apart")
    return {str(k): e for k, e in items}


def _as_list(examples: Any) -> list[Any]:
    return list(examples) if isinstance(examples, list | tuple) else [examples]


def _input_dtype(array: Any) -> np.dtype:
    """A placeholder's dtype for an example array: float64 becomes float32 (nnlayers' default,
    that of the layers' parameters), anything else keeps its dtype."""
    dt = np.dtype(array.dtype) if hasattr(array, "dtype") else np.asarray(array).dtype
    return DEFAULT_FLOAT if dt.kind == "f" and dt.itemsize > 4 else dt


def _keyed(
    inputs: list[Placeholder], examples: Mapping[Any, Any]
) -> tuple[list[Placeholder], list[Any]]:
    by_name = {p.name: p for p in inputs if p.name}
    order: list[Placeholder] = []
    for key in examples:
        p = by_name.get(key) if isinstance(key, str) else key
        if p is None or all(p is not q for q in inputs):
            known = ", ".join(q.describe() for q in inputs)
            raise ExportError(f"ONNX export: example input {key!r} is not an input ({known})")
        order.append(p)
    left = [p for p in inputs if all(p is not q for q in order)]
    if left:
        raise ExportError("ONNX export: no example for " + ", ".join(p.describe() for p in left))
    return order, list(examples.values())


def _check_examples(inputs: list[Placeholder], arrays: list[Any]) -> None:
    if len(arrays) != len(inputs):
        names = ", ".join(p.describe() for p in inputs)
        raise ExportError(
            f"ONNX export: {len(arrays)} example arrays for {len(inputs)} inputs ({names})"
        )
    for p, a in zip(inputs, arrays, strict=True):
        shape = tuple(int(d) for d in np.shape(a)) if not hasattr(a, "shape") else a.shape
        want = p.spec.shape
        if len(shape) != len(want) or any(w is not None and w != s for w, s in zip(want, shape)):
            raise ExportError(
                f"ONNX export: the example for {p.describe()} has shape {tuple(shape)}, "
                f"expected {format_shape(want)}"
            )


# -- building the ONNX graph -------------------------------------------------------------------
class Builder:
    """Collects the ONNX nodes and initializers of one export; converters call its methods.

    Names: inputs, outputs and parameters keep theirs (made unique), every other tensor is
    named after the node that made it (``logits/MatMul``).
    """

    def __init__(self, lib: Any, opset: int) -> None:
        self.lib = lib
        self.helper = lib.helper
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.taken: set[str] = set()
        self.base = ""
        self.current: Expr | None = None
        self.values: dict[int, str] = {}
        self._cache: dict[Any, str] = {}
        #: tensors of an op's parts by the op's node id and part name (an LSTM's hidden states
        #: and last cell state, which ``lstm_part`` nodes read)
        self.parts: dict[int, dict[str, str]] = {}

    # -- names ------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """``hint``, or ``hint_1``, ``hint_2``... if taken; reserved from now on."""
        name, k = hint, 1
        while name in self.taken:
            name = f"{hint}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def name_of(self, expr: Expr) -> str:
        """The tensor holding ``expr``'s value (an input, an initializer or a node output)."""
        return self.values[id(expr)]

    # -- emitting ---------------------------------------------------------------------------
    def node(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        """Add an ONNX node of one output (attributes given as ``None`` are left out); returns
        the output's name."""
        return self.multi(op_type, inputs, 1, **attrs)[0]

    def multi(self, op_type: str, inputs: Sequence[str], count: int, **attrs: Any) -> list[str]:
        """Add an ONNX node of ``count`` outputs; returns their names."""
        names = [self.fresh(f"{self.base}/{op_type}") for _ in range(count)]
        attributes = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            self.helper.make_node(op_type, list(inputs), names, name=names[0], **attributes)
        )
        return names

    def constant(self, value: np.ndarray, hint: str = "constant") -> str:
        """A new initializer holding ``value`` (a host array)."""
        name = self.fresh(hint)
        array = np.ascontiguousarray(value)
        self.initializers.append(self.lib.numpy_helper.from_array(array, name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (shapes, axes, pads), shared between nodes."""
        key = ("ints", tuple(int(v) for v in values))
        if key not in self._cache:
            self._cache[key] = self.constant(np.asarray(key[1], dtype=np.int64), "ints")
        return self._cache[key]

    def scalar(self, value: float, dtype: Any) -> str:
        """A 0-d constant of ``dtype``, shared between nodes."""
        dt = np.dtype(dtype)
        key = ("scalar", dt.str, repr(value))
        if key not in self._cache:
            self._cache[key] = self.constant(np.asarray(value, dtype=dt), "scalar")
        return self._cache[key]

    def cast(self, name: str, from_dtype: Any, to_dtype: Any) -> str:
        """``name`` converted to ``to_dtype`` (no node when it already has it)."""
        if np.dtype(from_dtype) == np.dtype(to_dtype):
            return name
        return self.node("Cast", [name], to=self.tensor_type(to_dtype))

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool) -> str:
        """``Reduce*`` over ``axes`` (an attribute before opset 18, an input since; ReduceSum's
        since 13)."""
        if not axes:
            return self.node("Identity", [x])
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.node(op_type, [x, self.ints(axes)], keepdims=int(keepdims))
        return self.node(op_type, [x], axes=list(axes), keepdims=int(keepdims))

    def tensor_type(self, dtype: Any) -> int:
        """The ONNX element type of a NumPy dtype."""
        return int(self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))

    def fail(self, problem: str) -> ExportError:
        """An :class:`ExportError` about the node being converted."""
        assert self.current is not None
        return ExportError(describe_node(self.current, problem))

    # -- the whole graph --------------------------------------------------------------------
    def build(self, inputs: list[Placeholder], outputs: dict[str, Expr]) -> Any:
        """The ``ModelProto`` computing ``outputs`` from ``inputs``."""
        helper = self.helper
        roots = list(outputs.values())
        infer_specs(roots)
        for name in outputs:
            self.taken.add(name)
        graph_inputs = []
        for p in inputs:
            name = self.fresh(p.name or "input")
            self.values[id(p)] = name
            graph_inputs.append(self._value_info(name, p.spec))
        for node in topological_order(roots):
            if id(node) in self.values:
                continue
            if isinstance(node, Placeholder):
                raise ExportError(
                    f"ONNX export: the outputs read {node.describe()} {node.spec}, which is "
                    "not among the inputs"
                )
            if isinstance(node, Parameter):
                self.values[id(node)] = self.constant(node.numpy(), node.name or "param")
            elif isinstance(node, Constant):
                self.values[id(node)] = self.constant(
                    _host(node.value, node.spec), node.name or "constant"
                )
            else:
                self._convert(node)
        graph_outputs = []
        for name, expr in outputs.items():
            self.nodes.append(
                helper.make_node("Identity", [self.name_of(expr)], [name], name=f"{name}/Identity")
            )
            graph_outputs.append(self._value_info(name, expr.spec))
        self._prune({o.name for o in graph_outputs})
        graph = helper.make_graph(
            self.nodes, "nnlayers", graph_inputs, graph_outputs, self.initializers
        )
        from .. import __version__

        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(
            graph, opset_imports=opsets, producer_name="nnlayers", producer_version=__version__
        )
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model

    def _convert(self, node: Expr) -> None:
        assert node.op is not None
        fn = CONVERTERS.get(node.op.name)
        if fn is None:
            why = NOT_EXPORTED.get(node.op.name)
            raise ExportError(
                describe_node(
                    node,
                    f"op {node.op.name!r} has no ONNX converter" + (f" ({why})" if why else ""),
                )
                + f"\n  ops that export: {', '.join(sorted(CONVERTERS))}"
            )
        self.current = node
        self.base = self.fresh(node.name or node.op.name)
        self.values[id(node)] = fn(self, node, [self.name_of(i) for i in node.inputs])

    def _value_info(self, name: str, spec: Spec) -> Any:
        dims = [
            (("batch" if i == 0 else f"{name}_{i}") if d is None else d)
            for i, d in enumerate(spec.shape)
        ]
        return self.helper.make_tensor_value_info(name, self.tensor_type(spec.dtype), dims)

    def _prune(self, outputs: set[str]) -> None:
        """Drop the nodes nothing reads (the projection a fused GRU took over) and the
        initializers they alone read."""
        live = set(outputs)
        kept = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.output):
                kept.append(n)
                live.update(i for i in n.input if i)
        self.nodes = kept[::-1]
        self.initializers = [t for t in self.initializers if t.name in live]


def _host(value: Any, spec: Spec) -> np.ndarray:
    """A constant's value as a host array of its spec's dtype."""
    if not isinstance(value, np.ndarray | np.generic):
        import arraycore

        value = arraycore.namespace_of(value).to_numpy(value)
    return np.asarray(value, dtype=spec.dtype)


def describe_node(node: Expr, problem: str) -> str:
    """``ONNX export: <problem>`` at ``node``: its name, the layer its parameters belong to,
    where it was built and its inputs."""
    layers: list[Any] = []
    for i in node.inputs:
        owner = i.owner if isinstance(i, Parameter) else None
        if owner is not None and all(owner is not o for o in layers):
            layers.append(owner)
    lines = [f"ONNX export: {problem} ({node.describe()} {node.spec})"]
    for owner in layers:
        lines.append(f"  in layer {owner.name!r} ({type(owner).__name__})")
    site = node.where_built()
    if site:
        lines.append(f"  built at {site}")
    for k, i in enumerate(node.inputs):
        lines.append(f"  input {k}: {i.describe()} {i.spec}")
    return "\n".join(lines)


# -- checking an export against nnlayers ------------------------------------------------------
def check_against_nnlayers(
    proto: Any, inputs: list[Placeholder], outputs: dict[str, Expr], arrays: list[Any]
) -> dict[str, float]:
    """Run ``arrays`` through onnxruntime and through nnlayers in the eval phase; raise
    :class:`ExportError` where an output differs by more than the dtype's tolerance. Returns the
    largest absolute difference per output."""
    from ..graph.graph import Graph

    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {
        i.name: _host(a, p.spec)
        for i, p, a in zip(session.get_inputs(), inputs, arrays, strict=True)
    }
    got = session.run(list(outputs), feeds)
    graph = Graph(list(outputs.values()), wrt=[], training=False)
    values = graph.forward(dict(zip(inputs, arrays, strict=True)), keep_for_backward=False)
    differences = {}
    rtol = _tolerance(list(outputs.values()))
    for (name, expr), theirs, ours in zip(outputs.items(), got, values, strict=True):
        want = np.asarray(graph.xp.to_numpy(ours))
        differences[name] = difference = _difference(theirs, want)
        if not _close(theirs, want, expr.spec.dtype, rtol):
            raise ExportError(
                f"ONNX export: onnxruntime's {name!r} differs from nnlayers' by up to "
                f"{difference:.3g} (shape {want.shape}, {want.dtype})"
            )
    return differences


def _difference(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return math.inf
    if a.size == 0 or a.dtype.kind not in "fc":
        return 0.0 if np.array_equal(a, b) else math.inf
    return float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))


def _close(a: np.ndarray, b: np.ndarray, dtype: np.dtype, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    if dtype.kind != "f":
        return bool(np.array_equal(a, b))
    scale = float(np.max(np.abs(b), initial=0.0)) if b.size else 0.0
    return bool(np.allclose(a, b, rtol=rtol, atol=rtol * max(scale, 1e-3), equal_nan=True))


def _tolerance(outputs: list[Expr]) -> float:
    """The relative tolerance of a graph: that of the narrowest floating dtype it computes in
    (float16 under a mixed-precision policy, even where the outputs are float32)."""
    sizes = [n.dtype.itemsize for n in topological_order(outputs) if n.dtype.kind == "f"]
    return {2: 1e-2, 4: 1e-4}.get(min(sizes, default=8), 1e-9)
