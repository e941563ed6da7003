"""cuDNN convolutions, batch normalisation and attention through NVIDIA's cudnn-frontend graph
API.

CuPy 14 ships no cuDNN bindings, so this module drives ``nvidia-cudnn-frontend`` (``import
cudnn``) with the cuDNN runtime of the ``nvidia-cudnn-cu12`` / ``nvidia-cudnn-cu13`` wheels.
Nothing here imports CuPy or cudnn at module level: the backend passes both modules in, so this
file imports on any machine.

Every public method returns ``None`` when cuDNN does not take the case (an unsupported dtype, a
graph no engine supports, a handle that could not be created); the caller then runs its own
im2col + cuBLAS kernels. Graphs are built once per key (op, shapes, dtype, geometry, eps) and
cached together with their tensor handles, the chosen plan and its workspace size; rejected keys
are cached too, so a shape cuDNN declines is not rebuilt every step.

API facts this relies on (checked against nvidia-cudnn-frontend 1.32.0, see ``USED_API``):

* ``cudnn.pygraph(io_data_type=, intermediate_data_type=, compute_data_type=, handle=)``;
  ``graph.tensor(dim=, stride=, data_type=, name=)``; ops return output tensors, which need
  ``set_output(True)``; dgrad/wgrad outputs need explicit ``set_dim``/``set_stride``.
* ``conv_fprop(image, weight, pre_padding=, post_padding=, stride=, dilation=)``; the default
  ``convolution_mode`` is ``CROSS_CORRELATION`` (what arraycore computes).
* ``batchnorm(input, scale, bias, in_running_mean=None, in_running_var=None, epsilon=,
  momentum=None)`` returns ``[Y, mean, inv_var, next_running_mean, next_running_var]`` (the last
  two ``None`` without running stats); ``inv_var`` is cuDNN's saved ``1/sqrt(var + eps)``.
  ``batchnorm_backward(grad, input, scale, mean=, inv_variance=)`` returns ``[DX, DScale, DBias]``.
* ``sdpa(q=, k=, v=, generate_stats=True, attn_scale=, use_causal_mask=, bias=)`` returns
  ``[O, Stats]`` (Stats: each row's natural-log log-sum-exp, (b, h, sq, 1), set to float32);
  ``sdpa_backward(q=, k=, v=, o=, dO=, stats=, ...)`` returns ``[dQ, dK, dV]``; the flash
  attention engines take float16/bfloat16 io, ``use_causal_mask`` is top-left aligned.
* ``validate``, ``build_operation_graph``, ``create_execution_plans([heur_mode...])``,
  ``check_support``, ``get_execution_plan_count``, ``build_plan_at_index(i)``,
  ``get_workspace_size_plan_at_index(i)``, ``execute_plan_at_index(pack, workspace, index=,
  handle=)``; a variant pack maps tensor handles to plain ``int`` device pointers (the frontend
  passes ``type(d) is int`` through unchanged), the workspace likewise. Where the frontend
  has them (1.32), the tuned plan is pinned once with ``select_plan(i)`` + ``build_plans()``
  and run by ``execute(pointers, workspace, handle=, tensor_uids=)``: the ordered binding is
  cached, where ``execute_plan_at_index`` rebuilds its variant pack from the uid map and walks
  the plan list for the deselected notes on every call (H200: a LeNet-sized fprop 146 -> 124
  us of host time, training steps 1-5% faster); ``Tensor.uid`` names each operand.
* ``deselect_numeric_notes([numerical_note.TENSOR_CORE, ...])`` keeps float32 convolutions off
  TF32 engines (``ARRAYCORE_CUDNN_TF32=1`` allows them); ``ARRAYCORE_CUDNN_AUTOTUNE=0`` runs the
  heuristics' first plan that builds instead of timing every plan.
* ``cudnn.create_handle()`` / ``cudnn.set_stream(handle, stream)`` (the frontend's Handle caches
  the stream, so calling it before every execute is cheap); ``cudnn.cudnnGraphNotSupportedError``.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace
from typing import Any

from arraycore.backend import dtype_name

from ._cudnn_plans import PlanCache, _one_line, _Plan

_LOG = logging.getLogger(__name__)

INSTALL_HINT = 'pip install "arraycore[cuda12]"'

#: Every attribute of the frontend this module uses, by owner (dotted paths from ``cudnn``).
#: ``tests/test_cudnn_api.py`` resolves each against the installed module to catch API drift.
USED_API: dict[str, tuple[str, ...]] = {
    "cudnn": (
        "__version__",
        "backend_version",
        "backend_version_string",
        "pygraph",
        "Tensor",
        "data_type",
        "heur_mode",
        "scalar_type",
        "create_handle",
        "set_stream",
        "cudnnGraphNotSupportedError",
        "numerical_note",
    ),
    "cudnn.pygraph": (
        "tensor",
        "tensor_scalar",
        "conv_fprop",
        "conv_dgrad",
        "conv_wgrad",
        "batchnorm",
        "batchnorm_backward",
        "sdpa",
        "sdpa_backward",
        "validate",
        "build_operation_graph",
        "create_execution_plans",
        "check_support",
        "deselect_numeric_notes",
        "get_execution_plan_count",
        "get_plan_name_at_index",
        "build_plan_at_index",
        "get_workspace_size_plan_at_index",
        "execute_plan_at_index",
        "select_plan",
        "build_plans",
        "execute",
    ),
    "cudnn.Tensor": ("set_output", "set_dim", "set_stride", "set_data_type"),
    "cudnn.data_type": ("FLOAT", "HALF", "BFLOAT16"),
    "cudnn.heur_mode": ("A", "FALLBACK"),
    "cudnn.scalar_type": ("RUNTIME_PARAM",),
    "cudnn.numerical_note": ("TENSOR_CORE", "DOWN_CONVERT_INPUTS"),
}

#: Keyword arguments used per builder (checked against the real builders' accepted names).
USED_KWARGS: dict[str, tuple[str, ...]] = {
    "cudnn.pygraph": ("io_data_type", "intermediate_data_type", "compute_data_type", "handle"),
    "cudnn.pygraph.tensor": ("dim", "stride", "data_type", "name"),
    "cudnn.pygraph.conv_fprop": ("pre_padding", "post_padding", "stride", "dilation"),
    "cudnn.pygraph.conv_dgrad": ("pre_padding", "post_padding", "stride", "dilation"),
    "cudnn.pygraph.conv_wgrad": ("pre_padding", "post_padding", "stride", "dilation"),
    "cudnn.pygraph.batchnorm": ("in_running_mean", "in_running_var", "epsilon", "momentum"),
    "cudnn.pygraph.batchnorm_backward": ("mean", "inv_variance"),
    "cudnn.pygraph.sdpa": (
        "q",
        "k",
        "v",
        "generate_stats",
        "attn_scale",
        "use_causal_mask",
        "bias",
    ),
    "cudnn.pygraph.sdpa_backward": ("q", "k", "v", "o", "dO", "stats", "attn_scale", "bias"),
    "cudnn.pygraph.execute_plan_at_index": ("workspace", "index", "handle"),
    "cudnn.pygraph.execute": ("workspace", "handle", "tensor_uids"),
}

_AUTOTUNE_ENV = "ARRAYCORE_CUDNN_AUTOTUNE"
# float32 convolutions may use TF32 tensor cores only when this is set to 1.
_TF32_ENV = "ARRAYCORE_CUDNN_TF32"
_OFF = ("", "0", "false", "no", "off")
# cuDNN's graph API serves these as io types; float64 is left to the fallback.
_DTYPES = ("float32", "float16", "bfloat16")


def probe() -> tuple[Any | None, str]:
    """(the imported ``cudnn`` module or None, a one-line description for ``arraycore info``).

    Never raises and does no GPU work: importing the frontend dlopens libcudnn if it can find it,
    and ``cudnn.backend_version()`` then answers; without the library that call raises.
    """
    try:
        import cudnn
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing in (None, "cudnn"):
            return None, (
                f"cuDNN not available: nvidia-cudnn-frontend is not installed ({INSTALL_HINT})"
            )
        return None, f"cuDNN not available: nvidia-cudnn-frontend failed to import ({exc})"
    except Exception as exc:  # a broken install must not break `arraycore info`
        return (
            None,
            f"cuDNN not available: nvidia-cudnn-frontend failed to import ({_one_line(exc)})",
        )
    frontend = str(getattr(cudnn, "__version__", "?"))
    try:
        version = int(cudnn.backend_version())
    except Exception as exc:
        return None, (
            f"cuDNN not available: libcudnn failed to load ({_one_line(exc)}; "
            f"nvidia-cudnn-frontend {frontend} needs the nvidia-cudnn-cu12/-cu13 wheel, {INSTALL_HINT})"
        )
    return cudnn, f"cuDNN {_version_text(version)} through nvidia-cudnn-frontend {frontend}"


def _version_text(version: int) -> str:
    """cudnnGetVersion's integer (9.x: major*10000 + minor*100 + patch) as "9.27.0"."""
    if version >= 10000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"  # cuDNN 8 encoding


