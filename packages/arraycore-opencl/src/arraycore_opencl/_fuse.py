"""``xp.inplace.fuse`` on OpenCL: straight-line in-place update chains as one kernel.

A function fused with ``scalar_operands=True`` (nnlayers' optimiser updates are such functions)
is traced once per signature (its arrays' dtype and which arguments are arrays or scalars): its
``xp.inplace.<op>(a, b, out=c)`` calls are recorded, with ``a``, ``b`` and ``c`` standing for
its arguments, and become one OpenCL kernel in which every array argument is read once into a
register, each call is one line of the op table's kernel expression, and every written argument
is stored once. Scalars are kernel arguments, so a new learning rate needs no new kernel.

What is fused: arguments that are float32 or float64 arrays of one shape and dtype, contiguous
and not overlapping each other, Python scalars, and 0-d arrays of that dtype used as scalars
(read once by each work-item: an optimiser's learning rate kept on the device, so that a new
rate is neither a new kernel nor a new kernel argument); a body made only of ``xp.inplace`` calls of
element-wise ops whose results are of the arrays' dtype, writing into array arguments and
returning nothing. Anything else (temporaries, operators on arrays, other functions, a return
value, half precision, aliased arguments) runs the function as it is, the same numbers one
kernel launch per call. Each op rounds to the arrays' dtype as the plain calls do, and
``FP_CONTRACT`` is off, so fused and plain updates agree to the last bit on the devices tried.

Tracing is :mod:`arraycore._fuse_trace`'s, shared with other backends' fusers.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import arraycore
from arraycore._fuse_trace import Arg, Scalar, Step, Untraceable, trace

from . import _codegen
from ._array import OpenCLArray, contiguous_strides

_FLOATS = {"float32", "float64"}


def source(steps: list[Step], kinds: tuple[str, ...], dtype: str, piece: int = 1) -> str:
    """OpenCL C of one kernel ``fused`` running ``steps`` on arguments of ``kinds``, each
    work-item over ``piece`` consecutive items (the device's element-wise piece)."""
    ct = _codegen.COMPUTE[dtype]
    exprs = {**_codegen._exprs(dtype, 1), **_codegen._exprs(dtype, 2)}
    params = ["const long n"]
    for i, kind in enumerate(kinds):
        if kind == "a":
            params += [f"__global {ct}* a{i}", f"const long o{i}"]
        elif kind == "d":
            params += [f"__global const {ct}* d{i}", f"const long o{i}"]
        else:
            params.append(f"const {ct} s{i}")
    read = sorted({x.index for _, ops, _ in steps for x in ops if isinstance(x, Arg)})
    written = sorted({out for _, _, out in steps})
    body = [f"    const {ct} s{i} = d{i}[o{i}];" for i, kind in enumerate(kinds) if kind == "d"]
    body += [f"    {ct} r{i} = a{i}[o{i} + i];" for i in sorted(set(read) | set(written))]

    def operand(x: Any) -> str:
        if isinstance(x, Arg):
            return f"r{x.index}"
        if isinstance(x, Scalar):
            return f"s{x.index}"
        return f"(({ct}){float(x)!r})"

    for name, ops, out in steps:
        found = exprs.get(name)
        if found is None or found[1]:
            raise Untraceable(f"inplace.{name} has no {dtype} kernel expression of {dtype}")
        names = ("x", "y")[: len(ops)]
        lets = " ".join(f"const {ct} {v} = {operand(x)};" for v, x in zip(names, ops))
        body.append(f"    {{ {lets} r{out} = ({ct})({found[0]}); }}")
    body += [f"    a{i}[o{i} + i] = r{i};" for i in written]
    items = (
        f"    const long lo = get_global_id(0) * {piece};\n    if (lo >= n) return;\n"
        f"    const long hi = min(n, lo + {piece});\n    for (long i = lo; i < hi; ++i) {{\n"
        if piece > 1
        else "    const long i = get_global_id(0);\n    if (i >= n) return;\n    {\n"
    )
    return (
        "#pragma OPENCL FP_CONTRACT OFF\n"
        + _codegen._helpers(dtype)
        + f"__kernel void fused({', '.join(params)}) {{\n"
        + items
        + "\n".join(body)
        + "\n    }\n}\n"
    )


class Fused:
    """``fn`` as one kernel per signature where it can be traced; ``fn`` itself otherwise."""

    def __init__(self, backend: Any, fn: Callable[..., Any]) -> None:
        self.backend = backend
        self.fn = fn
        self.__wrapped__ = fn
        self._kernels: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        plan = None if kwargs else self._signature(args)
        if plan is None:
            return self.fn(*args, **kwargs)
        key, kinds, arrays, dtype = plan
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._lock:
                kernel = self._kernels.get(key)
                if kernel is None:
                    kernel = self._kernels[key] = self._build(kinds, dtype, arrays[0], key[2])
        if kernel is False:
            return self.fn(*args)
        scalar = np.dtype(dtype).type
        n = arrays[0].size
        launch: list[Any] = [np.int64(n)]
        for arg, kind in zip(args, kinds):
            if kind != "s":
                launch += [arg._buf, np.int64(arg._offset)]
            else:
                launch.append(scalar(arg))
        self.backend.rt.launch(kernel, -(-n // key[2]), *launch)
        return None

    def _signature(self, args: tuple[Any, ...]) -> Any:
        kinds: list[str] = []
        arrays: list[OpenCLArray] = []
        scalars: list[OpenCLArray] = []
        for arg in args:
            if isinstance(arg, OpenCLArray) and arg.shape == ():
                kinds.append("d")
                scalars.append(arg)
            elif isinstance(arg, OpenCLArray):
                kinds.append("a")
                arrays.append(arg)
            elif isinstance(arg, int | float) and not isinstance(arg, bool):
                kinds.append("s")
            else:
                return None
        if not arrays:
            return None
        first = arrays[0]
        dtype = first.dtype.name
        if dtype not in _FLOATS or first.size == 0:
            return None
        spans = []
        for a in arrays:
            if a._rt is not self.backend.rt or a.dtype != first.dtype or a.shape != first.shape:
                return None
            if a._strides != contiguous_strides(a.shape):
                return None
            spans.append((id(a._buf), a._offset, a._offset + a.size))
        for d in scalars:  # read-only: they may share memory with each other, not with arrays
            if d._rt is not self.backend.rt or d.dtype != first.dtype:
                return None
            at = (id(d._buf), d._offset)
            if any(buf == at[0] and start <= at[1] < end for buf, start, end in spans):
                return None
        spans.sort()
        for (buf, _, end), (next_buf, start, _) in itertools.pairwise(spans):
            if buf == next_buf and start < end:
                return None  # overlapping arguments: the plain calls see each other's writes
        key = (dtype, tuple(kinds), self.backend.rt.piece)
        return key, tuple(kinds), arrays, dtype

    def _build(self, kinds: tuple[str, ...], dtype: str, like: OpenCLArray, piece: int) -> Any:
        """The kernel for this signature, or False where ``fn`` cannot be traced."""
        try:
            steps = trace(arraycore.namespace_of(like).inplace, self.fn, kinds)
            text = source(steps, kinds, dtype, piece)
        except Untraceable:
            return False
        rt = self.backend.rt
        full = _codegen.preamble(rt.fp64, rt.fp16, cpu_math=rt.cpu_math) + text
        # with its scalar argument types declared, as every kernel of the runtime: pyopencl's
        # generic argument handling cost 120 us a launch on PoCL (an Adam update, 13 arguments)
        return rt.make_kernel(rt.build_source(full), ("source", full), "fused")
