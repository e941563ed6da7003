"""``Plan``: a graph specialised to concrete feed shapes and compiled to flat lists of steps.

Each step is an op's method (or, guarded or spec-checked, a wrapper around it) and integer
slots: no graph walking, no lookups by name when it runs. Each step lists the slots to release right after it, so an intermediate array lives only
until its last reader (in forward, or in backward when backward keeps it).

Gradient accumulation at fan-out: a node's first contribution is stored as is (it may alias
another array). The plan owns the stored gradient when it is a new array nobody else holds (its
op declares ``fresh_grads``, or summed or cast it); otherwise the second contribution is added
into a new array, which the plan then owns. Once owned, later contributions are added in place
(``xp.inplace.add``), and one from an op with ``accumulate_grad`` (a basic slice ``x[key]``) is
added into the slice of the owned gradient, so ``T`` slices of one array cost one zero-filled
gradient and ``T`` slice-sized adds, not ``T`` full-size ones. No array another node still holds
is ever written. A gradient handed back for a ``wrt`` node is copied unless the op that made it
declares ``fresh_grads`` (or summed it), so no two parameters' gradients ever share memory (with
``check_specs`` the plan also asserts that no two are one array).

The step lists are then written out as straight-line Python, one function each for forward
(train and eval) and backward, each compiled at its first call (:attr:`Plan.source` shows them;
a traceback through a step shows its line):
every slot a constant index, every op a global named after it whose method is called directly
(``matmul_2.forward(xp, v[0], v[1])``), so a step costs its op's call and a few subscripts,
with no loop, tuple unpacking, getter or ``partial`` around it (the small MLP's training step:
about 5% fewer interpreter instructions than the loop it replaces).
"""

from __future__ import annotations

import copy
import itertools
import linecache
import weakref
from functools import partial
from typing import TYPE_CHECKING, Any

import arraycore
from arraycore import ArrayNamespace

from ..expr.node import run_infer
from ..expr.spec import Spec
from ..ops.control import Alias
from .analysis import Analysis
from .fusion import fuse, fusion_enabled
from .guard import check_specs_backward, check_specs_forward, guard_backward, guard_forward

if TYPE_CHECKING:
    from .memory import MemoryPlan

ASSIGN, ADD, ADD_INPLACE, ADD_SLICE = 0, 1, 2, 3
_PLAN_IDS = itertools.count()
#: The generated functions of a plan, in the order :attr:`Plan.source` shows them.
_FUNCTIONS = ("forward_train", "forward_eval", "backward")


