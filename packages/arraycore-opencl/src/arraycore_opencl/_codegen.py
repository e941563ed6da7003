"""OpenCL C source of the backend's kernels, generated per (family, dtype).

One *program* holds every kernel of one family for one dtype (``("ew", "float32")`` holds all
element-wise ops on float32). Kernels take shapes and strides as arguments (a small ``long``
buffer, ``meta``), never as compile-time constants, so the number of distinct kernels is fixed
by (op, dtype) and does not grow with the shapes a program meets. PoCL compiles a program on
first use and caches the binary in ``POCL_CACHE_DIR``.
"""

from __future__ import annotations

from arraycore.backend import ELEMENTWISE, kernel_expression

#: OpenCL C storage type of each arraycore dtype (bool is stored as one byte, 0 or 1).
CTYPES: dict[str, str] = {
    "bool": "uchar",
    "int8": "char",
    "int16": "short",
    "int32": "int",
    "int64": "long",
    "uint8": "uchar",
    "uint16": "ushort",
    "uint32": "uint",
    "uint64": "ulong",
    "float16": "half",
    "float32": "float",
    "float64": "double",
}

#: Type arithmetic runs in (half computes in float, as NumPy does).
COMPUTE: dict[str, str] = {**CTYPES, "float16": "float"}

INT_MIN: dict[str, str] = {
    "bool": "0",
    "int8": "CHAR_MIN",
    "int16": "SHRT_MIN",
    "int32": "INT_MIN",
    "int64": "LONG_MIN",
    "uint8": "0",
    "uint16": "0",
    "uint32": "0",
    "uint64": "0",
}
INT_MAX: dict[str, str] = {
    "bool": "1",
    "int8": "CHAR_MAX",
    "int16": "SHRT_MAX",
    "int32": "INT_MAX",
    "int64": "LONG_MAX",
    "uint8": "UCHAR_MAX",
    "uint16": "USHRT_MAX",
    "uint32": "UINT_MAX",
    "uint64": "ULONG_MAX",
}

FLOATS = frozenset({"float16", "float32", "float64"})
_ITEMSIZE = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
             "uint32": 4, "uint64": 8, "float16": 2, "float32": 4, "float64": 8}  # fmt: skip
SIGNED = frozenset({"int8", "int16", "int32", "int64"})


#: Float functions for CPU devices, where PoCL's library computes them with a scalar call per
#: item (1M float32 items: ``tanh`` 8.3 ms, ``log`` 8-10 ms, against 0.6-1.3 for ``exp``);
#: these vectorise with the rest of the kernel. Both follow Cephes' single-precision methods and
#: are tested over every binade (``tests/test_cpu_math.py``): ``tanh`` an odd polynomial below
#: |x| = 0.625, ``1 - 2 / (exp(2|x|) + 1)`` above (no cancellation there, ``tanh >= 0.55``),
#: within 1.3 ulp of the correctly rounded value and exact at +-0, +-inf (PoCL's library is one
#: ulp short of 1 there) and NaN; ``log`` from the exponent and mantissa bits (subnormals scaled
#: first), a polynomial in ``m - 1`` for ``m`` in [sqrt(1/2), sqrt(2)) and ``log 2`` in two
#: parts, within 0.8 ulp, ``log(1) = 0`` exactly, ``-inf`` at +-0, NaN below 0. The OpenCL
#: limits are 5 and 3 ulp. ``float64`` and ``half`` keep the device's functions.
_CPU_MATH = {
    "tanh": """float __attribute__((overloadable)) ac_tanh(float x) {
    #pragma OPENCL FP_CONTRACT OFF
    const float a = fabs(x), z = x * x;
    const float p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
                      + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    const float t = a < 0.625f ? p : 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
    return copysign(t, x);
}""",
    "log": """float __attribute__((overloadable)) ac_log(float x) {
    #pragma OPENCL FP_CONTRACT OFF
    const int sub = x < 1.17549435e-38f;
    const int bits = as_int(sub ? x * 8388608.0f : x);
    const float mant = as_float((bits & 0x007fffff) | 0x3f000000); /* mantissa in [0.5, 1) */
    const int low = mant < 0.70710678f;
    const float m = low ? mant + mant - 1.0f : mant - 1.0f;
    const float e = (float)(((bits >> 23) & 0xff) - (sub ? 149 : 126) - low);
    const float z = m * m;
    float y = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m
                   - 1.2420140846e-1f) * m + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m
                 + 2.0000714765e-1f) * m - 2.4999993993e-1f) * m + 3.3333331174e-1f) * m * z;
    y += -2.12194440e-4f * e;
    y += -0.5f * z;
    const float r = (m + y) + 0.693359375f * e;
    return x > 0.0f && x < INFINITY ? r : (x == 0.0f ? -INFINITY : (x == INFINITY ? x : NAN));
}""",
}


def preamble(fp64: bool, fp16: bool, pieces: bool = False, cpu_math: bool = False) -> str:
    """Extension pragmas for the device; ``AC_PIECES`` defined where element-wise work-items
    take pieces of rows (CPU devices: :func:`_strided_kernel`); with ``cpu_math``, the float
    functions of :data:`_CPU_MATH` replace the library's (CPU devices, where those are slow)."""
    lines = ["#define AC_PIECES 1"] if pieces else []
    if fp64:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    if fp16:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    if cpu_math:
        for name, body in _CPU_MATH.items():
            lines.append(body)
            for on, t in ((fp64, "double"), (fp16, "half")):
                if on:
                    lines.append(
                        f"{t} __attribute__((overloadable)) ac_{name}({t} x) {{ return {name}(x); }}"
                    )
            # PoCL's headers define these names as macros
            lines += [f"#undef {name}", f"#define {name} ac_{name}"]
    return "\n".join(lines) + "\n"


