"""The sub-namespaces ``nn``, ``inplace`` and ``random`` (with its Generator), and the info object."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _checks, _host, _nn, _optable
from ._base import ArrayOrScalar, Scalar
from ._dtypes import DTYPES, isdtype
from .backend import Array, Shape, check_fuse_args

if TYPE_CHECKING:
    from ._namespace import Namespace


class _SubNamespace:
    """Base of the sub-namespaces (``nn``, ``inplace``, ``random``): they hold the parent."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._xp!r}>"


class NNNamespace(_SubNamespace):
    """Neural-network kernels outside the standard (``xp.nn``); references in ``_nn``.

    Every function is written once in :mod:`arraycore._nn` from the namespace's own functions,
    so every backend has it; backends override them with real kernels (cuDNN, CLBlast).
    """

    def conv2d(
        self, x: Array, w: Array, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
    ) -> Array:
        """2-D cross-correlation, NCHW input, (O, C, KH, KW) weights, zero padding."""
        return _nn.conv2d(self._xp, x, w, stride=stride, padding=padding, dilation=dilation)

    def conv2d_backward_data(
        self,
        dy: Array,
        w: Array,
        x_shape: Shape,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        """Gradient of :meth:`conv2d` with respect to its input."""
        return _nn.conv2d_backward_data(
            self._xp, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
        )

    def conv2d_backward_filter(
        self,
        x: Array,
        dy: Array,
        w_shape: Shape,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        """Gradient of :meth:`conv2d` with respect to its weights."""
        return _nn.conv2d_backward_filter(
            self._xp, x, dy, w_shape, stride=stride, padding=padding, dilation=dilation
        )

    def conv2d_transpose(
        self,
        x: Array,
        w: Array,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        output_padding: Any = 0,
    ) -> Array:
        """Transposed convolution, (C_in, C_out, KH, KW) weights as in PyTorch."""
        return _nn.conv2d_transpose(
            self._xp,
            x,
            w,
            stride=stride,
            padding=padding,
            dilation=dilation,
            output_padding=output_padding,
        )

    def max_pool2d(self, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Array:
        """Max pooling over NCHW windows; padding counts as -inf."""
        return _nn.max_pool2d(self._xp, x, kernel_size, stride, padding)

    def max_pool2d_backward(
        self, dy: Array, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Array:
        """Gradient of :meth:`max_pool2d`: each window's first maximum receives it."""
        return _nn.max_pool2d_backward(self._xp, dy, x, kernel_size, stride, padding)

    def avg_pool2d(
        self,
        x: Array,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        """Average pooling over NCHW windows."""
        return _nn.avg_pool2d(self._xp, x, kernel_size, stride, padding, count_include_pad)

    def avg_pool2d_backward(
        self,
        dy: Array,
        x_shape: Shape,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        """Gradient of :meth:`avg_pool2d`."""
        return _nn.avg_pool2d_backward(
            self._xp, dy, x_shape, kernel_size, stride, padding, count_include_pad
        )

    def gelu(self, x: Array, *, approximate: str = "none") -> Array:
        """GELU: exact, ``x Phi(x)`` with erf (``approximate="none"``, the default, as PyTorch's
        ``torch.nn.functional.gelu`` and Keras's), or the tanh approximation (``"tanh"``,
        PyTorch's ``gelu(x, approximate="tanh")``)."""
        return _nn.gelu(self._xp, x, approximate=approximate)

    def gelu_backward(self, dy: Array, x: Array, *, approximate: str = "none") -> Array:
        """Gradient of :meth:`gelu` at ``x``, times ``dy``."""
        return _nn.gelu_backward(self._xp, dy, x, approximate=approximate)

    def relu_backward(self, dy: Array, y: Array) -> Array:
        """Gradient of ReLU from its output ``y = maximum(x, 0)``: ``dy * (y > 0)`` in one pass
        (``dy`` where the unit is on, 0 where it is off; NaN from a NaN or infinite ``dy`` there)."""
        return _nn.relu_backward(self._xp, dy, y)

    def affine(self, x: Array, w: Array, bias: Array) -> Array:
        """``x @ w + bias`` for ``x (..., K)``, ``w (K, N)``, ``bias (N,)`` of one real floating
        dtype: a dense layer's product and bias as one op, which a backend may run as one call
        (the NumPy backend hands large float32 ones to oneDNN's product with its bias); elsewhere
        the product (of ``x``'s rows as one 2-D product, not a batch of products) and an
        in-place add."""
        xp = self._xp
        _nn.check_affine(xp, x, w, bias)
        shape = tuple(x.shape)
        if len(shape) > 2:
            y = xp.matmul(xp.reshape(x, (math.prod(shape[:-1]), shape[-1])), w)
            y = xp.reshape(y, (*shape[:-1], int(w.shape[1])))
        else:
            y = xp.matmul(x, w)
        return xp.inplace.add(y, bias, out=y)

    def bias_relu(self, x: Array, bias: Array, *, axis: int = 1, out: Array | None = None) -> Array:
        """``maximum(x + bias, 0)`` with the 1-D ``bias`` along ``axis`` of ``x`` (NaN stays
        NaN), written into ``out`` where given (an array of ``x``'s shape and dtype, ``x``
        itself allowed): a layer's bias and ReLU as one op (a convolution's channels on axis 1
        of NCHW, an affine layer's units on the last axis of its rows), which a backend may run
        as one pass (the NumPy backend does); elsewhere the sum and an in-place ``maximum``."""
        xp = self._xp
        ax = _nn.check_bias_relu(xp, x, bias, axis, out)
        b = xp.reshape(bias, _nn.bias_shape(x.shape, ax))
        y = xp.add(x, b) if out is None else xp.inplace.add(x, b, out=out)
        return xp.inplace.maximum(y, 0.0, out=y)

    def bias_relu_backward(self, dy: Array, y: Array, *, axis: int = 1) -> tuple[Array, Array]:
        """``(dx, dbias)``: the gradients of :meth:`bias_relu` from its output ``y``, ``dx``
        being :meth:`relu_backward` ``(dy, y)`` and ``dbias`` its sum over every axis but
        ``axis`` (one pass on the NumPy backend)."""
        ax = _nn.check_bias_relu_backward(self._xp, dy, y, axis)
        dx = self.relu_backward(dy, y)
        return dx, self._xp.sum(dx, axis=_nn.other_axes(len(y.shape), ax))

    def softmax(self, x: Array, axis: int = -1) -> Array:
        """Numerically stable softmax along ``axis``."""
        return _nn.softmax(self._xp, x, axis)

    def softmax_backward(self, dy: Array, y: Array, axis: int = -1) -> Array:
        """Gradient of :meth:`softmax` along ``axis`` from its output ``y``:
        ``y * (dy - sum(dy * y, axis))``, with ``dy`` the gradient of ``y``."""
        return _nn.softmax_backward(self._xp, dy, y, axis)

    def log_softmax(self, x: Array, axis: int = -1) -> Array:
        """Numerically stable log-softmax along ``axis``."""
        return _nn.log_softmax(self._xp, x, axis)

    def logsumexp(self, x: Array, axis: Any = None, keepdims: bool = False) -> Array:
        """``log(sum(exp(x)))`` without overflow."""
        return _nn.logsumexp(self._xp, x, axis, keepdims)

    def one_hot(self, indices: Array, num_classes: int, *, dtype: Any = None) -> Array:
        """One-hot rows for integer ``indices``: shape ``indices.shape + (num_classes,)``;
        an index outside ``[0, num_classes)`` is a ValueError (see :func:`arraycore.checks`)."""
        _checks.one_hot(self._xp, indices, num_classes)
        return _nn.one_hot(self._xp, indices, num_classes, dtype=dtype)

    def softmax_cross_entropy(
        self, logits: Array, labels: Array, scale: float = 1.0
    ) -> tuple[Array, Array]:
        """``(loss, dlogits)``: ``-scale * sum(log_softmax(logits)[..., labels])`` over every
        example (integer ``labels``, classes last) and its gradient with respect to ``logits``,
        ``(softmax(logits) - one_hot(labels)) * scale``; a label outside ``[0, classes)`` is a
        ValueError (see :func:`arraycore.checks`)."""
        _checks.softmax_cross_entropy(self._xp, logits, labels)
        return _nn.softmax_cross_entropy(self._xp, logits, labels, scale)

    def batch_norm(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        """Training-mode batch normalisation of (N, C) or (N, C, H, W) ``x``: ``(y, mean,
        inv_std)`` with the batch statistics over every axis but 1 (``mean`` and ``inv_std =
        1/sqrt(var + eps)`` of shape ``(C,)``, biased variance), ``y = (x - mean) * inv_std *
        gamma + beta``."""
        return _nn.batch_norm(self._xp, x, gamma, beta, eps)

    def batch_norm_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
    ) -> tuple[Array, Array, Array]:
        """``(dx, dgamma, dbeta)``: the gradients of :meth:`batch_norm` given its ``mean`` and
        ``inv_std``."""
        return _nn.batch_norm_backward(self._xp, dy, x, gamma, mean, inv_std)

    def batch_norm_relu(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        """:meth:`batch_norm` followed by a ReLU: ``(maximum(y, 0), mean, inv_std)`` (NaN stays
        NaN), the pair of a convolutional block as one op, which a backend may run as one pass
        (the NumPy backend does); elsewhere it is :meth:`batch_norm` and an in-place
        ``maximum``, so a backend that only overrides :meth:`batch_norm` gets its kernel here."""
        _nn.check_batch_norm(self._xp, x, gamma, beta, eps, op="batch_norm_relu")
        y, mean, inv_std = self.batch_norm(x, gamma, beta, eps=eps)
        return self._xp.inplace.maximum(y, 0.0, out=y), mean, inv_std

    def batch_norm_relu_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array, y: Array
    ) -> tuple[Array, Array, Array]:
        """``(dx, dgamma, dbeta)``: the gradients of :meth:`batch_norm_relu` given its ``mean``,
        ``inv_std`` and output ``y``, that is :meth:`batch_norm_backward` of :meth:`relu_backward`
        ``(dy, y)`` (one pass on the NumPy backend, the ReLU's gradient never stored)."""
        _nn.check_batch_norm_relu_backward(self._xp, dy, x, gamma, mean, inv_std, y)
        return self.batch_norm_backward(self.relu_backward(dy, y), x, gamma, mean, inv_std)

    def layer_norm(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        """Layer normalisation over the trailing ``gamma.ndim`` axes of ``x`` (PyTorch's
        ``layer_norm`` with ``normalized_shape = gamma.shape``): ``(y, mean, inv_std)``, the
        statistics of each row of shape ``x.shape[:-gamma.ndim]``, biased variance,
        ``y = (x - mean) * inv_std * gamma + beta``."""
        return _nn.layer_norm(self._xp, x, gamma, beta, eps)

    def layer_norm_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
    ) -> tuple[Array, Array, Array]:
        """``(dx, dgamma, dbeta)``: the gradients of :meth:`layer_norm` given its ``mean`` and
        ``inv_std``."""
        return _nn.layer_norm_backward(self._xp, dy, x, gamma, mean, inv_std)

    def gru_sequence(
        self, xw: Array, u: Array, b: Array, h0: Array | None = None
    ) -> tuple[Array, Any]:
        """The GRU recurrence over projected inputs ``xw (N, T, 3H)`` (gates ``r, z, n``; the
        input projection and its bias are the caller's) with ``u (H, 3H)``, the recurrent bias
        ``b (3H,)`` and ``h0 (N, H)`` (zero when ``None``), PyTorch's GRU: ``(y (N, T, H),
        saved)``, ``saved`` being for :meth:`gru_sequence_backward` only (see
        :mod:`arraycore._nn_gru`)."""
        return _nn.gru_sequence(self._xp, xw, u, b, h0)

    def gru_sequence_backward(
        self, dy: Array, u: Array, h0: Array | None, y: Array, saved: Any
    ) -> tuple[Array, Array, Array, Array | None]:
        """``(dxw, du, db, dh0)`` of :meth:`gru_sequence` from ``dy``, the gradient of its
        output ``y``; ``dh0`` is ``None`` where ``h0`` was."""
        return _nn.gru_sequence_backward(self._xp, dy, u, h0, y, saved)

    def lstm(
        self,
        x: Array,
        w: Array,
        u: Array,
        b: Array,
        h0: Array | None = None,
        c0: Array | None = None,
    ) -> tuple[Array, Array, Array, Any]:
        """One batch-first LSTM layer over ``x (N, T, C)`` with ``w (C, 4H)``, ``u (H, 4H)``,
        ``b (4H,)`` (gates ``i, f, g, o``) from ``h0``, ``c0`` ``(N, H)`` (zero when ``None``):
        ``(y (N, T, H), h_n, c_n, saved)``, ``saved`` being for :meth:`lstm_backward` only
        (see :mod:`arraycore._nn_rnn`)."""
        return _nn.lstm(self._xp, x, w, u, b, h0, c0)

    def lstm_backward(
        self,
        dy: Array | None,
        dh_n: Array | None,
        dc_n: Array | None,
        x: Array,
        w: Array,
        u: Array,
        b: Array,
        h0: Array | None,
        c0: Array | None,
        y: Array,
        saved: Any,
    ) -> tuple[Array, Array, Array, Array, Array | None, Array | None]:
        """``(dx, dw, du, db, dh0, dc0)`` of :meth:`lstm` from the gradients of its outputs
        (``None``: zero); ``dh0``/``dc0`` are ``None`` where ``h0``/``c0`` were."""
        return _nn.lstm_backward(self._xp, dy, dh_n, dc_n, x, w, u, b, h0, c0, y, saved)

    def scaled_dot_product_attention(
        self,
        q: Array,
        k: Array,
        v: Array,
        mask: Array | None = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Array | None = None,
        recompute: bool | None = None,
    ) -> tuple[Array, Array]:
        """PyTorch's ``scaled_dot_product_attention``: ``(out, saved)`` with ``out =
        softmax(q @ k^T * scale + mask) @ v`` for ``q (..., Tq, d)``, ``k (..., Tk, d)``, ``v
        (..., Tk, dv)`` sharing their leading axes (``scale``: ``1/sqrt(d)`` by default; a
        boolean ``mask`` keeps where true, a floating one is added; ``causal``: query ``i`` sees
        keys ``j <= i``; ``dropout_mask``: the scores' shape, multiplies the probabilities).
        ``saved`` is the rows' log-sum-exp ``(..., Tq)`` or, where the backend keeps them (the
        reference, for small scores unless ``recompute``), the probabilities ``(..., Tq, Tk)``;
        pass it to :meth:`scaled_dot_product_attention_backward`."""
        return _nn.scaled_dot_product_attention(
            self._xp, q, k, v, mask, scale=scale, causal=causal, dropout_mask=dropout_mask,
            recompute=recompute,
        )  # fmt: skip

    def scaled_dot_product_attention_backward(
        self,
        dy: Array,
        q: Array,
        k: Array,
        v: Array,
        out: Array,
        saved: Array,
        mask: Array | None = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Array | None = None,
    ) -> tuple[Array, Array, Array]:
        """``(dq, dk, dv)`` of :meth:`scaled_dot_product_attention` from ``dy``, the gradient of
        its ``out``, given the ``saved`` it returned and the same mask, scale, causal flag and
        dropout mask."""
        return _nn.scaled_dot_product_attention_backward(
            self._xp, dy, q, k, v, out, saved, mask, scale=scale, causal=causal,
            dropout_mask=dropout_mask,
        )  # fmt: skip

    def scatter_add(self, x: Array, indices: Array, values: Array, axis: int = 0) -> Array:
        """A copy of ``x`` with ``values`` added at 1-D ``indices`` along ``axis``.

        Repeated indices accumulate. This is the backward pass of :func:`take` (embeddings).
        """
        out = self._xp.astype(x, x.dtype, copy=True)
        self._xp.inplace.scatter_add(out, indices, values, axis=axis)
        return out


class InplaceNamespace(_SubNamespace):
    """In-place updates for training loops (``xp.inplace``), outside the standard.

    Every element-wise function of the namespace is available as ``xp.inplace.<name>(..., out=)``
    writing into an existing array (which must have the result's shape and dtype, and may be one
    of the inputs), plus :meth:`copy`, :meth:`fill` and :meth:`scatter_add`.
    """

    def __getattr__(self, name: str) -> Callable[..., Array]:
        fn = self._derived(name)
        setattr(self, name, fn)
        return fn

    def _derived(self, name: str) -> Callable[..., Array]:
        """arraycore's own ``inplace.<name>``, with the dtype rules of ``<name>``."""
        xp = self._xp
        bk = xp._backend
        fn: Callable[..., Array]
        entry = _optable.BY_NAME.get(name)
        if entry is not None and not entry.primitive:
            whole = getattr(xp, name)

            def fn(*args: ArrayOrScalar, out: Array) -> Array:
                return self.copy(whole(*args), out=out)

        elif name in _optable.UNARY_PRIMITIVES:

            def fn(x: Array, /, *, out: Array) -> Array:
                xp._check_out(name, out, x)
                operand = xp._unary_input(name, x)
                if operand is None:  # the result is x itself (round of integers, ...)
                    return self.copy(x, out=out)
                if operand.dtype.kind != "f" and name in _optable.NON_FLOAT_CONSTANT:
                    return self.copy(_optable.NON_FLOAT_CONSTANT[name](xp, operand), out=out)
                if name in xp._fallbacks:  # optional, not the backend's: derived, then copied
                    return self.copy(xp._fallbacks[name](xp, operand), out=out)
                return bk.unary(name, operand, out=out)

        elif name in _optable.BINARY_PRIMITIVES:

            def fn(x1: ArrayOrScalar, x2: ArrayOrScalar, /, *, out: Array) -> Array:
                constant = xp._constant_comparison(name, x1, x2)
                if constant is not None:
                    xp._check_out(name, out, x2 if type(x1) is int else x1)
                    return self.fill(constant, out=out)
                a, b = xp._promote(name, x1, x2, like=out)
                xp._check_out(name, out, a, b)
                if name in xp._fallbacks:
                    return self.copy(xp._fallbacks[name](xp, a, b), out=out)
                return bk.binary(name, a, b, out=out)

        else:
            raise AttributeError(f"arraycore.inplace has no function {name!r}")
        fn.__name__ = name
        return fn

    def copy(self, src: ArrayOrScalar, *, out: Array) -> Array:
        """Write ``src`` (broadcast, cast to ``out.dtype``) into ``out``; returns ``out``."""
        xp = self._xp
        xp._check("inplace.copy", out)
        key = tuple(slice(None) for _ in out.shape)
        xp._backend.setitem(out, key, _checks.setitem_value(xp, "inplace.copy", out, key, src))
        return out

    def fill(self, value: Scalar, *, out: Array) -> Array:
        """Set every element of ``out`` to the scalar ``value``; returns ``out``."""
        return self.copy(value, out=out)

    def fuse(self, fn: Callable[..., Any], *, scalar_operands: bool = False) -> Callable[..., Any]:
        """``fn`` compiled into one kernel where the backend can fuse element-wise chains.

        ``fn`` takes arrays and Python scalars, computes with arithmetic operators, the
        namespace's element-wise functions and ``xp.inplace.<name>(..., out=a)`` where ``a`` is
        one of its array arguments, and returns ``None``, an array or a tuple of arrays; no
        reductions, indexing or reads to the host. Calling the result is calling ``fn``: a backend
        with a fuser traces it into one kernel launch instead of one per operation; backends
        without one run ``fn`` as it is. Make the fused function once (not per step): tracing is
        what costs.

        ``scalar_operands=True`` promises that ``fn`` uses its scalar arguments only as operands
        of operations on arrays, never in arithmetic with each other or with constants (``1.0 -
        b1``: pass ``1 - b1`` as an argument instead). The fusers fuse only such functions: CUDA
        with ``cupy.fuse`` (CuPy 14.2 computes arithmetic between scalars in float16), OpenCL by
        recording the ``xp.inplace`` calls of a chain made of nothing else into one kernel
        (anything else runs as it is), NumPy with numba (``arraycore[numba]``) by compiling that
        chain into one loop over the threads for arrays of 16384 items or more, to the bit the
        plain calls' results. nnlayers' optimiser updates keep the promise. A fuser calls ``fn``
        once per signature with stand-ins of its arguments to trace it.

        >>> import arraycore
        >>> xp = arraycore.namespace("numpy")
        >>> def momentum(v, g, mu):
        ...     xp.inplace.multiply(v, mu, out=v)
        ...     xp.inplace.add(v, g, out=v)
        >>> step = xp.inplace.fuse(momentum, scalar_operands=True)
        >>> v = xp.ones(3)
        >>> step(v, xp.ones(3), 0.5)
        >>> v.tolist()
        [1.5, 1.5, 1.5]
        """
        check_fuse_args(fn, scalar_operands)
        return fn

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int = 0) -> Array:
        """``out[..., indices[i], ...] += values[..., i, ...]`` in place; repeats accumulate."""
        xp = self._xp
        ax, idx, vals = _checks.scatter_add_args(xp, "scatter_add", out, indices, values, axis)
        xp._backend.scatter_add(out, idx, vals, ax)
        return out


class RandomNamespace(_SubNamespace):
    """Seeded random numbers (``xp.random``), outside the standard.

    ``xp.random.default_rng(seed)`` gives a :class:`Generator`; for a given seed it draws the
    same numbers every time on a given backend (different backends may draw different streams).
    """

    def default_rng(self, seed: int = 0) -> Generator:
        """A new generator seeded with ``seed``."""
        return Generator(self._xp, seed)


_UNSET: Any = object()


class Generator:
    """A reproducible random generator on one backend and device, with the signatures of
    NumPy's ``numpy.random.Generator``: ``random(size)``, ``uniform(low, high, size)``,
    ``normal(loc, scale, size)``, ``standard_normal(size)``, ``integers(low, high, size)``,
    ``permutation(x)``, ``choice(a, size, replace, p)``, plus ``bernoulli(p, size)``.

    ``size`` is the shape of the draw (``None``: one value, a 0-d array); ``loc``/``scale`` and
    ``low``/``high`` may be arrays (or sequences), broadcast against ``size`` as NumPy does, so
    ``g.normal((2.0, 3.0))`` is two draws of means 2 and 3 on every backend. ``dtype`` picks the
    floating dtype (default: the namespace's default float). The keyword ``shape=`` (and
    ``mean=``/``std=`` for ``normal``) of arraycore before NumPy's names still works.

    >>> import arraycore
    >>> g = arraycore.namespace("numpy").random.default_rng(0)
    >>> g.normal(size=(2, 3)).shape, g.normal((2.0, 3.0)).shape, g.integers(0, 10, size=4).dtype
    ((2, 3), (2,), dtype('int64'))
    """

    def __init__(self, xp: Namespace, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"random: the seed must be a non-negative int, got {seed!r}")
        self._xp = xp
        self.seed = int(seed)
        self._state = xp._backend.rng_state(self.seed)
        self._host = np.random.default_rng(self.seed)

    def __repr__(self) -> str:
        return f"Generator(seed={self.seed}, backend={self._xp.name!r})"

    # -- arguments ------------------------------------------------------------------------------
    def _size(self, size: Any, shape: Any, op: str) -> Shape | None:
        """The draw's shape from NumPy's ``size`` or arraycore's older ``shape=`` (None: not
        given, the parameters' broadcast shape)."""
        if shape is not _UNSET:
            if size is not None:
                raise TypeError(f"{op}: give size= or shape=, not both")
            size = shape
        return None if size is None else self._xp._shape(size, op)

    def _param(self, value: Any, dt: np.dtype, op: str) -> Any:
        """A distribution parameter: a Python number as it is, anything else an array of
        ``dt`` on this namespace (sequences and NumPy arrays copied over)."""
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            if isinstance(value, np.generic):
                return float(value)
            return self._xp.asarray(value, dtype=dt)
        return float(value)

    def _shape_of(self, size: Shape | None, op: str, *params: Any) -> Shape:
        """The shape of the draw: ``size``, which the array parameters must broadcast to, or
        their broadcast shape."""
        shapes = [tuple(p.shape) for p in params if not isinstance(p, float)]
        if not shapes:
            return () if size is None else size
        try:
            joined = np.broadcast_shapes(*shapes) if size is None else size
            if size is not None and np.broadcast_shapes(size, *shapes) != size:
                raise ValueError
        except ValueError:
            listed = ", ".join(str(s) for s in shapes)
            raise ValueError(
                f"{op}: parameters of shapes {listed} do not broadcast to size {size}"
            ) from None
        return tuple(joined)

    def _scaled(self, z: Any, scale: Any, offset: Any, unit: tuple[float, float]) -> Any:
        """``z * scale + offset``, skipping what is the identity (``unit``: (scale, offset))."""
        xp = self._xp
        if not (isinstance(scale, float) and scale == unit[0]):
            z = xp.multiply(z, scale)
        if not (isinstance(offset, float) and offset == unit[1]):
            z = xp.add(z, offset)
        return z

    # -- floating draws -------------------------------------------------------------------------
    def random(self, size: Any = None, dtype: Any = None) -> Array:
        """Samples from U[0, 1)."""
        return self.uniform(0.0, 1.0, size, dtype)

    def uniform(
        self,
        low: Any = 0.0,
        high: Any = 1.0,
        size: Any = None,
        dtype: Any = None,
        *,
        shape: Any = _UNSET,
    ) -> Array:
        """Samples from U[low, high) (``low``/``high`` numbers or arrays broadcast to ``size``)."""
        op = "random.uniform"
        dt = self._xp._float_dtype(dtype, op)
        lo, hi = self._param(low, dt, op), self._param(high, dt, op)
        out_shape = self._shape_of(self._size(size, shape, op), op, lo, hi)
        u = self._xp._backend.rng_uniform(self._state, out_shape, dt)
        floats = isinstance(lo, float) and isinstance(hi, float)
        width = hi - lo if floats else self._xp.subtract(hi, lo)
        return self._scaled(u, width, lo, (1.0, 0.0))

    def normal(
        self,
        loc: Any = 0.0,
        scale: Any = 1.0,
        size: Any = None,
        dtype: Any = None,
        *,
        shape: Any = _UNSET,
        mean: Any = _UNSET,
        std: Any = _UNSET,
    ) -> Array:
        """Samples from N(loc, scale**2) (Box-Muller on the backend's uniform stream);
        ``mean=``/``std=`` are the older names of ``loc``/``scale``."""
        op = "random.normal"
        if mean is not _UNSET:
            loc = mean
        if std is not _UNSET:
            scale = std
        dt = self._xp._float_dtype(dtype, op)
        m, s = self._param(loc, dt, op), self._param(scale, dt, op)
        if isinstance(s, float) and s < 0:
            raise ValueError(f"{op}: scale must be >= 0, got {s}")
        out_shape = self._shape_of(self._size(size, shape, op), op, m, s)
        return self._scaled(self._standard(out_shape, dt), s, m, (1.0, 0.0))

    def standard_normal(self, size: Any = None, dtype: Any = None) -> Array:
        """Samples from N(0, 1)."""
        op = "random.standard_normal"
        return self._standard(self._size(size, _UNSET, op) or (), self._xp._float_dtype(dtype, op))

    def _standard(self, shape: Shape, dt: np.dtype) -> Array:
        xp = self._xp
        n = math.prod(shape)
        half = (n + 1) // 2
        u1 = xp._backend.rng_uniform(self._state, (half,), dt)
        u2 = xp._backend.rng_uniform(self._state, (half,), dt)
        # 1 - u lies in (0, 1], so the log is finite.
        radius = xp.sqrt(xp.multiply(xp.log(xp.subtract(1.0, u1)), -2.0))
        angle = xp.multiply(u2, 2.0 * math.pi)
        z = xp.concat([xp.multiply(radius, xp.cos(angle)), xp.multiply(radius, xp.sin(angle))])
        return xp.reshape(z[:n], shape)

    def bernoulli(
        self, p: float = 0.5, size: Any = None, dtype: Any = None, *, shape: Any = _UNSET
    ) -> Array:
        """1 with probability ``p``, else 0, in ``dtype`` (default: the default float)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"random.bernoulli: p must lie in [0, 1], got {p}")
        xp = self._xp
        out_shape = self._size(size, shape, "random.bernoulli") or ()
        dt = xp._default_float() if dtype is None else xp._dtype(dtype, "random.bernoulli")
        u = xp._backend.rng_uniform(self._state, out_shape, xp._default_float())
        return xp.astype(xp.less(u, p), dt)

    # -- integer draws (on the host, copied over: the same numbers on every backend) -----------
    def integers(
        self,
        low: int,
        high: int | None = None,
        size: Any = None,
        dtype: Any = "int64",
        endpoint: bool = False,
    ) -> Array:
        """Random integers from ``[low, high)`` (``[0, low)`` with one bound; ``[low, high]``
        with ``endpoint=True``), of an integer ``dtype``."""
        op = "random.integers"
        xp = self._xp
        dt = xp._dtype(dtype, op)
        if dt.kind not in "iu":
            raise TypeError(f"{op}: dtype must be an integer dtype, got {dt}")
        shape = self._size(size, _UNSET, op)
        try:
            drawn = self._host.integers(low, high, size=shape, dtype=dt, endpoint=endpoint)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{op}: {exc}") from None
        return xp._backend.from_numpy(np.ascontiguousarray(drawn, dtype=dt).reshape(shape or ()))

    def permutation(self, x: Any) -> Array:
        """A random permutation of ``arange(x)`` (int64) for an int ``x``; for an array, a
        shuffled copy along its first axis. The order is drawn on the host."""
        xp = self._xp
        if isinstance(x, int | np.integer) and not isinstance(x, bool):
            if x < 0:
                raise ValueError(f"random.permutation: n must be a non-negative int, got {x!r}")
            return xp._backend.from_numpy(self._host.permutation(int(x)).astype(np.int64))
        a = xp.asarray(x)
        if a.ndim == 0:
            raise ValueError("random.permutation: an array to shuffle needs a first axis")
        order = xp._backend.from_numpy(self._host.permutation(int(a.shape[0])).astype(np.int64))
        return xp.take(a, order, axis=0)

    def choice(
        self, a: Any, size: Any = None, replace: bool = True, p: Any = None, shuffle: bool = True
    ) -> Array:
        """Samples from ``arange(a)`` (an int) or from the first axis of an array ``a``, with
        or without replacement, with probabilities ``p``; drawn on the host."""
        op = "random.choice"
        xp = self._xp
        shape = self._size(size, _UNSET, op)
        probs = (
            None
            if p is None
            else np.asarray(
                p if not hasattr(p, "__array_namespace__") else xp.to_numpy(p), dtype=np.float64
            )
        )
        if isinstance(a, int | np.integer) and not isinstance(a, bool):
            n, pool = int(a), None
        else:
            pool = xp.asarray(a)
            if pool.ndim == 0:
                raise ValueError(f"{op}: a must be an int or an array with a first axis")
            n = int(pool.shape[0])
        try:
            index = self._host.choice(n, size=shape, replace=replace, p=probs, shuffle=shuffle)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{op}: {exc}") from None
        index = np.asarray(index, dtype=np.int64)
        picked = xp._backend.from_numpy(np.ascontiguousarray(index).reshape(index.shape))
        if pool is None:
            return picked
        flat = xp.take(pool, xp.reshape(picked, (-1,)), axis=0)
        return xp.reshape(flat, (*index.shape, *pool.shape[1:]))


def _is_float16(kind: Any) -> bool:
    """Whether a ``kind`` argument of ``dtypes()`` names float16 (its name or the dtype)."""
    return kind == "float16" or (isinstance(kind, np.dtype) and kind == np.float16)


class NamespaceInfo:
    """What ``xp.__array_namespace_info__()`` returns (Array API inspection utilities)."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def capabilities(self) -> dict[str, Any]:
        """Capabilities of the default device (boolean indexing, data-dependent shapes, ...)."""
        caps: dict[str, Any] = {
            "boolean indexing": True,
            "data-dependent shapes": True,
            "max dimensions": 64,
        }
        caps.update(self._xp._backend.device.capabilities)
        return caps

    def default_device(self) -> Any:
        """The device arrays are created on."""
        return self._xp._backend.device.id

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        """Default dtypes: float64 where the device has it, else float32."""
        return {
            "real floating": self._xp._default_float(),
            "complex floating": np.dtype("complex128"),
            "integral": np.dtype("int64"),
            "indexing": np.dtype("int64"),
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        """The standard's dtypes this device supports, optionally filtered by kind (a kind name,
        a dtype, or a tuple of those). ``float16``, which the standard does not have, is listed
        only where ``kind`` names it (``kind="float16"``) and the device has it."""
        caps = self._xp._backend.device.capabilities
        names = [n for n in DTYPES if caps.get(n, True)]
        asked = kind if isinstance(kind, tuple) else (kind,)
        if not any(_is_float16(k) for k in asked):
            names = [n for n in names if n != "float16"]
        found = {n: np.dtype(n) for n in names}
        if kind is not None:
            kinds = tuple(np.dtype(k) if _is_float16(k) else k for k in asked)
            found = {n: d for n, d in found.items() if isdtype(d, kinds)}
        return found

    def devices(self) -> list[Any]:
        """All devices of the backend."""
        return [d.id for d in self._xp._backend.devices()]

    # -- outside the standard ---------------------------------------------------------------
    def host_functions(self) -> list[str]:
        """Functions this backend leaves on arraycore's host path: each copies its input to
        the host, computes with NumPy and copies the result back (docs/host-path.md)."""
        return _host.left_on_host(self._xp)

    def memory_stats(self) -> dict[str, int] | None:
        """This device's memory in bytes (``used_bytes``, ``peak_bytes`` since the last
        :meth:`reset_memory_stats`, and whatever else the backend reports), or None where the
        backend does not track device memory (NumPy: host memory is the interpreter's).

        >>> import arraycore
        >>> print(arraycore.namespace("numpy").__array_namespace_info__().memory_stats())
        None
        """
        return self._xp._backend.memory_stats()

    def reset_memory_stats(self) -> None:
        """Start a new peak for :meth:`memory_stats`."""
        self._xp._backend.reset_memory_stats()

    def capture_support(self) -> str | None:
        """``None`` where :meth:`capture` can capture work on this device; else why not, in one
        line (NumPy, OpenCL: every call runs as it comes).

        >>> import arraycore
        >>> arraycore.namespace("numpy").__array_namespace_info__().capture_support()
        'the numpy backend does not capture work (it runs every call as it comes)'
        """
        return self._xp._backend.capture_support()

    def capture(self, fn: Any) -> Any:
        """Capture the device work of one call of ``fn()`` for replay (a CUDA graph on CUDA):
        a :class:`arraycore.backend.Captured` whose ``replay()`` queues the work again and whose
        ``result`` holds what ``fn`` returned, rewritten by each replay. ``fn`` must have run
        eagerly first and make no host copy or synchronisation; where the backend or the work
        cannot be captured this raises :class:`arraycore.CaptureUnsupported` with the reason.
        See ``docs/capture.md``."""
        if not callable(fn):
            raise TypeError(f"capture: expected a function, got {type(fn).__name__}")
        return self._xp._backend.capture(fn)

    def synchronize(self) -> None:
        """Wait until the device has finished the work queued so far: kernels on GPUs and
        OpenCL devices run after their calls return, so a timer read without this measures only
        the host's part. A no-op where calls compute before they return (NumPy)."""
        self._xp._backend.synchronize()
