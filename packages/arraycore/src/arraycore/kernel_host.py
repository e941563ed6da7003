"""The host side of the shared nn kernels (:mod:`arraycore.device_kernels`): argument checks,
shapes, fallbacks to arraycore's reference kernels, launches, and the convolutions as
im2col/col2im + the backend's matmul. The CUDA and OpenCL backends inherit :class:`KernelHost`;
a third-party GPU backend may too."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from . import _interop, _nn, _nn_attention, _nn_gru, _nn_rnn
from ._dtypes import dtype_name
from ._registry import namespace_of
from .device_kernels import DTYPES, SHARED_NN, SOFTMAX_MAX_ROW, geometry
from .nn_shapes import check_output_shape, conv_transpose_window, conv_window, pool_window

__all__ = ["KernelHost"]


class KernelHost(ABC):
    """The host side of the shared kernels, for a backend to inherit.

    It checks arguments exactly as arraycore's reference kernels do (same errors), computes
    output shapes, makes inputs dense, launches, and falls back to the reference for what the
    kernels do not cover (dtypes outside :data:`DTYPES`, softmax over another axis or rows
    longer than :data:`SOFTMAX_MAX_ROW`). Every ``shared_*`` method has the signature of the
    ``xp.nn`` function it can override (``"nn.avg_pool2d": self.shared_avg_pool2d``). A backend
    supplies four things: :meth:`kernel_empty`, :meth:`kernel_dense`, :meth:`kernel_arg` and
    :meth:`kernel_launch`. The CUDA backend (CuPy arrays) and the OpenCL backend (buffers) both
    do, so the host logic below runs in the OpenCL backend's tests on PoCL too. Arrays of
    another backend or device (NumPy's included) are refused with a BackendMismatchError.
    """

    #: The namespace the kernels serve (found at the first call, from :meth:`kernel_empty`).
    _kernel_target: Any = None

    @abstractmethod
    def kernel_empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A new C-contiguous array of this backend."""

    @abstractmethod
    def kernel_dense(self, x: Any) -> Any:
        """``x`` C-contiguous from its buffer's first element (a copy only when it is not)."""

    @abstractmethod
    def kernel_arg(self, x: Any) -> Any:
        """What a launch passes for the dense array ``x`` (the array, or its buffer)."""

    @abstractmethod
    def kernel_launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        """Run kernel ``name`` of the ``dtype`` build over ``n`` work items, asynchronously."""

    # -- helpers ----------------------------------------------------------------------------------
    def _kernel_xp(self, op: str, *arrays: Any) -> Any:
        """The namespace of ``arrays``, which must be this host's backend and device (a clear
        BackendMismatchError otherwise, never a kernel launched on another backend's array)."""
        return _interop.kernel_namespace(self, op, *arrays)

    def _launch_into(self, out: Any, name: str, *args: Any) -> Any:
        """Launch an element kernel ``name(n, out, *args)`` over every element of ``out``."""
        n = math.prod(out.shape)
        if n:
            self.kernel_launch(out.dtype, name, n, np.int64(n), self.kernel_arg(out), *args)
        return out

    def _step_product(self, xp: Any, a: Any, b: Any) -> Any:
        """``a @ b`` inside a recurrent layer's per-step loop, whose shapes and dtypes
        :func:`arraycore._nn_rnn.check_lstm` (or the GRU's check) already checked: the backend's
        own ``matmul`` where this host is the backend (CUDA, OpenCL), skipping the namespace's
        argument checks, which cost more host time than the launch on PoCL; else ``xp``'s."""
        own = getattr(self, "matmul", None)
        return own(a, b) if own is not None else xp.matmul(a, b)

    def lstm_steps_forward(
        self, xp: Any, us: Any, h0: Any | None, c0: Any | None, state: Any
    ) -> bool:
        """Run :meth:`shared_lstm`'s loop over the time steps with the backend's own fused
        step kernel (the recurrent product and the cell in one launch), if it has one for these
        arrays; ``state`` holds the loop's dense arrays ``(xs, c, h, gates, cs, tanh_c, y)``
        (``c`` and ``h`` holding copies of ``c0`` and ``h0`` where given). False: the shared
        loop runs."""
        return False

    def lstm_steps_backward(
        self, xp: Any, u: Any, dy: Any | None, dh_n: Any | None, has_dc: bool, c0: Any | None,
        state: Any,
    ) -> bool:  # fmt: skip
        """Run :meth:`shared_lstm_backward`'s loop with the backend's own fused step kernel, if
        it has one; ``state`` holds ``(dc, gates, cs, tanh_c, dz)``. False: the shared loop."""
        return False

    def _dense_arg(self, x: Any) -> Any:
        return self.kernel_arg(self.kernel_dense(x))

    def shared_im2col(self, x: Any, win: Any) -> Any:
        """``(C*KH*KW, N*OH*OW)`` columns of the (implicitly zero-padded) NCHW input ``x``."""
        shape = (win.c * win.kh * win.kw, win.n * win.out_h * win.out_w)
        out = self.kernel_empty(shape, x.dtype)
        return self._launch_into(out, "im2col", self._dense_arg(x), *geometry(win))

    def shared_col2im(self, cols: Any, win: Any) -> Any:
        """The adjoint of :meth:`shared_im2col`: an ``(N, C, H, W)`` image."""
        out = self.kernel_empty((win.n, win.c, win.h, win.w), cols.dtype)
        return self._launch_into(out, "col2im", self._dense_arg(cols), *geometry(win))

    #: dtypes the hooks :meth:`im2col`, :meth:`col2im`, :meth:`max_pool` and
    #: :meth:`max_pool_backward` serve (a backend with kernels of its own for more dtypes widens
    #: it); the convolutions and max pooling fall back to the reference otherwise.
    hook_dtypes: tuple[str, ...] = DTYPES

    def im2col(self, x: Any, win: Any) -> Any:
        """The columns the convolutions multiply: :meth:`shared_im2col` unless the backend has
        a kernel of its own (the OpenCL backend reads strided input in place)."""
        return self.shared_im2col(x, win)

    def im2row(self, x: Any, win: Any) -> Any:
        """The transpose of :meth:`im2col`, ``(N*OH*OW, C*KH*KW)``, for backends whose GEMM
        runs the filter gradient faster on it than on the transposed columns (OpenCL with
        CLBlast); None (the default) to multiply by the transposed columns (views of
        :meth:`im2col`'s, which the GEMM reads as a transposed operand)."""
        return None

    def matmul_reads_batch_strides(self, dtype: Any) -> bool:
        """Whether this backend's matmul multiplies a batch of strided views (a stride per
        operand, 0 for a shared one) without copying them. Then the convolutions multiply
        image by image: the forward product writes ``(N, O, OH*OW)``, already NCHW, instead of
        an ``(O, N*OH*OW)`` product transposed by a copy; the filter gradient sums per-image
        products where that sum is smaller than ``dy`` (instead of copying ``dy`` channels
        first). For products of ``dtype``; False by default (OpenCL with arraycore's GEMM kernels says True)."""
        return False

    def col2im(self, cols: Any, win: Any) -> Any:
        """The adjoint of :meth:`im2col` (:meth:`shared_col2im` by default)."""
        return self.shared_col2im(cols, win)

    def max_pool(self, x: Any, win: Any) -> Any:
        """Max pooling of ``x`` over ``win`` (the shared kernel unless the backend has its own)."""
        out = self.kernel_empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
        return self._launch_into(out, "max_pool", self._dense_arg(x), *geometry(win))

    def max_pool_backward(self, dy: Any, x: Any, win: Any) -> Any:
        """The gradient of :meth:`max_pool` (each window's first maximum receives its ``dy``)."""
        out = self.kernel_empty((win.n, win.c, win.h, win.w), dy.dtype)
        args = (self._dense_arg(x), self._dense_arg(dy), *geometry(win))
        return self._launch_into(out, "max_pool_backward", *args)

    def accelerated(self, op: str, win: Any, *arrays: Any) -> Any:
        """A library's result for convolution ``op`` (``conv2d`` with ``x, w``,
        ``conv2d_backward_data`` with ``dy, w``, ``conv2d_backward_filter`` with ``x, dy``), or
        None to use im2col/col2im and the backend's matmul. The CUDA backend tries cuDNN here."""
        return None

    # -- convolutions: im2col/col2im + one matmul for the whole batch -----------------------------
    def _channels_first(self, xp: Any, y: Any) -> Any:
        """``(N, C, H, W)`` as the ``(C, N*H*W)`` matrix the column layout multiplies."""
        n, c, h, w = (int(s) for s in y.shape)
        return xp.reshape(xp.permute_dims(y, (1, 0, 2, 3)), (c, n * h * w))

    @staticmethod
    def _matrix(xp: Any, w: Any) -> Any:
        """Weights ``(O, C, KH, KW)`` (or ``(C_in, C_out, KH, KW)``) as rows."""
        return xp.reshape(w, (int(w.shape[0]), math.prod(int(s) for s in w.shape[1:])))

    def shared_conv2d(
        self, x: Any, w: Any, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
    ) -> Any:
        xp = self._kernel_xp("conv2d", x, w)
        win = conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
        _nn.check_float("conv2d", xp.isdtype, x=x, w=w)
        found = self.accelerated("conv2d", win, x, w)
        if found is not None:
            return found
        if dtype_name(x.dtype) not in self.hook_dtypes:
            return _nn.conv2d(xp, x, w, stride=stride, padding=padding, dilation=dilation)
        o = int(w.shape[0])
        cols = self.im2col(x, win)
        if self.matmul_reads_batch_strides(x.dtype):
            # (N, C*KH*KW, OH*OW) views of the columns, each image's product written in place
            per_image = xp.reshape(cols, (int(cols.shape[0]), win.n, win.out_h * win.out_w))
            y3 = xp.matmul(self._matrix(xp, w), xp.permute_dims(per_image, (1, 0, 2)))
            return xp.reshape(y3, (win.n, o, win.out_h, win.out_w))
        y2 = xp.matmul(self._matrix(xp, w), cols)  # one GEMM per batch
        y4 = xp.reshape(y2, (o, win.n, win.out_h, win.out_w))
        return self.kernel_dense(xp.permute_dims(y4, (1, 0, 2, 3)))

    def shared_conv2d_backward_data(
        self,
        dy: Any,
        w: Any,
        x_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Any:
        op = "conv2d_backward_data"
        xp = self._kernel_xp(op, dy, w)
        win = conv_window(op, x_shape, w.shape, stride, padding, dilation)
        check_output_shape(op, "dy", dy.shape, win, int(w.shape[0]))
        _nn.check_float(op, xp.isdtype, dy=dy, w=w)
        found = self.accelerated(op, win, dy, w)
        if found is not None:
            return found
        if dtype_name(dy.dtype) not in self.hook_dtypes:
            return _nn.conv2d_backward_data(
                xp, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
            )
        flipped = self._flipped_padding(win)
        if flipped is not None:
            # Stride 1: dx is dy convolved with the flipped, transposed kernel (an im2col of dy
            # and one GEMM with k = O*KH*KW, as the forward pass; no col2im gather).
            wt = self.kernel_dense(xp.permute_dims(xp.flip(w, axis=(2, 3)), (1, 0, 2, 3)))
            return self.shared_conv2d(dy, wt, padding=flipped, dilation=win.dilation)
        w2 = self._matrix(xp, w)
        cols = xp.matmul(xp.permute_dims(w2, (1, 0)), self._channels_first(xp, dy))
        return self.col2im(cols, win)

    @staticmethod
    def _flipped_padding(win: Any) -> Any:
        """The padding of the convolution of ``dy`` that gives the input gradient of stride-1
        window ``win`` (``dilation * (k - 1) - pad`` per side), or None: strided windows, or a
        side padded by more than the kernel spans (its gradient would need cropping)."""
        if tuple(win.stride) != (1, 1):
            return None
        spans = (win.dilation[0] * (win.kh - 1), win.dilation[1] * (win.kw - 1))
        pads = tuple((span - a, span - b) for span, (a, b) in zip(spans, win.pads, strict=True))
        return pads if min(min(p) for p in pads) >= 0 else None

    def shared_conv2d_backward_filter(
        self,
        x: Any,
        dy: Any,
        w_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Any:
        op = "conv2d_backward_filter"
        xp = self._kernel_xp(op, x, dy)
        win = conv_window(op, x.shape, w_shape, stride, padding, dilation)
        o = int(w_shape[0])
        check_output_shape(op, "dy", dy.shape, win, o)
        _nn.check_float(op, xp.isdtype, x=x, dy=dy)
        found = self.accelerated(op, win, x, dy)
        if found is not None:
            return found
        if dtype_name(x.dtype) not in self.hook_dtypes:
            return _nn.conv2d_backward_filter(
                xp, x, dy, w_shape, stride=stride, padding=padding, dilation=dilation
            )
        taps, pixels = win.c * win.kh * win.kw, win.out_h * win.out_w
        rows = self.im2row(x, win)
        if rows is None:
            cols = self.im2col(x, win)
            rows = xp.permute_dims(cols, (1, 0))
            rows3 = xp.permute_dims(xp.reshape(cols, (taps, win.n, pixels)), (1, 2, 0))
        else:
            rows3 = xp.reshape(rows, (win.n, pixels, taps))
        if self.matmul_reads_batch_strides(x.dtype) and taps <= pixels:
            # the sum over images of dy[n] (O, OH*OW) @ rows[n] (OH*OW, C*KH*KW) (views of the
            # columns, read in place), whose (N, O, C*KH*KW) partial products are no bigger
            # than dy
            per_image = xp.matmul(xp.reshape(dy, (win.n, o, pixels)), rows3)
            return xp.reshape(xp.sum(per_image, axis=0), (o, win.c, win.kh, win.kw))
        dw = xp.matmul(self._channels_first(xp, dy), rows)
        return xp.reshape(dw, (o, win.c, win.kh, win.kw))

    def shared_conv2d_transpose(
        self,
        x: Any,
        w: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        output_padding: Any = 0,
    ) -> Any:
        op = "conv2d_transpose"
        xp = self._kernel_xp(op, x, w)
        win = conv_transpose_window(op, x.shape, w.shape, stride, padding, dilation, output_padding)
        _nn.check_float(op, xp.isdtype, x=x, w=w)
        if dtype_name(x.dtype) not in self.hook_dtypes:
            return _nn.conv2d_transpose(
                xp, x, w, stride=stride, padding=padding, dilation=dilation,
                output_padding=output_padding,
            )  # fmt: skip
        w2 = self._matrix(xp, w)
        cols = xp.matmul(xp.permute_dims(w2, (1, 0)), self._channels_first(xp, x))
        return self.col2im(cols, win)

    # -- pooling ----------------------------------------------------------------------------------
    def shared_max_pool2d(
        self, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Any:
        xp = self._kernel_xp("max_pool2d", x)
        win = pool_window("max_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("max_pool2d", xp.isdtype, x=x)
        if dtype_name(x.dtype) not in self.hook_dtypes:
            return _nn.max_pool2d(xp, x, kernel_size, stride, padding)
        return self.max_pool(x, win)

    def shared_max_pool2d_backward(
        self, dy: Any, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Any:
        op = "max_pool2d_backward"
        xp = self._kernel_xp(op, dy, x)
        win = pool_window(op, x.shape, kernel_size, stride, padding)
        check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy, x=x)
        if dtype_name(x.dtype) not in self.hook_dtypes:
            return _nn.max_pool2d_backward(xp, dy, x, kernel_size, stride, padding)
        return self.max_pool_backward(dy, x, win)

    def shared_avg_pool2d(
        self,
        x: Any,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Any:
        xp = self._kernel_xp("avg_pool2d", x)
        win = pool_window("avg_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("avg_pool2d", xp.isdtype, x=x)
        if dtype_name(x.dtype) not in DTYPES:
            return _nn.avg_pool2d(xp, x, kernel_size, stride, padding, count_include_pad)
        out = self.kernel_empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
        flag = np.int32(bool(count_include_pad))
        return self._launch_into(out, "avg_pool", self._dense_arg(x), *geometry(win), flag)

    def shared_avg_pool2d_backward(
        self,
        dy: Any,
        x_shape: Any,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Any:
        op = "avg_pool2d_backward"
        xp = self._kernel_xp(op, dy)
        win = pool_window(op, x_shape, kernel_size, stride, padding)
        check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy)
        if dtype_name(dy.dtype) not in DTYPES:
            return _nn.avg_pool2d_backward(
                xp, dy, x_shape, kernel_size, stride, padding, count_include_pad
            )
        out = self.kernel_empty((win.n, win.c, win.h, win.w), dy.dtype)
        flag = np.int32(bool(count_include_pad))
        args = (self._dense_arg(dy), *geometry(win), flag)
        return self._launch_into(out, "avg_pool_backward", *args)

    # -- softmax family ---------------------------------------------------------------------------
    @staticmethod
    def _rows(x: Any, ax: int) -> tuple[int, int] | None:
        """``(rows, cols)`` of ``x`` for the one-work-item-per-row kernels, or None where they do
        not take it (not the last axis, a dtype they are not built for, an empty or long row)."""
        ndim = len(x.shape)
        cols = int(x.shape[ax]) if ndim else 0
        if ax != ndim - 1 or dtype_name(x.dtype) not in DTYPES or not 0 < cols <= SOFTMAX_MAX_ROW:
            return None
        return math.prod(int(s) for s in x.shape) // cols, cols

    def _softmax_rows(self, x: Any, axis: Any, op: str, log_mode: int) -> Any:
        """The row kernel's result, or None where the reference must run."""
        xp = self._kernel_xp(op, x)
        _nn.check_float(op, xp.isdtype, x=x)
        (ax,) = _nn.axis_tuple(axis, len(x.shape), op)
        layout = self._rows(x, ax)
        if layout is None:
            return None
        rows, cols = layout
        out = self.kernel_empty(tuple(int(s) for s in x.shape), x.dtype)
        args = (np.int64(rows), np.int64(cols), self.kernel_arg(out), self._dense_arg(x))
        self.kernel_launch(x.dtype, "softmax_rows", rows, *args, np.int32(log_mode))
        return out

    def shared_softmax(self, x: Any, axis: int = -1) -> Any:
        out = self._softmax_rows(x, axis, "softmax", 0)
        return _nn.softmax(namespace_of(x), x, axis) if out is None else out

    def shared_log_softmax(self, x: Any, axis: int = -1) -> Any:
        out = self._softmax_rows(x, axis, "log_softmax", 1)
        return _nn.log_softmax(namespace_of(x), x, axis) if out is None else out

    def shared_softmax_backward(self, dy: Any, y: Any, axis: int = -1) -> Any:
        """:func:`arraycore._nn.softmax_backward` in one launch, one work item per row (a
        product, a sum, a difference and a product otherwise), along the last axis of operands
        of one dtype; the reference elsewhere."""
        op = "softmax_backward"
        xp = self._kernel_xp(op, dy, y)
        ax = _nn.check_softmax_backward(xp.isdtype, dy, y, axis)
        layout = self._rows(y, ax) if dy.dtype == y.dtype else None
        if layout is None:
            return _nn.softmax_backward(xp, dy, y, axis)
        rows, cols = layout
        out = self.kernel_empty(tuple(int(s) for s in y.shape), y.dtype)
        args = (np.int64(rows), np.int64(cols), self.kernel_arg(out))
        self.kernel_launch(
            y.dtype, "softmax_backward_rows", rows, *args, self._dense_arg(dy), self._dense_arg(y)
        )
        return out

    def shared_softmax_cross_entropy(
        self, logits: Any, labels: Any, scale: float = 1.0
    ) -> tuple[Any, Any]:
        op = "softmax_cross_entropy"
        xp = self._kernel_xp(op, logits, labels)
        classes = _nn.check_cross_entropy(op, xp.isdtype, logits, labels)
        rows = math.prod(int(s) for s in logits.shape[:-1])
        if (
            dtype_name(logits.dtype) not in DTYPES
            or not 0 < classes <= SOFTMAX_MAX_ROW
            or rows == 0
        ):
            return _nn.softmax_cross_entropy(xp, logits, labels, scale)
        labels64 = xp.astype(labels, xp.int64, copy=False)
        dlogits = self.kernel_empty(tuple(int(s) for s in logits.shape), logits.dtype)
        row_loss = self.kernel_empty((rows,), logits.dtype)
        args = (
            np.int64(rows), np.int64(classes), self.kernel_arg(dlogits),
            self.kernel_arg(row_loss), self._dense_arg(logits), self._dense_arg(labels64),
            logits.dtype.type(scale),
        )  # fmt: skip
        self.kernel_launch(logits.dtype, "softmax_xent_rows", rows, *args)
        return xp.sum(row_loss), dlogits

    # -- GELU -------------------------------------------------------------------------------------------
    def _gelu(self, op: str, approximate: str, **arrays: Any) -> Any:
        """One launch of the element kernel ``op`` over ``arrays`` (in kernel argument order), or
        None where the reference must run (a dtype the kernels are not built for)."""
        xp = self._kernel_xp(op, *arrays.values())
        _nn.check_gelu(op, xp.isdtype, approximate, **arrays)
        x = arrays["x"]
        if dtype_name(x.dtype) not in DTYPES:
            return None
        kernel = op if approximate == "tanh" else op.replace("gelu", "gelu_erf", 1)
        out = self.kernel_empty(tuple(int(s) for s in x.shape), x.dtype)
        return self._launch_into(out, kernel, *(self._dense_arg(a) for a in arrays.values()))

    def shared_gelu(self, x: Any, *, approximate: str = "none") -> Any:
        out = self._gelu("gelu", approximate, x=x)
        return _nn.gelu(namespace_of(x), x, approximate=approximate) if out is None else out

    def shared_gelu_backward(self, dy: Any, x: Any, *, approximate: str = "none") -> Any:
        out = self._gelu("gelu_backward", approximate, dy=dy, x=x)
        if out is None:
            return _nn.gelu_backward(namespace_of(x), dy, x, approximate=approximate)
        return out

    # -- ReLU ----------------------------------------------------------------------------------------
    def shared_relu_backward(self, dy: Any, y: Any) -> Any:
        """:func:`arraycore._nn.relu_backward` in one launch (a comparison, a cast and a product
        otherwise: three passes)."""
        xp = self._kernel_xp("relu_backward", dy, y)
        _nn.check_relu_backward(xp.isdtype, dy, y)
        if dtype_name(dy.dtype) not in DTYPES:
            return _nn.relu_backward(xp, dy, y)
        out = self.kernel_empty(tuple(int(s) for s in dy.shape), dy.dtype)
        return self._launch_into(out, "relu_backward", self._dense_arg(dy), self._dense_arg(y))

    # -- batch normalisation ----------------------------------------------------------------------
    #: Elements of a channel one work item of the statistics kernels sums (whole samples).
    BN_CHUNK = 4096

    def _bn_geometry(self, x: Any) -> tuple[Any, ...]:
        """The statistics kernels' ``(C, N, HW, samples per chunk, chunks)`` of (N, C) or
        (N, C, H, W) ``x``, as kernel arguments."""
        n, c = int(x.shape[0]), int(x.shape[1])
        hw = math.prod(int(s) for s in x.shape[2:])
        spc = max(1, self.BN_CHUNK // max(hw, 1))
        return tuple(np.int64(v) for v in (c, n, hw, spc, -(-n // spc)))

    def shared_batch_norm(
        self, x: Any, gamma: Any, beta: Any, *, eps: float = 1e-5
    ) -> tuple[Any, Any, Any]:
        """:func:`arraycore._nn_batchnorm.batch_norm` in three launches: chunk statistics, their
        merge per channel (Chan's update: one pass over ``x`` for the variance instead of the
        reference's centred copy), then the normalisation."""
        return self._batch_norm(x, gamma, beta, eps, relu=False)

    def shared_batch_norm_relu(
        self, x: Any, gamma: Any, beta: Any, *, eps: float = 1e-5
    ) -> tuple[Any, Any, Any]:
        """:func:`arraycore._nn_batchnorm.batch_norm_relu`: :meth:`shared_batch_norm`'s launches,
        the ReLU applied as the last one writes ``y`` (no launch of its own)."""
        return self._batch_norm(x, gamma, beta, eps, relu=True)

    def _batch_norm(
        self, x: Any, gamma: Any, beta: Any, eps: float, *, relu: bool
    ) -> tuple[Any, Any, Any]:
        op = "batch_norm_relu" if relu else "batch_norm"
        xp = self._kernel_xp(op, x, gamma, beta)
        _nn.check_batch_norm(xp.isdtype, x, gamma, beta, eps, op=op)
        shape = tuple(int(s) for s in x.shape)
        total = math.prod(shape)
        if dtype_name(x.dtype) not in DTYPES or total == 0:
            reference = _nn.batch_norm_relu if relu else _nn.batch_norm
            return reference(xp, x, gamma, beta, eps)
        geo = self._bn_geometry(x)
        c, hw, chunks, dt = int(geo[0]), geo[2], int(geo[4]), x.dtype
        part_mean, part_m2 = (self.kernel_empty((c, chunks), dt) for _ in range(2))
        mean, inv_std = self.kernel_empty((c,), dt), self.kernel_empty((c,), dt)
        dense = self._dense_arg(x)
        parts = (self.kernel_arg(part_mean), self.kernel_arg(part_m2))
        self.kernel_launch(dt, "bn_chunk_stats", c * chunks, *geo, *parts, dense)
        stats = (self.kernel_arg(mean), self.kernel_arg(inv_std))
        self.kernel_launch(dt, "bn_merge_stats", c, *geo, *stats, *parts, dt.type(eps))
        y = self.kernel_empty(shape, dt)
        args = (self.kernel_arg(y), dense, *stats, self._dense_arg(gamma), self._dense_arg(beta))
        head = (np.int64(total), geo[0], hw, np.int32(relu))
        self.kernel_launch(dt, "bn_normalize", total, *head, *args)
        return y, mean, inv_std

    def shared_batch_norm_backward(
        self, dy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any
    ) -> tuple[Any, Any, Any]:
        """:func:`arraycore._nn_batchnorm.batch_norm_backward` in three launches: per chunk
        ``sum(dy)`` and ``sum(dy (x - mean))``, their sums per channel, then ``dx``."""
        return self._batch_norm_backward(dy, x, gamma, mean, inv_std, None)

    def shared_batch_norm_relu_backward(
        self, dy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any, y: Any
    ) -> tuple[Any, Any, Any]:
        """:func:`arraycore._nn_batchnorm.batch_norm_relu_backward` in
        :meth:`shared_batch_norm_backward`'s three launches, which form the ReLU's gradient
        ``dy * (y > 0)`` as they read ``dy`` (never stored, no launch of its own)."""
        return self._batch_norm_backward(dy, x, gamma, mean, inv_std, y)

    def _batch_norm_backward(
        self, dy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any, y: Any
    ) -> tuple[Any, Any, Any]:
        relu = y is not None
        op = "batch_norm_relu_backward" if relu else "batch_norm_backward"
        given = (dy, x, gamma, mean, inv_std, y) if relu else (dy, x, gamma, mean, inv_std)
        xp = self._kernel_xp(op, *given)
        if relu:
            _nn.check_batch_norm_relu_backward(xp.isdtype, dy, x, gamma, mean, inv_std, y)
        else:
            _nn.check_batch_norm_backward(xp.isdtype, dy, x, gamma, mean, inv_std)
        shape = tuple(int(s) for s in x.shape)
        total = math.prod(shape)
        if dtype_name(x.dtype) not in DTYPES or total == 0:
            if relu:
                return _nn.batch_norm_relu_backward(xp, dy, x, gamma, mean, inv_std, y)
            return _nn.batch_norm_backward(xp, dy, x, gamma, mean, inv_std)
        geo = self._bn_geometry(x)
        c, hw, chunks, dt = int(geo[0]), geo[2], int(geo[4]), x.dtype
        part_dy, part_dyx = (self.kernel_empty((c, chunks), dt) for _ in range(2))
        dgamma, dbeta = self.kernel_empty((c,), dt), self.kernel_empty((c,), dt)
        d_dy, d_x, d_mean, d_inv = (self._dense_arg(a) for a in (dy, x, mean, inv_std))
        d_y = self._dense_arg(y) if relu else d_dy  # any buffer where there is no ReLU
        flag = np.int32(relu)
        parts = (self.kernel_arg(part_dy), self.kernel_arg(part_dyx))
        grads_in = (d_dy, d_y, d_x, d_mean)
        self.kernel_launch(dt, "bn_chunk_grads", c * chunks, *geo, flag, *parts, *grads_in)
        grads = (self.kernel_arg(dgamma), self.kernel_arg(dbeta))
        self.kernel_launch(dt, "bn_merge_grads", c, geo[0], geo[4], *grads, *parts, d_inv)
        dx = self.kernel_empty(shape, dt)
        count = dt.type(total // c)
        head = (np.int64(total), geo[0], hw, count, flag)
        args = (self.kernel_arg(dx), d_dy, d_y, d_x, d_mean, d_inv, self._dense_arg(gamma), *grads)
        self.kernel_launch(dt, "bn_backward_data", total, *head, *args)
        return dx, dgamma, dbeta

    # -- layer normalisation ----------------------------------------------------------------------
    def shared_layer_norm(
        self, x: Any, gamma: Any, beta: Any, *, eps: float = 1e-5
    ) -> tuple[Any, Any, Any]:
        xp = self._kernel_xp("layer_norm", x, gamma, beta)
        axes = _nn.check_layer_norm(xp.isdtype, x, gamma, beta, eps)
        d = math.prod(int(s) for s in gamma.shape)
        lead = tuple(int(s) for s in x.shape[: len(x.shape) - len(axes)])
        rows = math.prod(lead)
        if dtype_name(x.dtype) not in DTYPES or rows == 0 or d == 0:
            return _nn.layer_norm(xp, x, gamma, beta, eps)
        y = self.kernel_empty(tuple(int(s) for s in x.shape), x.dtype)
        mean, inv_std = self.kernel_empty(lead, x.dtype), self.kernel_empty(lead, x.dtype)
        args = (
            np.int64(rows), np.int64(d), self.kernel_arg(y), self.kernel_arg(mean),
            self.kernel_arg(inv_std), self._dense_arg(x), self._dense_arg(gamma),
            self._dense_arg(beta), x.dtype.type(eps),
        )  # fmt: skip
        self.kernel_launch(x.dtype, "layer_norm_rows", rows, *args)
        return y, mean, inv_std

    def shared_layer_norm_backward(
        self, dy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any
    ) -> tuple[Any, Any, Any]:
        op = "layer_norm_backward"
        xp = self._kernel_xp(op, dy, x, gamma, mean, inv_std)
        axes = _nn.check_layer_norm_backward(xp.isdtype, dy, x, gamma, mean, inv_std)
        d = math.prod(int(s) for s in gamma.shape)
        rows = math.prod(int(s) for s in x.shape[: len(x.shape) - len(axes)])
        if dtype_name(x.dtype) not in DTYPES or rows == 0 or d == 0:
            return _nn.layer_norm_backward(xp, dy, x, gamma, mean, inv_std)
        dx = self.kernel_empty(tuple(int(s) for s in x.shape), x.dtype)
        dgamma = self.kernel_empty(tuple(int(s) for s in gamma.shape), x.dtype)
        dbeta = self.kernel_empty(tuple(int(s) for s in gamma.shape), x.dtype)
        dense = [self._dense_arg(a) for a in (dy, x, gamma, mean, inv_std)]
        sizes = (np.int64(rows), np.int64(d))
        self.kernel_launch(
            x.dtype, "layer_norm_backward_rows", rows, *sizes, self.kernel_arg(dx), *dense
        )
        grads = (self.kernel_arg(dgamma), self.kernel_arg(dbeta))
        self.kernel_launch(
            x.dtype, "layer_norm_param_grads", d, *sizes, *grads, dense[0], dense[1], *dense[3:]
        )
        return dx, dgamma, dbeta

    # -- the LSTM layer ---------------------------------------------------------------------------
    def shared_lstm(
        self,
        x: Any,
        w: Any,
        u: Any,
        b: Any,
        h0: Any | None = None,
        c0: Any | None = None,
    ) -> tuple[Any, Any, Any, Any]:
        """:func:`arraycore._nn_rnn.lstm` with one kernel per time step for the gates and the
        cell (the reference makes about fifteen element-wise calls per step): the input
        projection of every step is one product, then per step one product with ``u`` and one
        launch."""
        xp = self._kernel_xp("lstm", *(a for a in (x, w, u, b, h0, c0) if a is not None))
        n, t_len, _, hidden = _nn_rnn.check_lstm(xp.isdtype, x, w, u, b, h0, c0)
        if dtype_name(x.dtype) not in DTYPES:
            return _nn_rnn.lstm(xp, x, w, u, b, h0, c0)
        dt = x.dtype
        xs, us, _ = _nn_rnn.projection(xp, x, w, u, b)
        xs = self.kernel_dense(xs)
        seq, g4 = (n, t_len, hidden), (n, t_len, 4 * hidden)
        y, cs, tanh_c = (self.kernel_empty(seq, dt) for _ in range(3))
        gates = self.kernel_empty(g4, dt)
        h = xp.asarray(h0, copy=True) if h0 is not None else self.kernel_empty((n, hidden), dt)
        c = xp.asarray(c0, copy=True) if c0 is not None else self.kernel_empty((n, hidden), dt)
        h, c = self.kernel_dense(h), self.kernel_dense(c)
        outputs = [self.kernel_arg(a) for a in (c, h, gates, cs, tanh_c, y)]
        sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(t_len))
        has_h, has_c = h0 is not None, c0 is not None
        if self.lstm_steps_forward(xp, us, h0, c0, (xs, c, h, gates, cs, tanh_c, y)):
            return y, h, c, (gates, tanh_c, cs)
        for t in range(t_len):
            z = self.kernel_dense(self._step_product(xp, h, us)) if has_h else xs
            flags = (np.int32(has_h), np.int32(has_c))
            args = (*sizes, np.int64(t), *flags, self.kernel_arg(z), self.kernel_arg(xs))
            self.kernel_launch(dt, "lstm_cell_forward", n * hidden, *args, *outputs)
            has_h = has_c = True
        return y, h, c, (gates, tanh_c, cs)

    def shared_lstm_backward(
        self,
        dy: Any | None,
        dh_n: Any | None,
        dc_n: Any | None,
        x: Any,
        w: Any,
        u: Any,
        b: Any,
        h0: Any | None,
        c0: Any | None,
        y: Any,
        saved: Any,
    ) -> tuple[Any, Any, Any, Any, Any | None, Any | None]:
        """:func:`arraycore._nn_rnn.lstm_backward`, one kernel per time step for the gates (see
        :meth:`shared_lstm`); the weight gradients as the reference's few products."""
        given = [a for a in (dy, dh_n, dc_n, x, w, u, b, h0, c0, y) if a is not None]
        xp = self._kernel_xp("lstm_backward", *given)
        n, t_len, _, hidden = _nn_rnn.check_lstm(xp.isdtype, x, w, u, b, h0, c0)
        if dtype_name(x.dtype) not in DTYPES:
            return _nn_rnn.lstm_backward(xp, dy, dh_n, dc_n, x, w, u, b, h0, c0, y, saved)
        dt = x.dtype
        gates, tanh_c, cs = (self.kernel_dense(a) for a in saved)
        dz = self.kernel_empty((n, t_len, 4 * hidden), dt)
        dc = xp.asarray(dc_n, copy=True) if dc_n is not None else self.kernel_empty((n, hidden), dt)
        dc = self.kernel_dense(dc)
        if self.lstm_steps_backward(
            xp, u, dy, dh_n, dc_n is not None, c0, (dc, gates, cs, tanh_c, dz)
        ):  # the backend's fused steps: only h0's gradient is left, one product (u.T a view)
            dh = (
                self._step_product(xp, dz[:, 0], xp.permute_dims(u, (1, 0)))
                if h0 is not None
                else None
            )
        else:
            dh = self._lstm_backward_steps(
                xp, dy, dh_n, dc_n is not None, c0, u, dc, gates, cs, tanh_c, dz
            )
        dx, dw, du, db = _nn_rnn.weight_grads(xp, dz, x, w, h0, y)
        return dx, dw, du, db, dh if h0 is not None else None, dc if c0 is not None else None

    def _lstm_backward_steps(
        self, xp: Any, dy: Any | None, dh_n: Any | None, has_dc: bool, c0: Any | None, u: Any,
        dc: Any, gates: Any, cs: Any, tanh_c: Any, dz: Any,
    ) -> Any:  # fmt: skip
        """:meth:`shared_lstm_backward`'s loop, one cell kernel and one product per step, from
        the last step to the first; fills ``dz`` and ``dc``, returns ``dh`` of the first."""
        n, t_len, g4 = (int(d) for d in dz.shape)
        hidden, dt = g4 // 4, dz.dtype
        u_t = _nn_rnn.transposed_u(xp, u)
        dz_t = self.kernel_empty((n, g4), dt)
        dh = dh_n
        fallback = self.kernel_arg(gates)  # read by no launch whose flag is off
        dy_arg = self._dense_arg(dy) if dy is not None else fallback
        c0_arg = self._dense_arg(c0) if c0 is not None else fallback
        sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(t_len))
        saved_args = [self.kernel_arg(a) for a in (gates, cs, tanh_c, dz, dz_t)]
        for t in range(t_len - 1, -1, -1):
            flags = (dy is not None, dh is not None, has_dc, c0 is not None)
            dh_arg = self._dense_arg(dh) if dh is not None else fallback
            args = (*sizes, np.int64(t), *(np.int32(f) for f in flags), dy_arg, dh_arg)
            self.kernel_launch(
                dt, "lstm_cell_backward", n * hidden, *args, self.kernel_arg(dc), c0_arg,
                *saved_args,
            )  # fmt: skip
            has_dc = True
            dh = self._step_product(xp, dz_t, u_t)
        return dh

    # -- the GRU recurrence -----------------------------------------------------------------------
    def shared_gru_sequence(
        self, xw: Any, u: Any, b: Any, h0: Any | None = None
    ) -> tuple[Any, Any]:
        """:func:`arraycore._nn_gru.gru_sequence` with one kernel per time step for the gates
        and the state (the reference makes about fifteen element-wise calls per step): per
        step one product with ``u`` (none before the first state) and one launch."""
        xp = self._kernel_xp("gru_sequence", *(a for a in (xw, u, b, h0) if a is not None))
        n, t_len, hidden = _nn_gru.check_gru("nn.gru_sequence", xp.isdtype, xw, u, b, h0)
        if dtype_name(xw.dtype) not in DTYPES:
            return _nn_gru.gru_sequence(xp, xw, u, b, h0)
        dt = xw.dtype
        seq = (n, t_len, hidden)
        y, cand, rec_n = (self.kernel_empty(seq, dt) for _ in range(3))
        ru = self.kernel_empty((n, t_len, 2 * hidden), dt)
        h = xp.asarray(h0, copy=True) if h0 is not None else self.kernel_empty((n, hidden), dt)
        h = self.kernel_dense(h)
        fixed = [self._dense_arg(xw), self._dense_arg(b)]
        outputs = [self.kernel_arg(a) for a in (h, ru, cand, rec_n, y)]
        sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(t_len))
        has_h = h0 is not None
        for t in range(t_len):
            hid = (
                self.kernel_arg(self.kernel_dense(self._step_product(xp, h, u)))
                if has_h
                else fixed[1]
            )
            args = (*sizes, np.int64(t), np.int32(has_h), hid, *fixed, *outputs)
            self.kernel_launch(dt, "gru_cell_forward", n * hidden, *args)
            has_h = True
        return y, (ru, cand, rec_n)

    def shared_gru_sequence_backward(
        self, dy: Any, u: Any, h0: Any | None, y: Any, saved: Any
    ) -> tuple[Any, Any, Any, Any | None]:
        """:func:`arraycore._nn_gru.gru_sequence_backward`, one kernel per time step (see
        :meth:`shared_gru_sequence`); the weight gradients as the reference's one product."""
        op = "gru_sequence_backward"
        xp = self._kernel_xp(op, *(a for a in (dy, u, h0, y) if a is not None))
        n, t_len, hidden = _nn_gru.check_gru_backward(xp.isdtype, dy, u, h0, y, saved)
        if dtype_name(y.dtype) not in DTYPES:
            return _nn_gru.gru_sequence_backward(xp, dy, u, h0, y, saved)
        dt = y.dtype
        ru, cand, rec_n = (self.kernel_dense(a) for a in saved)
        u_t = _nn_rnn.transposed_u(xp, u)
        dxw, dhid = (self.kernel_empty((n, t_len, 3 * hidden), dt) for _ in range(2))
        dhz = self.kernel_empty((n, hidden), dt)
        y_d = self.kernel_dense(y)
        unused = self.kernel_arg(y_d)  # read by no launch whose flag is off
        h0_arg = self._dense_arg(h0) if h0 is not None else unused
        sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(t_len))
        tail = (
            self.kernel_arg(dhz),
            h0_arg,
            *(self.kernel_arg(a) for a in (y_d, ru, cand, rec_n, dxw, dhid)),
        )
        dy_arg, g = self._dense_arg(dy), None
        for t in range(t_len - 1, -1, -1):
            g_arg = self.kernel_arg(g) if g is not None else unused
            flags = (np.int32(g is not None), np.int32(h0 is not None))
            args = (*sizes, np.int64(t), *flags, dy_arg, g_arg, *tail)
            self.kernel_launch(dt, "gru_cell_backward", n * hidden, *args)
            if t > 0 or h0 is not None:
                g = self.kernel_dense(self._step_product(xp, dhid[:, t], u_t))
        du, db = _nn_gru.weight_grads(xp, _nn_gru.previous_states(xp, y_d, h0), dhid)
        return dxw, du, db, (g + dhz) if h0 is not None else None

    # -- scaled dot-product attention ------------------------------------------------------------
    #: Most leading (batch, head) axes the fused attention kernels map a mask through; more go to
    #: the reference.
    ATTN_MAX_LEAD = 4

    def _attn_mask_args(
        self, q: Any, k: Any, mask: Any, causal: bool, unused: Any
    ) -> tuple[Any, ...]:
        """The ``MASK`` arguments of the attention kernels for at most :attr:`ATTN_MAX_LEAD`
        leading axes (as :meth:`_attn_plan` ensures): the mask's kind and buffer, the last three
        leading sizes, the mask's element strides over the scores padded to that many leading
        axes (0 where it broadcasts), the causal flag."""
        lead = tuple(int(s) for s in q.shape[:-2])
        scores = (
            (1,) * (self.ATTN_MAX_LEAD - len(lead)) + lead + (int(q.shape[-2]), int(k.shape[-2]))
        )
        kind, mb, ma = 0, unused, unused
        strides = [0] * len(scores)
        if mask is not None:
            dense = self.kernel_dense(mask)
            is_bool = mask.dtype == np.bool_
            kind = 1 if is_bool else 2
            mb, ma = (
                (self.kernel_arg(dense), unused) if is_bool else (unused, self.kernel_arg(dense))
            )
            shape = (1,) * (len(scores) - len(mask.shape)) + tuple(int(s) for s in mask.shape)
            step = 1
            for axis in range(len(shape) - 1, -1, -1):
                strides[axis] = step if shape[axis] > 1 else 0
                step *= shape[axis]
        sizes = tuple(np.int64(n) for n in scores[1 : self.ATTN_MAX_LEAD])
        return (
            np.int32(kind), mb, ma, *sizes, *(np.int64(s) for s in strides), np.int32(causal),
        )  # fmt: skip

    def _attn_plan(self, q: Any, k: Any, v: Any) -> Any:
        """The dims ``(rows, keys, Tq, Tk, D, Dv)`` the fused kernels run over, or None where the
        reference must run (a dtype they are not built for, an empty array, more leading axes
        than :attr:`ATTN_MAX_LEAD`)."""
        tq, d = int(q.shape[-2]), int(q.shape[-1])
        tk, dv = int(k.shape[-2]), int(v.shape[-1])
        batch = math.prod(int(s) for s in q.shape[:-2])
        if dtype_name(q.dtype) not in DTYPES or 0 in (batch, tq, tk, d, dv):
            return None
        if len(q.shape) - 2 > self.ATTN_MAX_LEAD:
            return None
        return batch * tq, batch * tk, tq, tk, d, dv

    def shared_scaled_dot_product_attention(
        self,
        q: Any,
        k: Any,
        v: Any,
        mask: Any = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Any = None,
        recompute: bool | None = None,
    ) -> tuple[Any, Any]:
        """Attention in one fused launch (``attn_forward``: no ``(Tq, Tk)`` array is written,
        ``saved`` is the rows' log-sum-exp) where the caller asks for the memory-saving form
        (``recompute=True``, or ``None`` from ``RECOMPUTE_ELEMENTS`` scores on); else the
        reference's products and softmax kernel, which keep the probabilities and are faster
        for short sequences (the backend's GEMMs against one scalar loop per row)."""
        op = "scaled_dot_product_attention"
        xp = self._kernel_xp(op, *(a for a in (q, k, v, mask, dropout_mask) if a is not None))
        factor = _nn.check_attention(op, xp.isdtype, q, k, v, mask, dropout_mask, scale)
        plan = self._attn_plan(q, k, v)
        if recompute is None and plan is not None:
            scores = math.prod(int(s) for s in q.shape[:-1]) * int(k.shape[-2])
            recompute = scores >= _nn_attention.RECOMPUTE_ELEMENTS
        if plan is None or not recompute:
            return _nn.scaled_dot_product_attention(
                xp, q, k, v, mask, scale=scale, causal=causal, dropout_mask=dropout_mask,
                recompute=recompute,
            )  # fmt: skip
        rows, _, tq, tk, d, dv = plan
        dt = q.dtype
        q_d, k_d, v_d = (self.kernel_dense(a) for a in (q, k, v))
        unused = self.kernel_arg(q_d)  # read by no launch whose flag is off
        masks = self._attn_mask_args(q, k, mask, causal, unused)
        out = self.kernel_empty((*tuple(int(s) for s in q.shape[:-1]), dv), dt)
        lse = self.kernel_empty(tuple(int(s) for s in q.shape[:-1]), dt)
        drop = self._dense_arg(dropout_mask) if dropout_mask is not None else unused
        args = (
            np.int64(rows), np.int64(tq), np.int64(tk), np.int64(d), np.int64(dv),
            self.kernel_arg(out), self.kernel_arg(lse), *(self.kernel_arg(a) for a in (q_d, k_d, v_d)),
            *masks, np.int32(dropout_mask is not None), drop, dt.type(factor),
        )  # fmt: skip
        self.kernel_launch(dt, "attn_forward", rows, *args)
        return out, lse

    def shared_scaled_dot_product_attention_backward(
        self,
        dy: Any,
        q: Any,
        k: Any,
        v: Any,
        out: Any,
        saved: Any,
        mask: Any = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Any = None,
    ) -> tuple[Any, Any, Any]:
        """``(dq, dk, dv)`` in two fused launches (per query row, then per key row), recomputing
        the probabilities from the rows' log-sum-exp; the reference where ``saved`` holds the
        probabilities."""
        op = "scaled_dot_product_attention_backward"
        given = (dy, q, k, v, out, saved, mask, dropout_mask)
        xp = self._kernel_xp(op, *(a for a in given if a is not None))
        factor, has_p = _nn.check_attention_backward(
            xp.isdtype, dy, q, k, v, out, saved, mask, dropout_mask, scale
        )
        plan = self._attn_plan(q, k, v)
        if plan is None or has_p or saved.dtype != q.dtype:
            return _nn.scaled_dot_product_attention_backward(
                xp, dy, q, k, v, out, saved, mask, scale=scale, causal=causal,
                dropout_mask=dropout_mask,
            )  # fmt: skip
        rows, keys, tq, tk, d, dv = plan
        dt = q.dtype
        dense = [self.kernel_dense(a) for a in (dy, out, q, k, v, saved)]
        dy_a, out_a, q_a, k_a, v_a, lse_a = (self.kernel_arg(a) for a in dense)
        masks = self._attn_mask_args(q, k, mask, causal, q_a)
        drop = (
            np.int32(dropout_mask is not None),
            self._dense_arg(dropout_mask) if dropout_mask is not None else q_a,
            dt.type(factor),
        )
        dq, dk, dv_ = (self.kernel_empty(tuple(int(s) for s in a.shape), dt) for a in (q, k, v))
        delta = self.kernel_empty((rows,), dt)
        dims = (np.int64(tq), np.int64(tk), np.int64(d), np.int64(dv))
        self.kernel_launch(
            dt, "attn_backward_query", rows, np.int64(rows), *dims, self.kernel_arg(dq),
            self.kernel_arg(delta), dy_a, out_a, q_a, k_a, v_a, lse_a, *masks, *drop,
        )  # fmt: skip
        self.kernel_launch(
            dt, "attn_backward_key", keys, np.int64(keys), *dims, self.kernel_arg(dk),
            self.kernel_arg(dv_), dy_a, q_a, k_a, v_a, lse_a, self.kernel_arg(delta), *masks, *drop,
        )  # fmt: skip
        return dq, dk, dv_

    def shared_overrides(self) -> dict[str, Any]:
        """``{"nn.<name>": method}`` for every ``xp.nn`` function this class serves."""
        return {f"nn.{name}": getattr(self, f"shared_{name}") for name in SHARED_NN}