# -- element-wise ---------------------------------------------------------------------------------
def dtype_class(dt: str) -> str:
    """The op table's kernel class of a dtype: ``float``, ``signed``, ``unsigned`` or ``bool``."""
    if dt in FLOATS:
        return "float"
    if dt in SIGNED:
        return "signed"
    return "bool" if dt == "bool" else "unsigned"


#: Expressions for float16 where computing in float (half's compute type) is not half's answer:
#: the next representable value after a half is a half step, not a float step.
_HALF_EXPRS = {"nextafter": "(float)nextafter((half)x, (half)y)"}


def _exprs(dt: str, arity: int) -> dict[str, tuple[str, bool]]:
    """op -> (C expression of ``x`` (and ``y``), whether the result is bool), for every primitive
    of the op table with a kernel expression for ``dt``'s class."""
    words = {"ct": COMPUTE[dt], "bits": str(8 * _ITEMSIZE[dt])}
    out = {}
    for op in ELEMENTWISE:
        if op.primitive and op.arity == arity:
            expr = kernel_expression(op, dtype_class(dt))
            if dt == "float16" and op.name in _HALF_EXPRS:
                expr = _HALF_EXPRS[op.name]
            if expr is not None:
                out[op.name] = (expr.format(**words), op.result == "bool")
    return out


def _helpers(dt: str) -> str:
    """Helper functions: NumPy's floor division, remainder and integer power."""
    ct = COMPUTE[dt]
    if dt == "bool":
        return ""
    if dt in FLOATS:
        return f"""
static {ct} floordiv_{ct}({ct} a, {ct} b) {{
    if (b == ({ct})0) return a / b;
    {ct} mod = fmod(a, b);
    {ct} div = (a - mod) / b;
    if (mod != ({ct})0 && ((b < ({ct})0) != (mod < ({ct})0))) div -= ({ct})1;
    if (div != ({ct})0) {{
        {ct} fl = floor(div);
        if (div - fl > ({ct})0.5) fl += ({ct})1;
        return fl;
    }}
    return copysign(({ct})0, a / b);
}}
static {ct} pymod_{ct}({ct} a, {ct} b) {{
    {ct} mod = fmod(a, b);
    if (b == ({ct})0) return mod;
    if (mod != ({ct})0) {{
        if ((b < ({ct})0) != (mod < ({ct})0)) mod += b;
        return mod;
    }}
    return copysign(({ct})0, b);
}}
static {ct} logaddexp_{ct}({ct} a, {ct} b) {{
    if (a == b) return a + ({ct})0.6931471805599453;
    const {ct} d = a - b;
    if (d > ({ct})0) return a + log1p(exp(-d));
    if (d <= ({ct})0) return b + log1p(exp(d));
    return d;
}}
"""
    # b == -1 is handled apart: MIN / -1 traps on x86 (NumPy gives MIN, or 0 for the remainder).
    neg = "if (b == -1) return ({ct})(-a);" if dt in SIGNED else ""
    negm = "if (b == -1) return 0;" if dt in SIGNED else ""
    return f"""
static {ct} ifloordiv_{ct}({ct} a, {ct} b) {{
    if (b == 0) return 0;
    {neg.format(ct=ct)}
    {ct} q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
static {ct} imod_{ct}({ct} a, {ct} b) {{
    if (b == 0) return 0;
    {negm}
    {ct} r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
static {ct} ipow_{ct}({ct} a, {ct} b) {{
    {ct} r = 1;
    while (b > 0) {{
        if (b & 1) r *= a;
        a *= a;
        b >>= 1;
    }}
    return r;
}}
"""


def _strided_kernel(name: str, out_t: str, ins: list[tuple[str, str]], body: str) -> str:
    """An element-wise kernel over one output and ``ins`` (type, value name) operands.

    Arguments: ``n`` work-items, ``nd`` axes, ``meta`` = shape, then the strides of the output
    and of each input (in elements), then ``C``; then ``out, out_offset, in0, in0_offset, ...``.
    ``body`` reads ``a{i}[p{i}]`` and writes ``out[po]``.

    GPUs: work-item ``i`` takes item ``i`` (neighbouring work-items read neighbouring items), its
    offsets from its index on every axis. CPU devices (``AC_PIECES``, see :func:`preamble`):
    each work-item takes ``C`` consecutive items of a row of the last axis (a row's ``ceil(L /
    C)`` pieces are consecutive work-items), so the outer axes' index arithmetic (64-bit
    divisions) is paid once per piece and the items' offsets step by the last axis' strides;
    on PoCL a work-item costs far more than an item (a contiguous 1M-item add 0.94 -> 0.13
    ms, a channel's bias over 32x32x32x32 3.2 -> 0.43 ms).
    """
    args = [f"__global {out_t}* out", "const long o_off"]
    for i, (t, _v) in enumerate(ins):
        args += [f"__global const {t}* a{i}", f"const long off{i}"]
    k = len(ins)

    def walk(prefix: str, top: str) -> str:
        """Offsets ``{prefix}o``, ``{prefix}0``, ... of index ``rem`` over axes ``top``..0."""
        names = [f"{prefix}o"] + [f"{prefix}{i}" for i in range(k)]
        starts = ["o_off"] + [f"off{i}" for i in range(k)]
        inits = " ".join(f"long {v} = {o};" for v, o in zip(names, starts, strict=True))
        step = " ".join(f"{v} += c * meta[{j + 1} * nd + d];" for j, v in enumerate(names))
        first = " ".join(f"{v} += rem * meta[{j + 1} * nd];" for j, v in enumerate(names))
        return f"""{inits}
    for (int d = {top}; d > 0; --d) {{
        const long s = meta[d];
        const long c = rem % s;
        rem /= s;
        {step}
    }}
    {first}"""

    names = ["o"] + [str(i) for i in range(k)]
    strides = " ".join(f"const long s{v} = meta[{j + 2} * nd - 1];" for j, v in enumerate(names))

    def loop(fixed: str | None, inplace: bool = False) -> str:
        """The loop over the piece's items; input ``fixed`` broadcast along the row (stride 0)
        is read at one offset, and with ``inplace`` input 0 is read where the output is
        written. The compiler vectorises a loop whose symbolic strides turn out to be 1 and
        whose output does not overlap its inputs (it versions the loop on both); a stride of 0
        and an in-place operand each took the scalar version: on PoCL a ReLU's ``maximum(x,
        0)`` 440 us and its in-place form 420 us, against 230 us for two arrays."""
        along = " ".join(
            f"const long p{v} = b{v};" if v == fixed else f"const long p{v} = b{v} + j * s{v};"
            for v in names
            if not (inplace and v == "0")
        )
        text = body.replace("a0[p0]", "out[po]") if inplace else body
        return f"for (long j = lo; j < hi; ++j) {{ {along} {text} }}"

    pieces = " else ".join(f"if (s{i} == 0) {{ {loop(str(i))} }}" for i in range(k))
    pieces = f"{pieces} else {{ {loop(None)} }}" if k else loop(None)
    if k and "a0[p0]" in body and ins[0][0] == out_t:
        # input 0 is the output itself (x op= y): one pointer for both
        same = "(__global const void*)a0 == (__global const void*)out && b0 == bo && s0 == so"
        alone = (
            loop(None, True)
            if k == 1
            else (f"if (s1 == 0) {{ {loop('1', True)} }} else {{ {loop(None, True)} }}")
        )
        pieces = f"if ({same}) {{ {alone} }} else {pieces}"
    return f"""
__kernel void {name}(const long n, const int nd, __global const long* meta, {", ".join(args)}) {{
    const long gid = get_global_id(0);
    if (gid >= n) return;
#ifdef AC_PIECES
    const long L = meta[nd - 1];
    const long C = meta[{k + 2} * nd];
    const long pieces = (L + C - 1) / C;
    long rem = gid / pieces;
    const long lo = (gid - rem * pieces) * C;
    const long hi = min(L, lo + C);
    {walk("b", "nd - 2")}
    {strides}
    {pieces}
#else
    long rem = gid;
    {walk("p", "nd - 1")}
    {body}
#endif
}}
"""