class Plan:
    """Forward and backward step lists for one set of concrete feed shapes."""

    def __init__(
        self,
        analysis: Analysis,
        shapes: dict[int, tuple[int, ...]],
        xp: ArrayNamespace,
        state: Any,
        guard: bool = False,
        check_specs: bool = False,
        profile: Any = None,
    ) -> None:
        self.analysis = a = analysis
        self.xp = xp
        self.state = state
        self.guard = guard
        self.check_specs = check_specs
        self.profile = profile  # a nnlayers.profiler.Profile timing every step, or None
        n = len(a.nodes)
        self.size = n
        specs: list[Spec] = []
        ops: list[Any] = []
        for i, node in enumerate(a.nodes):
            if node.op is None:
                specs.append(Spec(shapes[i], node.spec.dtype) if i in shapes else node.spec)
                ops.append(None)
                continue
            op = copy.copy(node.op)
            if op.phase_dependent:
                op.state = state
            specs.append(run_infer(op, node, [specs[j] for j in a.inputs[i]]))
            ops.append(op)
        self.specs = specs
        self._graph_key = id(analysis)  # the profile's rows: the graph's nodes, fused or not
        if not guard and fusion_enabled():
            # after inference: the fused ops start from the inferred copies
            self.analysis = fuse(a, ops, specs)
        self.ops = ops
        # guarded or spec-checked steps run through a wrapper callable; otherwise a step names
        # the op's method, which the generated code calls itself
        self._wrapped = guard or check_specs or profile is not None
        self._compile_backward()
        self._compile_forward()
        self._generate()

    # -- compilation ---------------------------------------------------------------------------
    def _compile_backward(self) -> None:
        a, xp, n = self.analysis, self.xp, self.size
        wrt = set(a.wrt)
        self.backward_reads: dict[int, int] = {}  # slot -> last backward step reading it
        contributions = [0] * n
        aliasing = [False] * n  # whether a slot's single contribution may alias another array
        owned = [False] * n  # whether a slot's gradient so far is an array only the plan holds
        steps: list[list[Any]] = []
        for i in reversed(range(n)):
            op = self.ops[i]
            if op is None or not a.on_path[i]:
                continue
            b = len(steps)
            needs = a.needs[i]
            ins = a.inputs[i]
            kept = set(op.kept_inputs(needs, len(ins)))
            # the inputs backward reads (slot n, always None, for the ones it does not keep)
            read = tuple(j if k in kept else n for k, j in enumerate(ins))
            for j in read:
                if j != n:
                    self.backward_reads[j] = b
            if op.keep_output:
                self.backward_reads[i] = b
            actions = []
            for k, j in enumerate(ins):
                if not needs[k]:
                    continue
                contributions[j] += 1
                count = contributions[j]
                scalar = len(self.specs[j].shape) == 0
                cast = self.specs[j].dtype if self.specs[j].dtype != self.specs[i].dtype else None
                fresh = op.fresh_grads or _reduces(op, k) or cast is not None
                accumulate = None
                if count == 1:
                    mode = ASSIGN
                    owned[j] = fresh and not scalar
                elif owned[j]:
                    mode = ADD_INPLACE
                    if cast is None and len(ins) == 1 and len(self.specs[i].shape) > 0:
                        accumulate = getattr(op, "accumulate_grad", None)
                        mode = ADD_SLICE if accumulate is not None else ADD_INPLACE
                else:
                    mode = ADD
                    owned[j] = not scalar
                aliasing[j] = count == 1 and not op.fresh_grads and not _reduces(op, k)
                actions.append((k, j, mode, cast, accumulate))
            # the step's backward: ("backward", needs), op.backward called by the generated code,
            # None where the op's own gradient is dy, added into the slice it read
            # (accumulate_grad), or a wrapper callable
            identity = any(mode == ADD_SLICE for _, _, mode, _, _ in actions)
            backward: Any = None if identity else ("backward", needs)
            if self._wrapped:
                backward = _identity_backward if identity else _bind_backward(op, xp, needs)
                in_specs = [self.specs[i]] if identity else [self.specs[j] for j in ins]
                if self.guard:
                    backward = guard_backward(backward, xp, a.nodes[i], a.nodes, ins)
                if self.check_specs:
                    backward = check_specs_backward(backward, a.nodes[i], self.specs[i], in_specs)
                if self.profile is not None:
                    backward = self._timed(backward, i, "backward")
            # plain first contributions (no cast): a single assignment each in the generated code
            assigns = tuple(
                (k, j) for k, j, mode, cast, _ in actions if mode == ASSIGN and cast is None
            )
            others = tuple(
                (k, j, mode, cast, None if fn is None else partial(fn, xp))
                for k, j, mode, cast, fn in actions
                if mode != ASSIGN or cast is not None
            )
            steps.append(
                [
                    backward,
                    i,
                    read,
                    op.keep_output,
                    tuple(actions),
                    (),
                    i not in wrt,
                    assigns,
                    others,
                ]
            )
        frees: dict[int, list[int]] = {}
        for j, b in self.backward_reads.items():
            frees.setdefault(b, []).append(j)
        for b, step in enumerate(steps):
            step[5] = tuple(frees.get(b, ()))
        self.backward_steps = [tuple(s) for s in steps]
        loss = a.outputs[0]
        self.copy_grad = {w: aliasing[w] or w == loss for w in a.wrt}
        self.wrt_results = tuple((w, self.copy_grad[w]) for w in a.wrt)
        self.contributions = contributions

    def _compile_forward(self) -> None:
        a, xp, n = self.analysis, self.xp, self.size
        last_read: dict[int, int] = {}
        self.readers = [0] * n
        for i in range(n):
            for j in a.inputs[i]:
                last_read[j] = i
                self.readers[j] += 1
        outputs = set(a.outputs)
        self.forward_steps_eval: list[tuple[Any, ...]] = []
        self.forward_steps_train: list[tuple[Any, ...]] = []
        for i, op in enumerate(self.ops):
            if op is None:
                continue
            free_eval = tuple(
                j for j in dict.fromkeys(a.inputs[i]) if last_read[j] == i and j not in outputs
            )
            free_train = tuple(j for j in free_eval if j not in self.backward_reads)
            residual = 0
            if op.has_residual:
                residual = 2 if a.on_path[i] else 1
            for steps, frees in (
                (self.forward_steps_eval, free_eval),
                (self.forward_steps_train, free_train),
            ):
                donor = None if self.guard else self._donor(i, frees)
                # the op's method and its leading arguments, or a wrapper callable
                fn: Any = ("forward", ()) if donor is None else ("forward_inplace", (donor,))
                fed = self._fed_indices(i)
                if self._wrapped or fed is not None:
                    fn = partial(getattr(op, fn[0]), xp, *fn[1])
                    if fed is not None:
                        fn = skip_checked_indices(fn, self.state, fed)
                    if self.guard:
                        fn = guard_forward(fn, xp, a.nodes[i], op.has_residual)
                    if self.check_specs:
                        fn = check_specs_forward(fn, a.nodes[i], self.specs[i], op.has_residual)
                    if self.profile is not None:
                        fn = self._timed(fn, i, "forward")
                phase_residual = residual if steps is self.forward_steps_train else min(residual, 1)
                steps.append((fn, a.inputs[i], i, phase_residual, frees))
        self.release_after_train_forward = tuple(j for j in outputs if j not in self.backward_reads)
        spec = self.specs[a.outputs[0]]
        self.seed = xp.ones(spec.shape, dtype=spec.dtype) if spec.is_float else None

    def _timed(self, fn: Any, i: int, phase: str) -> Any:
        """Step ``fn`` of node ``i`` timed into the active profile's row for it."""
        node = self.analysis.nodes[i]
        shape = "x".join(str(d) for d in self.specs[i].shape) or "scalar"
        label = f"{node.describe()} #{i} ({shape})"
        kind = self._op_title(i)  # the plan's op: a fused one where the plan fused
        return self.profile.wrap(fn, self._graph_key, i, kind, label, phase, self.xp)

    def _fed_indices(self, i: int) -> int | None:
        """The placeholder slot whose values step ``i`` hands arraycore as indices (its op's
        :meth:`~nnlayers.ops.Op.index_input`), if it reads one directly; else None."""
        found = self.ops[i].index_input(*(self.specs[j] for j in self.analysis.inputs[i]))
        if found is None:
            return None
        j: int = self.analysis.inputs[i][found[0]]
        return j if j in self.analysis.placeholders else None

    def _donor(self, i: int, frees: tuple[int, ...]) -> int | None:
        """The input of step ``i`` whose buffer its op may overwrite with its output, if any.

        The input must be a fresh array (its producer says so) with the output's shape and
        dtype, read by this step alone (so no view of it is alive) and by nothing afterwards.
        """
        op, a, specs = self.ops[i], self.analysis, self.specs
        if op.has_residual or not op.inplace_inputs:
            return None
        ins = a.inputs[i]
        k: int
        for k in op.inplace_inputs:
            j = ins[k]
            producer = self.ops[j]
            if (
                j in frees
                and producer is not None
                and producer.fresh_output
                and self.readers[j] == 1
                and len(specs[j].shape) > 0
                and specs[j].shape == specs[i].shape
                and specs[j].dtype == specs[i].dtype
            ):
                return k
        return None

    # -- running ---------------------------------------------------------------------------------
    def run_forward(self, values: list[Any], residuals: list[Any] | None) -> list[Any]:
        """Run forward on ``values`` (sources filled in); returns the outputs.

        With ``residuals`` (a list) it keeps what backward needs; without, it releases every
        intermediate as soon as possible.
        """
        if residuals is None:
            return self._forward_eval(values)  # type: ignore[no-any-return]
        return self._forward_train(values, residuals)  # type: ignore[no-any-return]

    def run_backward(self, values: list[Any], residuals: list[Any], seed: Any = None) -> list[Any]:
        """Gradients of the first output with respect to the ``wrt`` nodes, in ``wrt`` order."""
        result: list[Any] = self._backward(values, residuals, self.seed if seed is None else seed)
        if self.check_specs and len({id(g) for g in result}) < len(result):
            # an op broke its fresh_grads promise (the test suite runs with check_specs on)
            raise AssertionError("spec check: two wrt gradients are one array")
        return result

    # -- the generated functions ------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The Python the plan runs: ``forward_train``, ``forward_eval`` and ``backward``."""
        lines = self._sources_comment()
        for name in _FUNCTIONS:
            lines += ["", *self._function_source(name, {})]
        return "\n".join(lines) + "\n"

    def _function_source(self, name: str, env: dict[str, Any]) -> list[str]:
        """The lines of the generated function ``name``; fills ``env`` with the names it uses."""
        if name == "backward":
            return self._backward_source(env)
        train = name == "forward_train"
        steps = self.forward_steps_train if train else self.forward_steps_eval
        return self._forward_source(name, steps, train, env)

    def _generate(self) -> None:
        """Each generated function is compiled at its first call (a plan that only evaluates
        never compiles backward), in a file of its own for tracebacks."""
        plan = next(_PLAN_IDS)
        first = {}
        for name in _FUNCTIONS:
            filename = f"<nnlayers plan {plan} {name}>.py"
            # tracebacks read the lines from the function's loader (linecache's lazy path),
            # which writes them out again: no copy of the text is kept; linecache's copy, made
            # when a traceback needs it, is dropped with the plan
            weakref.finalize(self, linecache.cache.pop, filename, None)
            first[name] = _FirstCall(self, name, filename)
        self._forward_train: Any = first["forward_train"]
        self._forward_eval: Any = first["forward_eval"]
        self._backward: Any = first["backward"]

    def _compile(self, name: str, filename: str) -> Any:
        """The generated function ``name``, compiled."""
        env: dict[str, Any] = {
            "__builtins__": __builtins__,
            "__name__": filename,
            "__loader__": _SourceLoader(self, name),
            "xp": self.xp,
        }
        text = "\n".join(self._function_source(name, env)) + "\n"
        exec(compile(text, filename, "exec"), env)
        setattr(self, f"_{name}", env[name])
        return env[name]

    def _sources_comment(self) -> list[str]:
        """Comment lines naming the slots the caller fills in (placeholders, parameters)."""
        lines = []
        for i, node in enumerate(self.analysis.nodes):
            if self.ops[i] is None:
                what = node.describe() if hasattr(node, "describe") else type(node).__name__
                what = what if what.isprintable() else type(node).__name__
                lines.append(f"# v[{i}]: {what} {self.specs[i]}")
        return lines

    def _op_title(self, i: int) -> str:
        """The name of slot ``i``'s op (``matmul``)."""
        return str(getattr(self.ops[i], "name", None) or type(self.ops[i]).__name__)

    def _op_name(self, i: int, env: dict[str, Any]) -> str:
        """The global naming slot ``i``'s op in the generated code (``matmul_7``)."""
        name = "".join(c if c.isalnum() else "_" for c in self._op_title(i)).lower()
        # a letter first: the generated code's other globals start with "_"
        name = f"{name if name.isidentifier() and name[0].isalpha() else 'op'}_{i}"
        env[name] = self.ops[i]
        return name

    def _label(self, i: int) -> str:
        """``# <op name>`` for slot ``i``'s line."""
        node = self.analysis.nodes[i]
        own = node.name if isinstance(node.name, str) and node.name.isprintable() else None
        return f"  # {self._op_title(i)}" + (f" {own!r}" if own else "")

    def _forward_source(
        self, name: str, steps: list[tuple[Any, ...]], train: bool, env: dict[str, Any]
    ) -> list[str]:
        a = self.analysis
        lines = [f"def {name}(v, residuals=None):"]
        for fn, ins, out, residual, frees in steps:
            args = [f"v[{j}]" for j in ins]
            if not callable(fn) and type(self.ops[out]) is Alias:  # a fused op's other half
                lines.append(f"    v[{out}] = v[{ins[0]}]{self._label(out)}")
                lines += [f"    v[{j}] = None" for j in frees]
                continue
            if callable(fn):  # guarded or spec-checked
                call = f"_{name}_{out}"
                env[call] = fn
            else:  # the op's method itself: no partial in between
                method, lead = fn
                call = f"{self._op_name(out, env)}.{method}"
                args = ["xp", *map(repr, lead), *args]
            call = f"{call}({', '.join(args)})"
            if residual == 2:
                lines.append(f"    v[{out}], residuals[{out}] = {call}{self._label(out)}")
            elif residual == 1:
                lines.append(f"    v[{out}] = {call}[0]{self._label(out)}")
            else:
                lines.append(f"    v[{out}] = {call}{self._label(out)}")
            lines += [f"    v[{j}] = None" for j in frees]
        lines.append(f"    outputs = [{', '.join(f'v[{j}]' for j in a.outputs)}]")
        if train:
            lines += [f"    v[{j}] = None" for j in self.release_after_train_forward]
        lines.append("    return outputs")
        return lines

    def _backward_source(self, env: dict[str, Any]) -> list[str]:
        xp, n = self.xp, self.size
        env.update(add=xp.add, add_inplace=xp.inplace.add, astype=xp.astype, zeros=xp.zeros)
        lines = ["def backward(v, r, seed):", f"    g = [None] * {n}"]
        lines.append(f"    g[{self.analysis.outputs[0]}] = seed")
        for bwd, out, read, keep, _, frees, clear, assigns, others in self.backward_steps:
            inputs = "".join(("None" if j == n else f"v[{j}]") + ", " for j in read)
            lines.append(f"    dy = g[{out}]")
            if clear:
                lines.append(f"    g[{out}] = None")
            output = f"v[{out}]" if keep else "None"
            args = f"dy, ({inputs}), {output}, r[{out}]"
            if bwd is None or (not callable(bwd) and type(self.ops[out]) is Alias):
                call = "(dy,)"  # a slice's, added into the slice (ADD_SLICE), or an alias's
            elif callable(bwd):  # guarded or spec-checked
                call = f"_backward_{out}({args})"
                env[f"_backward_{out}"] = bwd
            else:  # the op's method itself: no closure in between
                _, needs = bwd
                env[f"_needs_{out}"] = needs
                call = f"{self._op_name(out, env)}.backward(xp, {args}, _needs_{out})"
            lines.append(f"    gs = {call}{self._label(out)}")
            lines.append(f"    r[{out}] = None")
            lines += [f"    g[{j}] = gs[{k}]" for k, j in assigns]
            for k, j, mode, cast, accumulate in others:
                grad = f"gs[{k}]"
                if cast is not None:
                    env[f"_dtype_{out}_{k}"] = cast
                    grad = f"astype({grad}, _dtype_{out}_{k})"
                if mode == ASSIGN:
                    lines.append(f"    g[{j}] = {grad}")
                elif mode == ADD:
                    lines.append(f"    g[{j}] = add(g[{j}], {grad})")
                elif mode == ADD_INPLACE:
                    lines.append(f"    add_inplace(g[{j}], {grad}, out=g[{j}])")
                else:
                    env[f"_accumulate_{out}_{k}"] = accumulate
                    lines.append(f"    _accumulate_{out}_{k}(g[{j}], {grad})")
            lines += [f"    v[{j}] = None" for j in frees]
        results = []
        for w, copied in self.wrt_results:
            spec = self.specs[w]
            env[f"_dtype_{w}"] = spec.dtype
            lines.append(f"    g{w} = g[{w}]")
            lines.append(f"    if g{w} is None:")
            lines.append(f"        g{w} = zeros({tuple(spec.shape)!r}, dtype=_dtype_{w})")
            if copied:
                lines.append("    else:")
                lines.append(f"        g{w} = astype(g{w}, g{w}.dtype, copy=True)")
            results.append(f"g{w}")
        lines.append(f"    return [{', '.join(results)}]")
        return lines

    # -- memory -----------------------------------------------------------------------------------
    def memory_plan(self, train: bool = True) -> MemoryPlan:
        """The bytes one step of this plan holds, step by step, and its peak: the training step
        (``train``: forward keeping what backward reads, then backward) or the evaluation step.
        Worked out from the step lists and specs when asked (nothing is kept, and a step costs
        nothing more); see :mod:`nnlayers.graph.memory` for what is counted."""
        from .memory import memory_plan

        return memory_plan(self, train)

    def peak_memory(self, train: bool = True) -> int:
        """Peak bytes of the arrays held during one step, the parameters and inputs included:
        :attr:`MemoryPlan.total_peak_bytes <nnlayers.graph.memory.MemoryPlan.total_peak_bytes>`
        of :meth:`memory_plan`."""
        return self.memory_plan(train).total_peak_bytes