def _packed_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(int(size), 1)
    return tuple(reversed(strides))


def _nhwc_strides(shape4: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Strides, in (N, C, H, W) order, of a packed channels-last (N, H, W, C) buffer."""
    _, c, h, w = shape4
    return (h * w * c, 1, w * c, c)


class Cudnn(PlanCache):
    """cuDNN graphs for one CUDA device. Created once per backend instance; lazy: the handle is
    created on first use, inside ``with cupy.cuda.Device(index)``."""

    def __init__(self, cudnn_module: Any, cupy: Any, device_index: int) -> None:
        self._cudnn = cudnn_module
        self._cp = cupy
        self._device = int(device_index)
        self._handle: Any = None
        self.disabled_reason: str | None = None
        # key -> built plan, or the reason cuDNN rejected the key (str)
        self._cache: dict[tuple[Any, ...], _Plan | str] = {}
        self._lock = threading.Lock()
        self._autotune = os.environ.get(_AUTOTUNE_ENV, "1").strip().lower() not in _OFF
        self._tf32 = os.environ.get(_TF32_ENV, "0").strip().lower() not in _OFF

    # -- public ops ---------------------------------------------------------------------------
    def conv2d(self, x: Any, w: Any, win: Any) -> Any:
        """Cross-correlation of NCHW ``x`` with (O, C, KH, KW) ``w``: (N, O, out_h, out_w)."""
        return self._conv("fprop", win, int(w.shape[0]), {"x": x, "w": w}, "y")

    def conv2d_backward_data(self, dy: Any, w: Any, win: Any) -> Any:
        """Gradient w.r.t. x of :meth:`conv2d`: shape (win.n, win.c, win.h, win.w)."""
        return self._conv("dgrad", win, int(w.shape[0]), {"y": dy, "w": w}, "x")

    def conv2d_backward_filter(self, x: Any, dy: Any, win: Any, w_shape: Any) -> Any:
        """Gradient w.r.t. w of :meth:`conv2d`: shape ``w_shape``."""
        return self._conv("wgrad", win, int(w_shape[0]), {"x": x, "y": dy}, "w")

    def _conv(
        self, kind: str, win: Any, out_channels: int, given: dict[str, Any], want: str
    ) -> Any:
        """One convolution pass: ``given`` holds two of the roles ``x`` (image), ``w`` (weights)
        and ``y`` (output or its gradient); the third, ``want``, is computed and returned."""
        dt = self._dtype_name(*given.values())
        if dt is None:
            return None
        (t, b), (left, r) = win.pads
        if (t, left) != (b, r):
            return self._conv_padded(kind, win, out_channels, given, want)
        shapes = {
            "x": (win.n, win.c, win.h, win.w),
            "w": (out_channels, win.c, win.kh, win.kw),
            "y": (win.n, out_channels, win.out_h, win.out_w),
        }
        if any(tuple(a.shape) != shapes[role] for role, a in given.items()):
            return None
        key = (f"conv2d_{kind}", dt, shapes["x"], shapes["w"], *self._geometry(win))
        plan = self._plan(
            key,
            lambda g: self._conv_graph(g, kind, win, shapes["x"], shapes["w"], shapes["y"], dt),
        )
        if plan is None:
            return None
        cp = self._cp
        dtype = next(iter(given.values())).dtype
        with cp.cuda.Device(self._device):
            out = cp.empty(shapes[want], dtype=dtype)
            arrays = {role: cp.ascontiguousarray(a) for role, a in given.items()}
            arrays[want] = out
            ok = self._run(plan, arrays)
        return out if ok else None

    def _conv_padded(
        self, kind: str, win: Any, out_channels: int, given: dict[str, Any], want: str
    ) -> Any:
        """:meth:`_conv` for padding that differs before and after: cuDNN sees the image with
        its padding written out as zeros, and no padding of its own.

        Run on an H200 (cuDNN 9.19, frontend 1.32, 2026-11-27), most wgrad engines gave wrong
        filter gradients for such padding (symmetric padding was right on every engine), and
        the conformance kit's adjoint check failed for fprop/dgrad pairs of it too.
        """
        cp = self._cp
        (t, b), (left, r) = win.pads
        flat = replace(win, h=win.padded_h, w=win.padded_w, pads=((0, 0), (0, 0)))
        if kind == "dgrad":
            dx = self._conv(kind, flat, out_channels, given, want)
            if dx is None:
                return None
            return cp.ascontiguousarray(dx[:, :, t : t + win.h, left : left + win.w])
        with cp.cuda.Device(self._device):
            x = cp.pad(given["x"], ((0, 0), (0, 0), (t, b), (left, r)))
        return self._conv(kind, flat, out_channels, {**given, "x": x}, want)

    def batch_norm(self, x: Any, gamma: Any, beta: Any, eps: float) -> tuple[Any, Any, Any] | None:
        """Training-mode batch norm of (N, C) or (N, C, H, W) ``x``: ``(y, mean, inv_std)``."""
        dt = self._dtype_name(x)
        shape4 = self._bn_shape(x)
        if dt is None or shape4 is None or not self._same_float(x, gamma, beta):
            return None
        found = self._bn_plan(("batch_norm", dt, shape4, float(eps)), shape4, dt, float(eps))
        if found is None:
            return None
        plan, nhwc = found
        cp = self._cp
        c = shape4[1]
        with cp.cuda.Device(self._device):
            f32 = cp.float32
            y = cp.empty(self._bn_buffer_shape(shape4, nhwc), dtype=x.dtype)
            mean = cp.empty((c,), dtype=f32)
            inv_std = cp.empty((c,), dtype=f32)
            arrays = {
                "x": self._bn_input(x, shape4, nhwc),
                "scale": cp.ascontiguousarray(gamma, dtype=f32),
                "bias": cp.ascontiguousarray(beta, dtype=f32),
                "y": y,
                "mean": mean,
                "inv_var": inv_std,
            }
            if not self._run(plan, arrays):
                return None
            return (
                self._bn_output(y, x.shape, nhwc),
                mean.astype(x.dtype, copy=False),
                inv_std.astype(x.dtype, copy=False),
            )

    def batch_norm_backward(
        self, dy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any
    ) -> tuple[Any, Any, Any] | None:
        """Gradients ``(dx, dgamma, dbeta)`` of :meth:`batch_norm` given its mean and inv_std."""
        dt = self._dtype_name(dy, x)
        shape4 = self._bn_shape(x)
        if dt is None or shape4 is None or tuple(dy.shape) != tuple(x.shape):
            return None
        if not self._same_float(x, gamma, mean, inv_std):
            return None
        found = self._bn_plan(("batch_norm_backward", dt, shape4), shape4, dt, None)
        if found is None:
            return None
        plan, nhwc = found
        cp = self._cp
        c = shape4[1]
        with cp.cuda.Device(self._device):
            f32 = cp.float32
            dx = cp.empty(self._bn_buffer_shape(shape4, nhwc), dtype=x.dtype)
            dgamma = cp.empty((c,), dtype=f32)
            dbeta = cp.empty((c,), dtype=f32)
            arrays = {
                "dy": self._bn_input(dy, shape4, nhwc),
                "x": self._bn_input(x, shape4, nhwc),
                "scale": cp.ascontiguousarray(gamma, dtype=f32),
                "mean": cp.ascontiguousarray(mean, dtype=f32),
                "inv_var": cp.ascontiguousarray(inv_std, dtype=f32),
                "dx": dx,
                "dscale": dgamma,
                "dbias": dbeta,
            }
            if not self._run(plan, arrays):
                return None
            return (
                self._bn_output(dx, x.shape, nhwc),
                dgamma.astype(x.dtype, copy=False),
                dbeta.astype(x.dtype, copy=False),
            )

    # -- scaled dot-product attention: cuDNN's flash-attention engines (float16, bfloat16) ------
    def attention(
        self, q: Any, k: Any, v: Any, bias: Any, causal: bool, scale: float
    ) -> tuple[Any, Any] | None:
        """``(out, stats)``: attention of packed (b, h, s, d) ``q``, ``k``, ``v`` with an
        optional additive ``bias`` (1|b, 1|h, sq, skv) of q's dtype, ``causal`` top-left
        aligned; ``stats`` is each row's log-sum-exp, (b, h, sq, 1) float32."""
        found = self._sdpa_plan("forward", q, k, v, bias, causal, scale)
        if found is None:
            return None
        plan, shapes = found
        cp = self._cp
        qs, _, vs = shapes
        with cp.cuda.Device(self._device):
            out = cp.empty((*qs[:3], vs[3]), dtype=q.dtype)
            stats = cp.empty((*qs[:3], 1), dtype=cp.float32)
            arrays = {"q": q, "k": k, "v": v, "o": out, "stats": stats}
            if bias is not None:
                arrays["bias"] = bias
            ok = self._run(plan, {r: cp.ascontiguousarray(a) for r, a in arrays.items()})
        return (out, stats) if ok else None

    def attention_backward(
        self,
        dy: Any,
        q: Any,
        k: Any,
        v: Any,
        out: Any,
        stats: Any,
        bias: Any,
        causal: bool,
        scale: float,
    ) -> tuple[Any, Any, Any] | None:
        """``(dq, dk, dv)`` of :meth:`attention` from ``dy`` and its ``out`` and ``stats``."""
        if dtype_name(stats.dtype) != "float32" or dtype_name(dy.dtype) != dtype_name(q.dtype):
            return None
        found = self._sdpa_plan("backward", q, k, v, bias, causal, scale)
        if found is None:
            return None
        plan, _ = found
        cp = self._cp
        with cp.cuda.Device(self._device):
            grads = {
                role: cp.empty(a.shape, dtype=a.dtype)
                for role, a in zip(("dq", "dk", "dv"), (q, k, v))
            }
            arrays = {"q": q, "k": k, "v": v, "o": out, "dO": dy, "stats": stats, **grads}
            if bias is not None:
                arrays["bias"] = bias
            ok = self._run(plan, {r: cp.ascontiguousarray(a) for r, a in arrays.items()})
        return (grads["dq"], grads["dk"], grads["dv"]) if ok else None

    def _sdpa_plan(
        self, kind: str, q: Any, k: Any, v: Any, bias: Any, causal: bool, scale: float
    ) -> tuple[_Plan, tuple[tuple[int, ...], ...]] | None:
        dt = self._dtype_name(q, k, v)
        if dt not in ("float16", "bfloat16"):
            return None  # cuDNN's SDPA engines are half precision (and fp8)
        shapes = tuple(tuple(int(s) for s in a.shape) for a in (q, k, v))
        if any(len(s) != 4 for s in shapes):
            return None
        bshape = None
        if bias is not None:
            bshape = tuple(int(s) for s in bias.shape)
            if len(bshape) != 4 or dtype_name(bias.dtype) != dt:
                return None
        key = (f"sdpa_{kind}", dt, *shapes, bshape, bool(causal), float(scale))
        plan = self._plan(
            key, lambda g: self._sdpa_graph(g, kind, shapes, bshape, bool(causal), scale, dt)
        )
        return None if plan is None else (plan, shapes)

    def _sdpa_graph(
        self,
        g: Any,
        kind: str,
        shapes: tuple[tuple[int, ...], ...],
        bias_shape: tuple[int, ...] | None,
        causal: bool,
        scale: float,
        dt: str,
    ) -> dict[str, Any]:
        """The forward (``kind="forward"``: O and the softmax stats) or backward (dQ, dK, dV)
        SDPA graph over packed (b, h, s, d) tensors."""
        io, f32 = self._cudnn_dtype(dt), self._cudnn.data_type.FLOAT
        qs, ks, vs = shapes
        out_shape, stat_shape = (*qs[:3], vs[3]), (*qs[:3], 1)
        t = {role: self._tensor(g, role, shape, io) for role, shape in zip("qkv", shapes)}
        opts: dict[str, Any] = {"attn_scale": float(scale), "use_causal_mask": causal}
        if bias_shape is not None:
            t["bias"] = opts["bias"] = self._tensor(g, "bias", bias_shape, io)
        if kind == "forward":
            o, stats = g.sdpa(
                q=t["q"], k=t["k"], v=t["v"], generate_stats=True, name="sdpa", **opts
            )
            t["o"] = self._output(o, out_shape, io)
            t["stats"] = self._output(stats, stat_shape, f32)
            return t
        t["o"] = self._tensor(g, "o", out_shape, io)
        t["dO"] = self._tensor(g, "dO", out_shape, io)
        t["stats"] = self._tensor(g, "stats", stat_shape, f32)
        dq, dk, dv = g.sdpa_backward(
            q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["dO"], stats=t["stats"],
            name="sdpa_backward", **opts,
        )  # fmt: skip
        t["dq"] = self._output(dq, qs, io)
        t["dk"] = self._output(dk, ks, io)
        t["dv"] = self._output(dv, vs, io)
        return t

    # cuDNN's batch-norm engines are written for channels-last (NHWC) activations (every
    # frontend sample uses them). (N, C) input is (N, C, 1, 1), where NCHW and NHWC are the
    # same bytes, so it is always described as NHWC; (N, C, H, W) input tries packed NCHW
    # first (no copies) and, if no engine takes it, NHWC with a transposing copy in and out.
    def _bn_plan(
        self, key: tuple[Any, ...], shape4: tuple[int, int, int, int], dt: str, eps: float | None
    ) -> tuple[_Plan, bool] | None:
        layouts = (True,) if shape4[2] * shape4[3] == 1 else (False, True)
        io = self._cudnn_dtype(dt)
        for nhwc in layouts:
            plan = self._plan(
                (*key, "NHWC" if nhwc else "NCHW"),
                lambda g, nhwc=nhwc: self._bn_graph(g, shape4, io, eps=eps, nhwc=nhwc),
            )
            if plan is not None:
                return plan, nhwc
        return None

    @staticmethod
    def _bn_buffer_shape(shape4: tuple[int, int, int, int], nhwc: bool) -> tuple[int, ...]:
        """The C-contiguous buffer an (N, C, H, W) activation lives in for ``nhwc``."""
        n, c, h, w = shape4
        return (n, h, w, c) if nhwc else shape4

    def _bn_input(self, a: Any, shape4: tuple[int, int, int, int], nhwc: bool) -> Any:
        """``a`` as the packed buffer the graph describes (a copy only when needed)."""
        cp = self._cp
        a4 = cp.ascontiguousarray(a).reshape(shape4)
        if nhwc and shape4[2] * shape4[3] != 1:
            return cp.ascontiguousarray(a4.transpose(0, 2, 3, 1))
        return a4.reshape(self._bn_buffer_shape(shape4, nhwc))

    def _bn_output(self, buf: Any, shape: tuple[int, ...], nhwc: bool) -> Any:
        """The result buffer back in (N, C[, H, W]) C order."""
        if nhwc and buf.shape[1] * buf.shape[2] != 1:
            return self._cp.ascontiguousarray(buf.transpose(0, 3, 1, 2))
        return buf.reshape(shape)

    def describe(self) -> str:
        """Cache size, chosen plans and rejected keys (for debugging)."""
        if self.disabled_reason is not None:
            return f"cuDNN disabled on device {self._device}: {self.disabled_reason}"
        built = [(k, v) for k, v in self._cache.items() if isinstance(v, _Plan)]
        lines = [
            f"cuDNN on device {self._device}: {len(built)} graph(s) built, "
            f"{len(self._cache) - len(built)} rejected, autotune {'on' if self._autotune else 'off'}"
        ]
        for key, entry in self._cache.items():
            if isinstance(entry, _Plan):
                timing = entry.timings_ms.get(entry.index)
                extra = f", {timing:.3f} ms" if timing is not None else ""
                lines.append(
                    f"  {key}: plan {entry.index} of {entry.candidates} ({entry.name}), "
                    f"workspace {entry.workspace} B{extra}"
                )
            else:
                lines.append(f"  {key}: rejected ({entry})")
        return "\n".join(lines)

    # -- helpers: arguments -------------------------------------------------------------------
    def _dtype_name(self, *arrays: Any) -> str | None:
        """The shared dtype name of ``arrays`` if cuDNN serves it (and cuDNN is usable)."""
        if self.disabled_reason is not None:
            return None
        try:
            names = {dtype_name(a.dtype) for a in arrays}
        except AttributeError:
            return None
        if len(names) != 1:
            return None
        name = names.pop()
        return name if name in _DTYPES else None

    @staticmethod
    def _same_float(x: Any, *per_channel: Any) -> bool:
        """Per-channel arrays in x's dtype (or float32), as arraycore passes them."""
        return all(dtype_name(a.dtype) in (dtype_name(x.dtype), "float32") for a in per_channel)

    @staticmethod
    def _bn_shape(x: Any) -> tuple[int, int, int, int] | None:
        shape = tuple(int(s) for s in x.shape)
        if len(shape) == 2:
            return (shape[0], shape[1], 1, 1)
        if len(shape) == 4:
            return (shape[0], shape[1], shape[2], shape[3])
        return None

    @staticmethod
    def _geometry(win: Any) -> tuple[Any, ...]:
        (sh, sw), ((t, b), (left, r)), (dh, dw) = win.stride, win.pads, win.dilation
        return ((int(sh), int(sw)), ((int(t), int(b)), (int(left), int(r))), (int(dh), int(dw)))

    def _cudnn_dtype(self, name: str) -> Any:
        dt = self._cudnn.data_type
        return {"float32": dt.FLOAT, "float16": dt.HALF, "bfloat16": dt.BFLOAT16}[name]

    # -- helpers: graphs ----------------------------------------------------------------------
    def _new_graph(self, io: Any) -> Any:
        f32 = self._cudnn.data_type.FLOAT
        return self._cudnn.pygraph(
            io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=self._handle
        )

    @staticmethod
    def _tensor(
        g: Any,
        name: str,
        shape: tuple[int, ...],
        dtype: Any,
        strides: tuple[int, ...] | None = None,
    ) -> Any:
        stride = strides if strides is not None else _packed_strides(shape)
        return g.tensor(name=name, dim=list(shape), stride=list(stride), data_type=dtype)

    @staticmethod
    def _output(
        t: Any, shape: tuple[int, ...], dtype: Any, strides: tuple[int, ...] | None = None
    ) -> Any:
        t.set_output(True)
        t.set_dim(list(shape))
        t.set_stride(list(strides if strides is not None else _packed_strides(shape)))
        t.set_data_type(dtype)
        return t

    def _conv_graph(
        self,
        g: Any,
        kind: str,
        win: Any,
        x_shape: tuple[int, ...],
        w_shape: tuple[int, ...],
        y_shape: tuple[int, ...],
        dt: str,
    ) -> dict[str, Any]:
        io = self._cudnn_dtype(dt)
        (sh, sw), ((t, b), (left, r)), (dh, dw) = self._geometry(win)
        attrs = {
            "pre_padding": [t, left],
            "post_padding": [b, r],
            "stride": [sh, sw],
            "dilation": [dh, dw],
        }
        f32 = self._cudnn.data_type.FLOAT
        tensors: dict[str, Any] = {}
        if kind == "fprop":
            tensors["x"] = self._tensor(g, "x", x_shape, io)
            tensors["w"] = self._tensor(g, "w", w_shape, io)
            out = g.conv_fprop(tensors["x"], tensors["w"], compute_data_type=f32, **attrs)
            tensors["y"] = self._output(out, y_shape, io)
        elif kind == "dgrad":
            tensors["y"] = self._tensor(g, "dy", y_shape, io)
            tensors["w"] = self._tensor(g, "w", w_shape, io)
            out = g.conv_dgrad(tensors["y"], tensors["w"], compute_data_type=f32, **attrs)
            tensors["x"] = self._output(out, x_shape, io)
        else:
            tensors["x"] = self._tensor(g, "x", x_shape, io)
            tensors["y"] = self._tensor(g, "dy", y_shape, io)
            out = g.conv_wgrad(tensors["x"], tensors["y"], compute_data_type=f32, **attrs)
            tensors["w"] = self._output(out, w_shape, io)
        return tensors

    def _bn_graph(
        self,
        g: Any,
        shape4: tuple[int, int, int, int],
        io: Any,
        *,
        eps: float | None,
        nhwc: bool = False,
    ) -> dict[str, Any]:
        """Forward (``eps`` given) or backward batch-norm graph over (N, C, H, W) ``x``; the
        activations are packed NCHW, or packed NHWC when ``nhwc``."""
        cd = self._cudnn
        f32 = cd.data_type.FLOAT
        stat = (1, shape4[1], 1, 1)
        act = _nhwc_strides(shape4) if nhwc else _packed_strides(shape4)
        t: dict[str, Any] = {}
        if eps is not None:
            t["x"] = self._tensor(g, "x", shape4, io, act)
            t["scale"] = self._tensor(g, "scale", stat, f32)
            t["bias"] = self._tensor(g, "bias", stat, f32)
            epsilon = g.tensor_scalar(float(eps), cd.scalar_type.RUNTIME_PARAM, name="epsilon")
            y, mean, inv_var, *_running = g.batchnorm(
                t["x"],
                t["scale"],
                t["bias"],
                in_running_mean=None,
                in_running_var=None,
                epsilon=epsilon,
                momentum=None,
                compute_data_type=f32,
            )
            t["y"] = self._output(y, shape4, io, act)
            t["mean"] = self._output(mean, stat, f32)
            t["inv_var"] = self._output(inv_var, stat, f32)
        else:
            t["dy"] = self._tensor(g, "dy", shape4, io, act)
            t["x"] = self._tensor(g, "x", shape4, io, act)
            t["scale"] = self._tensor(g, "scale", stat, f32)
            t["mean"] = self._tensor(g, "mean", stat, f32)
            t["inv_var"] = self._tensor(g, "inv_var", stat, f32)
            dx, dscale, dbias = g.batchnorm_backward(
                t["dy"],
                t["x"],
                t["scale"],
                mean=t["mean"],
                inv_variance=t["inv_var"],
                compute_data_type=f32,
            )
            t["dx"] = self._output(dx, shape4, io, act)
            t["dscale"] = self._output(dscale, stat, f32)
            t["dbias"] = self._output(dbias, stat, f32)
        return t