def elementwise_program(dt: str, all_dtypes: list[str]) -> str:
    """Unary, binary and ``where`` kernels of one dtype."""
    t, ct = CTYPES[dt], COMPUTE[dt]
    parts = [_helpers(dt)]
    for op, (expr, boolean) in sorted(_exprs(dt, 1).items()):
        out_t = "uchar" if boolean else t
        body = f"const {ct} x = ({ct})a0[p0]; out[po] = ({out_t})({expr});"
        parts.append(_strided_kernel(f"u_{op}", out_t, [(t, "x")], body))
    for op, (expr, boolean) in sorted(_exprs(dt, 2).items()):
        out_t = "uchar" if boolean else t
        body = (
            f"const {ct} x = ({ct})a0[p0]; const {ct} y = ({ct})a1[p1]; "
            f"out[po] = ({out_t})({expr});"
        )
        parts.append(_strided_kernel(f"b_{op}", out_t, [(t, "x"), (t, "y")], body))
    parts.append(
        _strided_kernel(
            "where",
            t,
            [("uchar", "c"), (t, "x"), (t, "y")],
            "out[po] = a0[p0] ? a1[p1] : a2[p2];",
        )
    )
    return "\n".join(parts)


def _cast_expr(src: str, dst: str) -> str:
    """``x`` (of dtype ``src``) converted to ``dst`` as NumPy converts it."""
    t = CTYPES[dst]
    if dst == "bool":
        return "(uchar)(x != 0)"
    if src in FLOATS and dst not in FLOATS:
        return f"({t})(long)x"
    if src == "float16" or dst == "float16":
        return f"({t})(float)x"
    return f"({t})x"


def cast_program(src: str, all_dtypes: list[str]) -> str:
    """Kernels converting ``src`` to every dtype (``cast_<dst>``; to itself: a strided copy)."""
    parts = []
    for dst in all_dtypes:
        body = f"const {CTYPES[src]} x = a0[p0]; out[po] = {_cast_expr(src, dst)};"
        parts.append(_strided_kernel(f"cast_{dst}", CTYPES[dst], [(CTYPES[src], "x")], body))
    return "\n".join(parts)


# -- reductions -----------------------------------------------------------------------------------
def _reduce_ops(dt: str) -> dict[str, tuple[str, str]]:
    """op -> (initial accumulator, update of ``acc`` with ``v``)."""
    ct = COMPUTE[dt]
    if dt in FLOATS:
        lo, hi = f"({ct})(-INFINITY)", f"({ct})INFINITY"
        vmax = "acc = (v > acc || isnan(v)) ? v : acc;"
        vmin = "acc = (v < acc || isnan(v)) ? v : acc;"
    else:
        lo, hi = INT_MIN[dt], INT_MAX[dt]
        vmax = "acc = v > acc ? v : acc;"
        vmin = "acc = v < acc ? v : acc;"
    return {
        "sum": (f"({ct})0", "acc += v;"),
        "prod": (f"({ct})1", "acc *= v;"),
        "max": (lo, vmax),
        "min": (hi, vmin),
        "any": (f"({ct})0", f"acc = (acc != ({ct})0 || v != ({ct})0) ? ({ct})1 : ({ct})0;"),
        "all": (f"({ct})1", f"acc = (acc != ({ct})0 && v != ({ct})0) ? ({ct})1 : ({ct})0;"),
    }


_OFFSET_FN = """
static long strided_offset(long idx, const int nd, __global const long* shape,
                           __global const long* strides) {
    long off = 0;
    for (int d = nd - 1; d > 0; --d) {
        const long s = shape[d];
        off += (idx % s) * strides[d];
        idx /= s;
    }
    if (nd > 0) off += idx * strides[0];
    return off;
}
"""


