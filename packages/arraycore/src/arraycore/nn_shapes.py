"""The shape rules of the nn ops, in one place: arraycore's kernels (``xp.nn`` and every
backend's overrides) and nnlayers' ops and layers take their argument forms, checks and output
sizes from here, so the two packages accept and reject exactly the same arguments, with the
same messages.

One rule per op: :func:`conv2d_shape`, :func:`conv2d_transpose_shape` and :func:`pool2d_shape`
check the arguments and return the output shape and the normalised :class:`Geometry2d`; sizes
may be unknown (``None``: nnlayers' symbolic shapes) and stay unknown in the output. The
kernels build their :class:`Window2d` with :func:`conv_window`, :func:`conv_transpose_window`
and :func:`pool_window`, which apply the same rules to concrete shapes.

Argument forms:

- ``kernel_size``, ``stride``, ``dilation``: an int or a pair ``(h, w)`` of ints, each >= 1;
  ``output_padding`` likewise, each >= 0 and smaller than the stride or the dilation.
- ``padding``: an int (all four sides), a pair ``(ph, pw)`` or explicit
  ``((top, bottom), (left, right))``, every entry an int >= 0. Convolutions (and their
  gradients and the transposed convolution) also take ``"valid"`` (no padding) and ``"same"``
  (TensorFlow's rule: output ``ceil(size / stride)``, the odd pixel of padding after the image;
  for the transposed convolution, output ``size * stride``).
- Output sizes round down: ``(in + before + after - dilation*(k-1) - 1) // stride + 1``.

Where arraycore and nnlayers disagreed before this module (each decision follows PyTorch, which
the oracle tests compare against, unless it says otherwise):

- Pooling padding is at most half the kernel on every side (PyTorch's rule, nnlayers' before;
  arraycore allowed any padding smaller than the kernel).
- A size is an int (``operator.index``), never a bool or a float (nnlayers took ``True`` as 1).
- Negative padding is refused in every form (nnlayers missed some explicit forms).
- ``"valid"`` and ``"same"`` are taken by ``xp.nn``'s convolutions too (only nnlayers took
  them). PyTorch's ``conv2d`` takes both but refuses ``"same"`` with a stride > 1; here a
  strided ``"same"`` follows TensorFlow's rule, as nnlayers' layers always did. ``"same"``
  needs the image sizes only when a stride is > 1.
- A kernel of size 0 is refused (nnlayers inferred a shape for it), and so is a transposed
  convolution of an image with no rows or columns (nnlayers inferred a shape; PyTorch refuses
  both).
- Errors name the op (or layer) and the value given; nnlayers adds the node and its inputs.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "Geometry2d",
    "Padding2d",
    "Window2d",
    "check_output_shape",
    "check_pool_padding",
    "conv2d_shape",
    "conv2d_transpose_shape",
    "conv_padding",
    "conv_transpose_padding",
    "conv_transpose_window",
    "conv_window",
    "int_arg",
    "out_size",
    "output_padding_pair",
    "padding2d",
    "padding_arg",
    "pair",
    "pool2d_shape",
    "pool_window",
    "transpose_output",
    "window_output",
]

IntPair = tuple[int, int]
Padding2d = tuple[IntPair, IntPair]
Size = int | None
#: A 4-D shape whose sizes may be unknown (``None``).
Shape4 = tuple[Size, Size, Size, Size]

PADDING_FORMS = "an int, (ph, pw) or ((top, bottom), (left, right)) of ints >= 0"


# -- argument forms -------------------------------------------------------------------------------
def int_arg(value: Any, op: str, name: str) -> int:
    """``value`` as an int (``operator.index``; bools refused), or a TypeError naming ``op``."""
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {value!r}") from None


def pair(value: Any, op: str, name: str, minimum: int) -> IntPair:
    """``value`` (an int or a pair of ints) as ``(h, w)``; each must be >= ``minimum``.

    >>> pair(3, "max_pool2d", "kernel_size", 1)
    (3, 3)
    """
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != 2:
            raise ValueError(f"{op}: {name} must be an int or a pair (h, w), got {value!r}")
        result = (int_arg(value[0], op, name), int_arg(value[1], op, name))
    else:
        v = int_arg(value, op, name)
        result = (v, v)
    if min(result) < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return result


def padding2d(value: Any, op: str) -> Padding2d:
    """``padding`` as ``((top, bottom), (left, right))`` from an int, a pair or that form.

    >>> padding2d((1, 2), "conv2d")
    ((1, 1), (2, 2))
    """
    explicit = (
        isinstance(value, Sequence)
        and len(value) == 2
        and all(isinstance(v, Sequence) and not isinstance(v, str) for v in value)
    )
    try:
        if explicit:
            if len(value[0]) != 2 or len(value[1]) != 2:
                raise ValueError
            (t, b), (left, right) = value
            pads = (
                (int_arg(t, op, "padding"), int_arg(b, op, "padding")),
                (int_arg(left, op, "padding"), int_arg(right, op, "padding")),
            )
            if min(pads[0] + pads[1]) < 0:
                raise ValueError
            return pads
        ph, pw = pair(value, op, "padding", 0)
    except TypeError:
        raise TypeError(f"{op}: padding must be {PADDING_FORMS}, got {value!r}") from None
    except ValueError:
        raise ValueError(f"{op}: padding must be {PADDING_FORMS}, got {value!r}") from None
    return (ph, ph), (pw, pw)


def padding_arg(value: Any, op: str) -> str | Padding2d:
    """A convolution's ``padding`` checked without the sizes it may depend on: ``"valid"``,
    ``"same"``, or the explicit form of :func:`padding2d` (what layers check when made)."""
    if isinstance(value, str):
        if value not in ("valid", "same"):
            raise ValueError(
                f"{op}: padding must be 'valid', 'same' or {PADDING_FORMS}, got {value!r}"
            )
        return value
    return padding2d(value, op)


def output_padding_pair(op: str, value: Any, stride: IntPair, dilation: IntPair) -> IntPair:
    """``output_padding`` as a pair, each smaller than the stride or the dilation."""
    out = pair(value, op, "output_padding", 0)
    if out[0] >= max(stride[0], dilation[0]) or out[1] >= max(stride[1], dilation[1]):
        raise ValueError(
            f"{op}: output_padding {out} must be smaller than stride {stride} or dilation "
            f"{dilation}"
        )
    return out


def check_pool_padding(op: str, pads: Padding2d, kernel: IntPair) -> None:
    """Pooling padding at most half the kernel on every side (PyTorch's rule)."""
    if max(pads[0]) > kernel[0] // 2 or max(pads[1]) > kernel[1] // 2:
        raise ValueError(
            f"{op}: padding {pads} must be at most half of kernel_size {kernel} on every side "
            "(PyTorch's rule: beyond it, windows would hold mostly padding)"
        )


# -- 'valid' and 'same' ---------------------------------------------------------------------------
def _halves(total: int) -> IntPair:
    """Split a padding total, the odd pixel after the image (TensorFlow's and PyTorch's rule)."""
    return total // 2, total - total // 2


def conv_padding(
    op: str,
    padding: Any,
    sizes: Sequence[Size],
    kernel: Sequence[Size],
    stride: IntPair,
    dilation: IntPair,
) -> Padding2d:
    """``padding`` of a convolution over images of ``sizes`` (``(H, W)``, ``None`` while
    unknown) as ``((top, bottom), (left, right))``: ``"valid"``, ``"same"`` or any form
    :func:`padding2d` takes.

    >>> conv_padding("conv2d", "same", (28, 28), (4, 4), (1, 1), (1, 1))
    ((1, 2), (1, 2))
    """
    arg = padding_arg(padding, op)
    if arg == "valid":
        return (0, 0), (0, 0)
    if not isinstance(arg, str):
        return arg
    pads = []
    for n, k, s, d in zip(sizes, kernel, stride, dilation, strict=True):
        if k is None or (n is None and s > 1):
            raise ValueError(
                f"{op}: padding='same' with stride {stride} needs known image sizes and kernel, "
                f"got image {tuple(sizes)} and kernel {tuple(kernel)}"
            )
        # with stride 1 the output keeps the size, whatever it is: d*(k-1) either way
        total = d * (k - 1) if n is None else max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
        pads.append(_halves(total))
    return pads[0], pads[1]


def conv_transpose_padding(
    op: str,
    padding: Any,
    kernel: Sequence[Size],
    stride: IntPair,
    dilation: IntPair,
    output_padding: IntPair,
) -> Padding2d:
    """``padding`` of a transposed convolution: ``"valid"``, ``"same"`` (output ``size *
    stride``; needs ``dilation*(k-1) + 1 + output_padding >= stride``) or explicit."""
    arg = padding_arg(padding, op)
    if arg == "valid":
        return (0, 0), (0, 0)
    if not isinstance(arg, str):
        return arg
    if None in kernel:
        raise ValueError(f"{op}: padding='same' needs a known kernel, got {tuple(kernel)}")
    totals = [
        d * (k - 1) + 1 - s + o
        for k, s, d, o in zip(kernel, stride, dilation, output_padding, strict=True)
        if k is not None
    ]
    if min(totals) < 0:
        raise ValueError(
            f"{op}: padding='same' needs kernel {tuple(kernel)} at least stride {stride} "
            "here; give explicit padding"
        )
    return _halves(totals[0]), _halves(totals[1])


# -- output sizes ---------------------------------------------------------------------------------
def out_size(size: int, before: int, after: int, k: int, stride: int, dilation: int) -> int:
    """Window positions along one axis of ``size`` padded by ``before`` and ``after``."""
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


def window_output(size: Size, pad: IntPair, kernel: Size, stride: int, dilation: int = 1) -> Size:
    """Number of window positions along one axis (``None`` while a size is unknown)."""
    if size is None or kernel is None:
        return None
    return out_size(size, pad[0], pad[1], kernel, stride, dilation)


def transpose_output(
    size: Size, pad: IntPair, kernel: Size, stride: int, dilation: int, output_padding: int
) -> Size:
    """Output size of a transposed convolution along one axis (``None`` while unknown)."""
    if size is None or kernel is None:
        return None
    return (size - 1) * stride - pad[0] - pad[1] + dilation * (kernel - 1) + output_padding + 1


# -- the shape rule of each op --------------------------------------------------------------------
@dataclass(frozen=True)
class Geometry2d:
    """The normalised arguments of one convolution or pooling: what its kernels are called
    with once :func:`conv2d_shape` and its siblings have checked them."""

    kernel: tuple[Size, Size]
    stride: IntPair
    pads: Padding2d
    dilation: IntPair = (1, 1)
    output_padding: IntPair = (0, 0)


def _shape4(shape: Any, op: str, name: str, layout: str) -> Shape4:
    dims = tuple(None if s is None else int_arg(s, op, f"a size of {name}'s shape") for s in shape)
    if len(dims) != 4:
        raise ValueError(f"{op}: {name} must be 4-D {layout}, got shape {dims}")
    return dims[0], dims[1], dims[2], dims[3]


def _check_channels(op: str, x: Shape4, w: Shape4, c: Size, wc: Size) -> None:
    if c is not None and wc is not None and c != wc:
        raise ValueError(f"{op}: x of shape {x} has {c} channels but w of shape {w} expects {wc}")


def _padded(sizes: Sequence[Size], pads: Padding2d) -> tuple[Size, ...]:
    return tuple(None if n is None else n + sum(p) for n, p in zip(sizes, pads))


def _too_small(sizes: Sequence[Size]) -> bool:
    return any(s is not None and s < 1 for s in sizes)


def conv2d_shape(
    op: str, x_shape: Any, w_shape: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> tuple[Shape4, Geometry2d]:
    """The output shape of ``conv2d`` of NCHW ``x`` with ``(O, C, KH, KW)`` weights, and its
    geometry; raises a ValueError or TypeError naming ``op`` for arguments it refuses.

    >>> conv2d_shape("conv2d", (None, 3, 28, 28), (8, 3, 3, 3), stride=2, padding="same")[0]
    (None, 8, 14, 14)
    """
    x = n, c, h, w = _shape4(x_shape, op, "x", "(N, C, H, W)")
    wt = o, wc, kh, kw = _shape4(w_shape, op, "w", "(O, C, KH, KW)")
    s = pair(stride, op, "stride", 1)
    d = pair(dilation, op, "dilation", 1)
    pads = conv_padding(op, padding, (h, w), (kh, kw), s, d)
    _check_channels(op, x, wt, c, wc)
    if _too_small((kh, kw)):
        raise ValueError(f"{op}: w of shape {wt} has an empty kernel")
    out_h = window_output(h, pads[0], kh, s[0], d[0])
    out_w = window_output(w, pads[1], kw, s[1], d[1])
    if _too_small((out_h, out_w)):
        span = tuple(None if k is None else di * (k - 1) + 1 for k, di in zip((kh, kw), d))
        raise ValueError(
            f"{op}: kernel {(kh, kw)} with dilation {d} spans {span}, larger than the padded "
            f"input {_padded((h, w), pads)} (x of shape {x}, padding {pads})"
        )
    return (n, o, out_h, out_w), Geometry2d((kh, kw), s, pads, d)


def conv2d_transpose_shape(
    op: str,
    x_shape: Any,
    w_shape: Any,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    output_padding: Any = 0,
) -> tuple[Shape4, Geometry2d]:
    """The output shape of ``conv2d_transpose`` of NCHW ``x`` with ``(C_in, C_out, KH, KW)``
    weights (``(H-1)*stride - top - bottom + dilation*(KH-1) + output_padding + 1`` rows), and
    its geometry.

    >>> conv2d_transpose_shape("conv2d_transpose", (1, 16, 7, 7), (16, 8, 4, 4), 2, "same")[0]
    (1, 8, 14, 14)
    """
    x = n, cin, h, w = _shape4(x_shape, op, "x", "(N, C_in, H, W)")
    wt = wcin, cout, kh, kw = _shape4(w_shape, op, "w", "(C_in, C_out, KH, KW)")
    s = pair(stride, op, "stride", 1)
    d = pair(dilation, op, "dilation", 1)
    opad = output_padding_pair(op, output_padding, s, d)
    pads = conv_transpose_padding(op, padding, (kh, kw), s, d, opad)
    _check_channels(op, x, wt, cin, wcin)
    if _too_small((kh, kw, h, w)):
        raise ValueError(
            f"{op}: x of shape {x} and w of shape {wt} need non-empty images and kernels"
        )
    out_h = transpose_output(h, pads[0], kh, s[0], d[0], opad[0])
    out_w = transpose_output(w, pads[1], kw, s[1], d[1], opad[1])
    if _too_small((out_h, out_w)):
        raise ValueError(
            f"{op}: padding {pads} leaves no output for x of shape {x} and w of shape {wt} "
            f"(output size {(out_h, out_w)})"
        )
    return (n, cout, out_h, out_w), Geometry2d((kh, kw), s, pads, d, opad)


def pool2d_shape(
    op: str, x_shape: Any, kernel_size: Any, stride: Any = None, padding: Any = 0
) -> tuple[Shape4, Geometry2d]:
    """The output shape of a pooling of NCHW ``x`` (``stride`` defaults to the kernel), and
    its geometry.

    >>> pool2d_shape("max_pool2d", (None, 16, 28, 28), 2)[0]
    (None, 16, 14, 14)
    """
    x = n, c, h, w = _shape4(x_shape, op, "x", "(N, C, H, W)")
    k = pair(kernel_size, op, "kernel_size", 1)
    s = k if stride is None else pair(stride, op, "stride", 1)
    pads = padding2d(padding, op)
    check_pool_padding(op, pads, k)
    out_h = window_output(h, pads[0], k[0], s[0])
    out_w = window_output(w, pads[1], k[1], s[1])
    if _too_small((out_h, out_w)):
        raise ValueError(
            f"{op}: kernel_size {k} is larger than the padded input {_padded((h, w), pads)} "
            f"(x of shape {x}, padding {pads})"
        )
    return (n, c, out_h, out_w), Geometry2d(k, s, pads)


# -- windows: where the kernels read ---------------------------------------------------------------
@dataclass(frozen=True)
class Window2d:
    """Where the sliding windows of a convolution or pooling lie in the padded input.

    ``n, c, h, w`` is the (unpadded) image the windows slide over; ``out_h, out_w`` the number
    of window positions; kernel position ``(i, j)`` of window ``(p, q)`` reads padded pixel
    ``(p*stride_h + i*dilation_h, q*stride_w + j*dilation_w)``.
    """

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    stride: IntPair
    pads: Padding2d
    dilation: IntPair
    out_h: int
    out_w: int

    @property
    def padded_h(self) -> int:
        return self.h + self.pads[0][0] + self.pads[0][1]

    @property
    def padded_w(self) -> int:
        return self.w + self.pads[1][0] + self.pads[1][1]

    @property
    def padded(self) -> bool:
        return any(self.pads[0] + self.pads[1])

    @property
    def tiles_2x2(self) -> bool:
        """Whether these are 2x2 windows at stride 2 without padding or dilation (VGG's and
        ResNet's pooling), which backends may give kernels of their own: no window overlaps
        another or leaves the image; an odd last row or column is in none."""
        return (
            (self.kh, self.kw, *self.stride, *self.dilation) == (2, 2, 2, 2, 1, 1)
            and not self.padded
            and 2 * self.out_h <= self.h
            and 2 * self.out_w <= self.w
        )

    def window_slices(self, i: int, j: int) -> tuple[slice, slice]:
        """The (rows, cols) basic slices of the padded image that kernel position (i, j) reads."""
        (sh, sw), (dh, dw) = self.stride, self.dilation
        h0, w0 = i * dh, j * dw
        return (
            slice(h0, h0 + sh * (self.out_h - 1) + 1, sh),
            slice(w0, w0 + sw * (self.out_w - 1) + 1, sw),
        )

    def interior(self) -> tuple[slice, slice]:
        """The (rows, cols) slices of the padded image that hold the image itself."""
        (t, _), (left, _) = self.pads
        return slice(t, t + self.h), slice(left, left + self.w)


def _known(op: str, *sizes: Size) -> tuple[int, ...]:
    """``sizes``, which a kernel needs known (array shapes always are)."""
    if None in sizes:
        raise ValueError(f"{op}: the kernels need known sizes, got {sizes}")
    return sizes  # type: ignore[return-value]


_F = TypeVar("_F", bound=Callable[..., Any])
#: Most windows a memoised function keeps (a training loop meets a handful of geometries).
_MEMO_SIZE = 1024


_LEAVES = frozenset({int, str, type(None)})


def _plain(value: Any) -> bool:
    """Whether ``value`` is an exact int, str or None, or a tuple of them, or a tuple of such
    tuples (padding's form): the arguments whose equal ones always give an equal answer
    (``True == 1`` and ``2.0 == 2``, but a bool or float stride is an error, so neither is a
    key). Written flat: it runs on every call."""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is not tuple:
        return False
    for v in value:
        inner = type(v)
        if inner in _LEAVES:
            continue
        if inner is not tuple:
            return False
        for u in v:
            if type(u) not in _LEAVES:
                return False
    return True


def _memo(fn: _F) -> _F:
    """Memoise ``fn`` (a pure check that returns a frozen :class:`Window2d`) for positional
    arguments of plain ints, strs and tuples: the kernels call it on every step with the same
    shapes, and the checks cost more than the small kernels they guard. Anything else, and
    every error, goes through ``fn`` every time."""
    cache: dict[tuple[Any, ...], Any] = {}

    @functools.wraps(fn)
    def memoised(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            return fn(*args, **kwargs)
        for a in args:
            if not _plain(a):
                return fn(*args)
        hit = cache.get(args)
        if hit is None:
            hit = fn(*args)
            if len(cache) >= _MEMO_SIZE:
                cache.clear()
            cache[args] = hit
        return hit

    return memoised  # type: ignore[return-value]


@_memo
def conv_window(
    op: str, x_shape: Any, w_shape: Any, stride: Any, padding: Any, dilation: Any
) -> Window2d:
    """Check the arguments of ``conv2d`` (and its gradients) and return its windows."""
    out, g = conv2d_shape(op, x_shape, w_shape, stride, padding, dilation)
    n, c, h, w = _known(op, *_shape4(x_shape, op, "x", "(N, C, H, W)"))
    kh, kw, out_h, out_w = _known(op, *g.kernel, *out[2:])
    return Window2d(n, c, h, w, kh, kw, g.stride, g.pads, g.dilation, out_h, out_w)


@_memo
def conv_transpose_window(
    op: str,
    x_shape: Any,
    w_shape: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    output_padding: Any,
) -> Window2d:
    """Check the arguments of ``conv2d_transpose``; the windows lie in its *output*."""
    out, g = conv2d_transpose_shape(op, x_shape, w_shape, stride, padding, dilation, output_padding)
    n, cout, out_h, out_w = _known(op, *out)
    kh, kw, h, w = _known(op, *g.kernel, *_shape4(x_shape, op, "x", "(N, C_in, H, W)")[2:])
    # the adjoint conv2d slides a (C_out -> C_in) kernel over the output image
    return Window2d(n, cout, out_h, out_w, kh, kw, g.stride, g.pads, g.dilation, h, w)


@_memo
def pool_window(op: str, x_shape: Any, kernel_size: Any, stride: Any, padding: Any) -> Window2d:
    """Check the arguments of the pooling kernels and return their windows."""
    out, g = pool2d_shape(op, x_shape, kernel_size, stride, padding)
    n, c, h, w = _known(op, *_shape4(x_shape, op, "x", "(N, C, H, W)"))
    kh, kw, out_h, out_w = _known(op, *g.kernel, *out[2:])
    return Window2d(n, c, h, w, kh, kw, g.stride, g.pads, (1, 1), out_h, out_w)


def check_output_shape(op: str, name: str, shape: Any, win: Window2d, channels: int) -> None:
    """Raise unless ``shape`` is the ``(N, channels, out_h, out_w)`` that ``win`` produces."""
    want = (win.n, channels, win.out_h, win.out_w)
    if tuple(shape) != want:
        raise ValueError(f"{op}: {name} has shape {tuple(shape)}, expected {want}")