class _SourceLoader:
    """``get_source`` for linecache: a generated function's text, while its plan lives."""

    def __init__(self, plan: Plan, name: str) -> None:
        self._plan = weakref.ref(plan)
        self._name = name

    def get_source(self, fullname: str) -> str | None:
        plan = self._plan()
        if plan is None:
            return None
        return "\n".join(plan._function_source(self._name, {})) + "\n"


class _FirstCall:
    """Stands for a generated function until its first call, which compiles it (the plan then
    holds the function itself) and runs it."""

    def __init__(self, plan: Plan, name: str, filename: str) -> None:
        self._plan = plan
        self._name, self._filename = name, filename

    def __call__(self, *args: Any) -> Any:
        return self._plan._compile(self._name, self._filename)(*args)


def skip_checked_indices(fn: Any, state: Any, slot: int) -> Any:
    """``fn`` (a step reading placeholder ``slot`` as indices) without arraycore's check of the
    indices in the steps whose feed of ``slot`` is known to be in range (``state``)."""

    def run(*args: Any) -> Any:
        if slot in state.checked_indices:
            with arraycore.checks(False, only="indices"):
                return fn(*args)
        return fn(*args)

    return run


def _bind_backward(op: Any, xp: ArrayNamespace, needs: tuple[bool, ...]) -> Any:
    # Called as backward(dy, inputs, output, residual), all positional (no keyword merging
    # per call, as a partial with needs= would do).
    backward = op.backward

    def run(dy: Any, inputs: Any, output: Any, residual: Any) -> Any:
        return backward(xp, dy, inputs, output, residual, needs)

    return run


def _identity_backward(dy: Any, inputs: Any, output: Any, residual: Any) -> Any:
    """The backward of a slice whose gradient is added into the slice it read (``ADD_SLICE``)."""
    return (dy,)


def _reduces(op: Any, k: int) -> bool:
    """Whether a broadcasting op's gradient for input ``k`` is a sum (a new array, no alias)."""
    plans = getattr(op, "plans", None) if hasattr(op, "reduce") else None
    return bool(plans and plans[k][0])