#: Consecutive outputs a work-item of ``red_<op>_cols`` takes (a column reduction on a CPU).
RED_COLS = 16


def reduce_program(dt: str, all_dtypes: list[str]) -> str:
    """``red_<op>``: rows of kept axes, each reducing a chunk of the reduced axes; arg-reduce.

    ``meta`` = kept shape (nk), kept strides (nk), reduced shape (nr), reduced strides (nr).
    Work-item ``j`` of ``m = rows * chunks`` reduces chunk ``j % chunks`` of row ``j / chunks``
    into ``out[j]``; a second launch over the partial results finishes long reductions.
    """
    t, ct = CTYPES[dt], COMPUTE[dt]
    parts = [_OFFSET_FN, f"#define RED_COLS {RED_COLS}"]
    for op, (init, update) in sorted(_reduce_ops(dt).items()):
        parts.append(f"""
__kernel void red_{op}(const long m, const long chunks, const long chunk, const long k,
                       const int nk, const int nr, __global const long* meta,
                       __global {t}* out, __global const {t}* a, const long a_off) {{
    const long j = get_global_id(0);
    if (j >= m) return;
    const long row = j / chunks;
    const long start = (j % chunks) * chunk;
    const long stop = min(k, start + chunk);
    const long base = a_off + strided_offset(row, nk, meta, meta + nk);
    {ct} acc = {init};
    if (nr == 1) {{
        const long st = meta[2 * nk + 1];
        for (long r = start; r < stop; ++r) {{
            const {ct} v = ({ct})a[base + r * st];
            {update}
        }}
    }} else {{
        for (long r = start; r < stop; ++r) {{
            const {ct} v = ({ct})a[base + strided_offset(r, nr, meta + 2 * nk, meta + 2 * nk + nr)];
            {update}
        }}
    }}
    out[j] = ({t})acc;
}}
""")
        lane = update.replace("acc", "acc[l]")
        parts.append(f"""
__kernel void red_{op}_cols(const long n, const long chunks, const long chunk, const long k,
                            const long st, __global {t}* out, __global const {t}* a,
                            const long a_off) {{
    /* The kept axis contiguous, one reduced axis (a column sum): each work-item takes
       RED_COLS consecutive outputs and walks the rows of its chunk, each output summed in the
       same order as red_{op} would (same bits), the loads of a row consecutive. */
    const long gid = get_global_id(0), piece = gid / chunks, c = gid - piece * chunks;
    const long j0 = piece * RED_COLS;
    if (j0 >= n) return;
    const long len = min((long)RED_COLS, n - j0);
    const long start = c * chunk, stop = min(k, start + chunk);
    {ct} acc[RED_COLS];
    for (int l = 0; l < RED_COLS; ++l) acc[l] = {init};
    for (long r = start; r < stop; ++r) {{
        __global const {t}* row = a + a_off + r * st + j0;
        if (len == RED_COLS) {{
            for (int l = 0; l < RED_COLS; ++l) {{ const {ct} v = ({ct})row[l]; {lane} }}
        }} else {{
            for (int l = 0; l < len; ++l) {{ const {ct} v = ({ct})row[l]; {lane} }}
        }}
    }}
    for (int l = 0; l < len; ++l) out[(j0 + l) * chunks + c] = ({t})acc[l];
}}
""")
    for op, cmp in (("argmax", ">"), ("argmin", "<")):
        nan_best = "if (isnan(best)) break;" if dt in FLOATS else ""
        better = f"(v {cmp} best || isnan(v))" if dt in FLOATS else f"v {cmp} best"
        parts.append(f"""
__kernel void {op}(const long m, const long k, const long st, const int nk,
                   __global const long* meta, __global long* out, __global const {t}* a,
                   const long a_off) {{
    const long j = get_global_id(0);
    if (j >= m) return;
    const long base = a_off + strided_offset(j, nk, meta, meta + nk);
    {ct} best = ({ct})a[base];
    long bi = 0;
    for (long r = 1; r < k; ++r) {{
        {nan_best}
        const {ct} v = ({ct})a[base + r * st];
        if ({better}) {{ best = v; bi = r; }}
    }}
    out[j] = bi;
}}
""")
    return "\n".join(parts)


# -- gather, scatter, matmul ------------------------------------------------------------------------
def index_program(dt: str, all_dtypes: list[str]) -> str:
    """``take``, ``scatter_add`` and a plain strided batched ``matmul``.

    The plain matmul serves integer dtypes, and small float products, where CLBlast's per-call
    setup costs more than the product itself.
    """
    t, ct = CTYPES[dt], COMPUTE[dt]
    return (
        _OFFSET_FN
        + f"""
__kernel void take(const long n, const int nd, const int axis, __global const long* meta,
                   __global {t}* out, __global const {t}* a, const long a_off,
                   __global const long* idx, const long i_off) {{
    const long gid = get_global_id(0);
    if (gid >= n) return;
    long rem = gid;
    long p = a_off;
    for (int d = nd - 1; d >= 0; --d) {{
        const long s = meta[d];
        const long c = rem % s;
        rem /= s;
        p += (d == axis ? idx[i_off + c] : c) * meta[nd + d];
    }}
    out[gid] = a[p];
}}

/* take along an axis of a C-contiguous array viewed as (outer, n, inner): a 2-D range of
   (inner, indices), each work-item one item of each outer slice, no division (an embedding
   lookup's rows as vectors on a CPU device) */
__kernel void take_rows(const long inner, const long n, const long n_idx, const long outer,
                        __global {t}* out, __global const {t}* a, const long a_off,
                        __global const long* idx, const long i_off) {{
    const long j = get_global_id(0), i = get_global_id(1);
    if (j >= inner) return;
    const long src = idx[i_off + i] * inner + j, dst = i * inner + j;
    for (long o = 0; o < outer; ++o)
        out[o * n_idx * inner + dst] = a[a_off + o * n * inner + src];
}}

__kernel void scatter_add(const long m, const int nd, const int axis, const long n_idx,
                          __global const long* meta, __global {t}* out, const long o_off,
                          __global const {t}* v, const long v_off,
                          __global const long* idx, const long i_off) {{
    const long gid = get_global_id(0);
    if (gid >= m) return;
    const long po = o_off + strided_offset(gid, nd, meta, meta + nd);
    const long pv = v_off + strided_offset(gid, nd, meta, meta + 2 * nd);
    const long so = meta[nd + axis];
    const long sv = meta[2 * nd + axis];
    for (long i = 0; i < n_idx; ++i) {{
        const long q = po + idx[i_off + i] * so;
        out[q] = ({t})(({ct})out[q] + ({ct})v[pv + i * sv]);
    }}
}}

__kernel void matmul(const long batch, const long mr, const long nc, const long kk,
                     __global {t}* out, __global const {t}* a, const long a_off,
                     const long a_bs, const long a_rs, const long a_cs,
                     __global const {t}* b, const long b_off,
                     const long b_bs, const long b_rs, const long b_cs) {{
    const long gid = get_global_id(0);
    if (gid >= batch * mr * nc) return;
    const long col = gid % nc;
    const long row = (gid / nc) % mr;
    const long bt = gid / (nc * mr);
    const long pa = a_off + bt * a_bs + row * a_rs;
    const long pb = b_off + bt * b_bs + col * b_cs;
    {ct} acc = ({ct})0;
    for (long q = 0; q < kk; ++q) acc += ({ct})a[pa + q * a_cs] * ({ct})b[pb + q * b_rs];
    out[gid] = ({t})acc;
}}
"""
    )


# -- random numbers ---------------------------------------------------------------------------------
_PHILOX = """
static uint4 philox4x32_10(uint4 c, uint2 k) {
    for (int i = 0; i < 10; ++i) {
        const uint hi0 = mul_hi(0xD2511F53u, c.x);
        const uint lo0 = 0xD2511F53u * c.x;
        const uint hi1 = mul_hi(0xCD9E8D57u, c.z);
        const uint lo1 = 0xCD9E8D57u * c.z;
        c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += 0x9E3779B9u;
        k.y += 0xBB67AE85u;
    }
    return c;
}
"""


def random_program(dt: str, all_dtypes: list[str]) -> str:
    """``uniform``: Philox4x32-10 of (seed, counter + i), mapped to [0, 1), the counter read
    from the device; ``advance``: the counter moved on by ``n`` (one work-item)."""
    t = CTYPES[dt]
    if dt == "float64":
        value = "(double)(((ulong)(r.x >> 5) << 26) | (ulong)(r.y >> 6)) * 0x1.0p-53"
    elif dt == "float32":
        value = "(float)(r.x >> 8) * 0x1.0p-24f"
    else:
        value = "(half)((float)(r.x >> 21) * 0x1.0p-11f)"
    return (
        _PHILOX
        + f"""
__kernel void uniform(const long n, __global {t}* out, const uint k0, const uint k1,
                      __global const ulong* ctr) {{
    const long gid = get_global_id(0);
    if (gid >= n) return;
    const ulong c = ctr[0] + (ulong)gid;
    const uint4 r = philox4x32_10((uint4)((uint)c, (uint)(c >> 32), 0x5eedu, 0u), (uint2)(k0, k1));
    out[gid] = {value};
}}

__kernel void advance(__global ulong* ctr, const ulong n) {{
    if (get_global_id(0) == 0) ctr[0] += n;
}}
"""
    )


# -- nn kernels ----------------------------------------------------------------------------------
_GEOMETRY = """
    const long N = g[0], C = g[1], H = g[2], W = g[3], KH = g[4], KW = g[5], OH = g[6], OW = g[7];
    const long SH = g[8], SW = g[9], DH = g[10], DW = g[11], TOP = g[12], LEFT = g[13];
"""

#: The start of a kernel whose work-item ``gid`` of ``n`` takes outputs ``[q0, q1)`` of output
#: row ``line`` (``piece`` outputs of a row per work-item: the whole row on CPU devices).
_ROW_PIECE = f"""const long gid = get_global_id(0);
    if (gid >= n) return;
    {_GEOMETRY}
    const long pieces = (OW + piece - 1) / piece;
    const long line = gid / pieces;
    const long q0 = (gid - line * pieces) * piece, q1 = min(OW, q0 + piece);
"""


def nn_program(dt: str, all_dtypes: list[str]) -> str:
    """im2col / col2im (convolutions) and max pooling forward / backward, one launch each.

    The columns are laid out ``(C, KH, KW, N, OH, OW)``, i.e. a ``(C*KH*KW, N*OH*OW)`` matrix,
    so that a whole batch is one GEMM.

    ``g`` (a ``long`` buffer) holds the window geometry ``N, C, H, W, KH, KW, OH, OW, SH, SW,
    DH, DW, TOP, LEFT`` and then the strides of the strided operands.
    """
    t, ct = CTYPES[dt], COMPUTE[dt]
    return f"""
__kernel void im2col(const long n, __global const long* g, __global {t}* out,
                     __global const {t}* x, const long x_off, const long piece) {{
    /* One work-item per ``piece`` consecutive output rows (p) of one (c, i, j, b): each row
       the OW columns of (c, i, j, b, p). */
    const long gid = get_global_id(0);
    if (gid >= n) return;
    {_GEOMETRY}
    const long chunks = (OH + piece - 1) / piece;
    long rem = gid;
    const long p0 = (rem % chunks) * piece; rem /= chunks;
    const long b = rem % N; rem /= N;
    const long j = rem % KW; rem /= KW;
    const long i = rem % KH; const long c = rem / KH;
    const long plane = x_off + b * g[14] + c * g[15], rs = g[16], xs = g[17];
    const long s0 = j * DW - LEFT;
    /* Stride 1: column q reads pixel q + s0, inside the image for q in [lo, hi) and padding
       outside; three runs with no test per item, the middle one a plain copy where xs = 1. */
    const long lo = min(max(-s0, 0L), OW), hi = max(min(W - s0, OW), lo);
    const long p1 = min(OH, p0 + piece);
    for (long p = p0; p < p1; ++p) {{
        const long r = p * SH + i * DH - TOP;
        __global {t}* o = out + ((((c * KH + i) * KW + j) * N + b) * OH + p) * OW;
        if (r < 0 || r >= H) {{
            for (long q = 0; q < OW; ++q) o[q] = ({t})0;
            continue;
        }}
        const long row = plane + r * rs;
        if (SW != 1) {{
            for (long q = 0; q < OW; ++q) {{
                const long s = q * SW + s0;
                o[q] = (s >= 0 && s < W) ? x[row + s * xs] : ({t})0;
            }}
            continue;
        }}
        for (long q = 0; q < lo; ++q) o[q] = ({t})0;
        if (xs == 1) {{
            __global const {t}* src = x + row + s0;
            for (long q = lo; q < hi; ++q) o[q] = src[q];
        }} else {{
            for (long q = lo; q < hi; ++q) o[q] = x[row + (q + s0) * xs];
        }}
        for (long q = hi; q < OW; ++q) o[q] = ({t})0;
    }}
}}

__kernel void im2row(const long n, __global const long* g, __global {t}* out,
                     __global const {t}* x, const long x_off, const long piece) {{
    /* The transpose of im2col, (N*OH*OW, C*KH*KW): one work-item per ``piece`` consecutive
       output pixels (b, p, q..) of a row, each writing its C*KH*KW taps as one contiguous
       row. The filter gradient multiplies dy's (O, N*OH*OW) matrix by it untransposed, which
       CLBlast runs faster on PoCL than the transposed columns (16 x 144 x 32768: 12 against
       20 ms). */
    {_ROW_PIECE}
    const long p = line % OH, b = line / OH;
    const long rs = g[16], xs = g[17], r0 = p * SH - TOP;
    __global {t}* o = out + (line * OW + q0) * (C * KH * KW);
    const long taps = C * KH * KW;
    for (long c = 0; c < C; ++c) {{
        const long base = x_off + b * g[14] + c * g[15];
        for (long i = 0; i < KH; ++i) {{
            const long r = r0 + i * DH;
            for (long j = 0; j < KW; ++j) {{
                __global {t}* oo = o + (c * KH + i) * KW + j;
                if (r < 0 || r >= H) {{
                    for (long q = q0; q < q1; ++q) oo[(q - q0) * taps] = ({t})0;
                    continue;
                }}
                const long row = base + r * rs, shift = j * DW - LEFT;
                if (SW != 1 || q1 - q0 < 32) {{
                    for (long q = q0; q < q1; ++q) {{
                        const long s = q * SW + shift;
                        oo[(q - q0) * taps] = (s >= 0 && s < W) ? x[row + s * xs] : ({t})0;
                    }}
                    continue;
                }}
                /* stride 1 and long rows: pixel q + shift, inside the row for q in [lo, hi),
                   three runs without a test per item (short rows: the tests cost less) */
                const long lo = min(max(-shift, q0), q1), hi = max(min(W - shift, q1), lo);
                for (long q = q0; q < lo; ++q) oo[(q - q0) * taps] = ({t})0;
                for (long q = lo; q < hi; ++q) oo[(q - q0) * taps] = x[row + (q + shift) * xs];
                for (long q = hi; q < q1; ++q) oo[(q - q0) * taps] = ({t})0;
            }}
        }}
    }}
}}

/* Batch normalisation's two element passes (arraycore.device_kernels' bn_normalize and
   bn_backward_data: the same arguments, arithmetic and FP_CONTRACT OFF, so the same bits; relu
   and has_y for batch_norm_relu),
   one work-item per (n, c) row of HW items: the channel is found once per row, not by two
   64-bit divisions per item, which on a CPU device cost more than the pass's memory traffic
   (PoCL, 32x16x32x32 float32: forward 2.07 -> 1.18 ms with its statistics, backward 1.62 ->
   0.69 ms). */
__kernel void bn_normalize_rows(const long n, const long C, const long HW, const int relu,
                                __global {t}* y, __global const {t}* x,
                                __global const {t}* mean, __global const {t}* inv_std,
                                __global const {t}* gamma, __global const {t}* beta) {{
#pragma OPENCL FP_CONTRACT OFF
    const long row = get_global_id(0);
    if (row >= n / HW) return;
    const long c = row % C;
    const {t} m = mean[c], scale = inv_std[c] * gamma[c], shift = beta[c];
    const long at = row * HW;
    if (relu) {{
        for (long j = 0; j < HW; ++j) {{
            const {t} v = (x[at + j] - m) * scale + shift;
            y[at + j] = (!(v > ({t})0) && v == v) ? ({t})0 : v;
        }}
    }} else {{
        for (long j = 0; j < HW; ++j) y[at + j] = (x[at + j] - m) * scale + shift;
    }}
}}

__kernel void bn_backward_data_rows(const long n, const long C, const long HW, const {t} count,
                                    const int has_y, __global {t}* dx, __global const {t}* dy,
                                    __global const {t}* y, __global const {t}* x,
                                    __global const {t}* mean, __global const {t}* inv_std,
                                    __global const {t}* gamma, __global const {t}* dgamma,
                                    __global const {t}* dbeta) {{
#pragma OPENCL FP_CONTRACT OFF
    const long row = get_global_id(0);
    if (row >= n / HW) return;
    const long c = row % C;
    const {t} inv = inv_std[c], m = mean[c], db = dbeta[c] / count, dg = dgamma[c] / count;
    const {t} scale = inv * gamma[c];
    const long at = row * HW;
    for (long j = 0; j < HW; ++j) {{
        const {t} x_hat = (x[at + j] - m) * inv;
        const {t} g = has_y ? dy[at + j] * (y[at + j] > ({t})0 ? ({t})1 : ({t})0) : dy[at + j];
        dx[at + j] = (g - db - x_hat * dg) * scale;
    }}
}}

#define COL2IM_CHUNK 32
__kernel void col2im(const long n, __global const long* g, __global {t}* out,
                     __global const {t}* cols, const long c_off) {{
    /* One work-item per image row (b, c, h), COL2IM_CHUNK pixels at a time; each pixel sums
       its taps in (i, j) order, as the one-pixel-per-item form did. */
    const long gid = get_global_id(0);
    if (gid >= n) return;
    {_GEOMETRY}
    const long h = gid % H, c = (gid / H) % C, b = gid / (H * C);
    const long plane = OH * OW;
    {ct} acc[COL2IM_CHUNK];
    for (long w0 = 0; w0 < W; w0 += COL2IM_CHUNK) {{
        const long len = min((long)COL2IM_CHUNK, W - w0);
        for (long u = 0; u < len; ++u) acc[u] = ({ct})0;
        for (long i = 0; i < KH; ++i) {{
            const long rr = h + TOP - i * DH;
            if (rr < 0) break;
            if (rr % SH != 0 || rr / SH >= OH) continue;
            const long p = rr / SH;
            for (long j = 0; j < KW; ++j) {{
                __global const {t}* src = cols + c_off + (((c * KH + i) * KW + j) * N + b) * plane
                                          + p * OW;
                /* the pixels this tap reaches: every SW-th from the first at a whole output
                   column, the columns consecutive (one division per tap, not two per pixel) */
                const long s0 = w0 + LEFT - j * DW;
                long u = s0 >= 0 ? (SW - s0 % SW) % SW : -s0;
                for (long o = (s0 + u) / SW; u < len && o < OW; u += SW, ++o)
                    acc[u] += ({ct})src[o];
            }}
        }}
        for (long u = 0; u < len; ++u) out[gid * W + w0 + u] = ({t})acc[u];
    }}
}}

__kernel void max_pool(const long n, __global const long* g, __global {t}* out,
                       __global const {t}* x, const long x_off, const long piece) {{
    /* One work-item per ``piece`` consecutive outputs of an output row (b, c, p). */
    {_ROW_PIECE}
    const long p = line % OH, bc = line / OH;
    const long base = x_off + (bc / C) * g[14] + (bc % C) * g[15];
    const long rs = g[16], xs = g[17], r0 = p * SH - TOP;
    const int rows_inside = r0 >= 0 && r0 + KH <= H;
    for (long q = q0; q < q1; ++q) {{
        {ct} m = ({ct})(-INFINITY);
        const long s0 = q * SW - LEFT;
        if (rows_inside && s0 >= 0 && s0 + KW <= W) {{  /* the window inside the image */
            __global const {t}* w = x + base + r0 * rs + s0 * xs;
            for (long i = 0; i < KH; ++i) {{
                for (long j = 0; j < KW; ++j) {{
                    const {ct} v = ({ct})w[i * rs + j * xs];
                    m = (v > m || isnan(v)) ? v : m;
                }}
            }}
        }} else {{
            for (long i = 0; i < KH; ++i) {{
                const long r = r0 + i;
                if (r < 0 || r >= H) continue;
                for (long j = 0; j < KW; ++j) {{
                    const long s = s0 + j;
                    if (s < 0 || s >= W) continue;
                    const {ct} v = ({ct})x[base + r * rs + s * xs];
                    m = (v > m || isnan(v)) ? v : m;
                }}
            }}
        }}
        out[line * OW + q] = ({t})m;
    }}
}}

/* 2x2 windows at stride 2 without padding: the same rule unrolled, no bounds tests. */
__kernel void max_pool_2x2(const long n, __global const long* g, __global {t}* out,
                           __global const {t}* x, const long x_off, const long piece) {{
    {_ROW_PIECE}
    const long p = line % OH, bc = line / OH;
    const long rs = g[16], xs = g[17];
    __global const {t}* r0 = x + x_off + (bc / C) * g[14] + (bc % C) * g[15] + 2 * p * rs;
    for (long q = q0; q < q1; ++q) {{
        __global const {t}* w = r0 + 2 * q * xs;
        const {ct} a = ({ct})w[0], b = ({ct})w[xs], e = ({ct})w[rs], f = ({ct})w[rs + xs];
        {ct} m = a;
        m = (b > m || isnan(b)) ? b : m;
        m = (e > m || isnan(e)) ? e : m;
        m = (f > m || isnan(f)) ? f : m;
        out[line * OW + q] = ({t})m;
    }}
}}

/* Its gradient: one work-item per ``piece`` windows of an output row writes all four pixels of
   each (dy at the window's first maximum or first NaN, 0 elsewhere), so the output needs no
   zero-filling but for an odd last row or column (the host's). */
__kernel void max_pool_backward_2x2(const long n, __global const long* g, __global {t}* out,
                                    __global const {t}* x, const long x_off,
                                    __global const {t}* dy, const long dy_off,
                                    const long piece) {{
    {_ROW_PIECE}
    const long p = line % OH, bc = line / OH;
    const long rs = g[16], xs = g[17], dqs = g[21];
    __global const {t}* r0 = x + x_off + (bc / C) * g[14] + (bc % C) * g[15] + 2 * p * rs;
    __global const {t}* d = dy + dy_off + (bc / C) * g[18] + (bc % C) * g[19] + p * g[20];
    __global {t}* o0 = out + (bc * H + 2 * p) * W;
    __global {t}* o1 = o0 + W;
    const {t} zero = ({t})0;
    for (long q = q0; q < q1; ++q) {{
        __global const {t}* w = r0 + 2 * q * xs;
        const {ct} a = ({ct})w[0], b = ({ct})w[xs], e = ({ct})w[rs], f = ({ct})w[rs + xs];
        const {ct} m = fmax(fmax(a, b), fmax(e, f));  /* NaN only if all four are */
        const int at_a = a == m, by_b = at_a || b == m, by_e = by_b || e == m;
        int k = 3 - by_e - by_b - at_a;
        if (isnan(a + b + e + f))  /* a NaN (or infinities of both signs): the first NaN wins */
            k = isnan(a) ? 0 : isnan(b) ? 1 : isnan(e) ? 2 : isnan(f) ? 3 : k;
        const {t} gq = d[q * dqs];
        o0[2 * q] = k == 0 ? gq : zero;
        o0[2 * q + 1] = k == 1 ? gq : zero;
        o1[2 * q] = k == 2 ? gq : zero;
        o1[2 * q + 1] = k == 3 ? gq : zero;
    }}
}}

/* The first pixel (row-major) of window (p, q) equal to its maximum, or its first NaN. */
static long window_winner(__global const {t}* x, const long base, __global const long* g,
                          const long p, const long q) {{
    {_GEOMETRY}
    {ct} m = ({ct})(-INFINITY);
    long at = -1;
    for (long i = 0; i < KH; ++i) {{
        const long r = p * SH + i - TOP;
        if (r < 0 || r >= H) continue;
        for (long j = 0; j < KW; ++j) {{
            const long s = q * SW + j - LEFT;
            if (s < 0 || s >= W) continue;
            const {ct} v = ({ct})x[base + r * g[16] + s * g[17]];
            if (isnan(v)) return r * W + s;
            if (at < 0 || v > m) {{ m = v; at = r * W + s; }}
        }}
    }}
    return at;
}}

__kernel void max_pool_backward(const long n, __global const long* g, __global {t}* out,
                                __global const {t}* x, const long x_off,
                                __global const {t}* dy, const long dy_off) {{
    const long gid = get_global_id(0);
    if (gid >= n) return;
    {_GEOMETRY}
    const long w = gid % W, h = (gid / W) % H, bc = gid / (W * H);
    const long base = x_off + (bc / C) * g[14] + (bc % C) * g[15];
    const long dbase = dy_off + (bc / C) * g[18] + (bc % C) * g[19];
    const long rp = h + TOP, sp = w + LEFT;
    {ct} acc = ({ct})0;
    for (long i = 0; i < KH; ++i) {{
        const long rr = rp - i;
        if (rr < 0) break;
        if (rr % SH != 0 || rr / SH >= OH) continue;
        const long p = rr / SH;
        for (long j = 0; j < KW; ++j) {{
            const long ss = sp - j;
            if (ss < 0) break;
            if (ss % SW != 0 || ss / SW >= OW) continue;
            const long q = ss / SW;
            if (window_winner(x, base, g, p, q) == h * W + w)
                acc += ({ct})dy[dbase + p * g[20] + q * g[21]];
        }}
    }}
    out[gid] = ({t})acc;
}}

/* The same gradient where windows do not overlap (stride >= kernel): one work-item per
   ``piece`` windows of an output row writes each window's dy to its winner, in an output
   zero-filled beforehand (each pixel is in at most one window, so the write is the sum the
   gather form makes). */
__kernel void max_pool_backward_windows(const long n, __global const long* g,
                                        __global {t}* out, __global const {t}* x,
                                        const long x_off, __global const {t}* dy,
                                        const long dy_off, const long piece) {{
    {_ROW_PIECE}
    const long p = line % OH, bc = line / OH;
    const long base = x_off + (bc / C) * g[14] + (bc % C) * g[15];
    const long dbase = dy_off + (bc / C) * g[18] + (bc % C) * g[19] + p * g[20];
    const long rs = g[16], xs = g[17], dqs = g[21], r0 = p * SH - TOP;
    const int rows_inside = r0 >= 0 && r0 + KH <= H;
    __global {t}* o = out + bc * H * W;
    for (long q = q0; q < q1; ++q) {{
        const long s0 = q * SW - LEFT;
        long at;
        if (rows_inside && s0 >= 0 && s0 + KW <= W) {{  /* the window inside: no tests */
            __global const {t}* w = x + base + r0 * rs + s0 * xs;
            {ct} m = ({ct})w[0];
            long best = 0;
            for (long i = 0; i < KH && !isnan(m); ++i) {{
                for (long j = 0; j < KW; ++j) {{
                    const {ct} v = ({ct})w[i * rs + j * xs];
                    if (v > m || isnan(v)) {{ m = v; best = i * W + j; if (isnan(v)) break; }}
                }}
            }}
            at = r0 * W + s0 + best;
        }} else {{
            at = window_winner(x, base, g, p, q);
        }}
        if (at >= 0) o[at] = dy[dbase + q * dqs];
    }}
}}
"""


def shared_program(dt: str, all_dtypes: list[str]) -> str:
    """arraycore's shared nn kernels (:mod:`arraycore.device_kernels`), the OpenCL build: the
    recurrent cell kernels over a 2-D range (``ROW_UNIT_2D``, see ``OpenCLKernels.kernel_launch``)."""
    from arraycore import device_kernels

    return "#define ROW_UNIT_2D\n" + device_kernels.source(dt, "opencl")


FAMILIES = {
    "dk": shared_program,
    "ew": elementwise_program,
    "cast": cast_program,
    "red": reduce_program,
    "idx": index_program,
    "rng": random_program,
    "nn": nn_program,
}
