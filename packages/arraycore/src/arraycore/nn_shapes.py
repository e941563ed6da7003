"""The shape rules of the nn ops, in one place: arraycore's kernels (``xp.nn``, every backend's
overrides) and nnlayers' ops and layers all take their argument forms, output sizes and checks
from here, so the two packages accept and reject exactly the same arguments.

- ``kernel_size``, ``stride``, ``dilation``: an int or a pair ``(h, w)`` of ints (not bools),
  each >= 1 (``output_padding``: >= 0).
- ``padding``: an int (all four sides), a pair ``(ph, pw)``, explicit
  ``((top, bottom), (left, right))``, all >= 0, or (where an op takes them) ``"valid"`` (none)
  and ``"same"`` (TensorFlow's rule: output ``ceil(size / stride)``, the odd pixel of padding
  after the image; for transposed convolution, output ``size * stride``).
- Output sizes round down: ``(in + before + after - dilation*(k-1) - 1) // stride + 1``; a size
  not yet known (``None``, nnlayers' batch axis) stays ``None``.
- Pooling padding is at most half the kernel on every side (PyTorch's rule, which the PyTorch
  oracle compares against; arraycore allowed any padding smaller than the kernel before the two
  packages shared one rule, nnlayers PyTorch's).
- Transposed convolution's ``output_padding`` is smaller than the stride or the dilation
  (PyTorch's rule).

Errors name the op (or layer) and the value given.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

IntPair = tuple[int, int]
Padding2d = tuple[IntPair, IntPair]


def int_arg(value: Any, op: str, name: str) -> int:
    """``value`` as an int (``operator.index``; bools refused), or a TypeError naming ``op``."""
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {value!r}") from None


def pair(value: Any, op: str, name: str, minimum: int) -> IntPair:
    """``value`` (an int or a pair of ints) as ``(h, w)``; each must be >= ``minimum``."""
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
    """``padding`` as ``((top, bottom), (left, right))`` from an int, a pair or that form."""
    form = "an int, (ph, pw) or ((top, bottom), (left, right)) of ints >= 0"
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
        raise TypeError(f"{op}: padding must be {form}, got {value!r}") from None
    except ValueError:
        raise ValueError(f"{op}: padding must be {form}, got {value!r}") from None
    return (ph, ph), (pw, pw)


def _shape4(shape: Any, op: str, name: str, layout: str) -> tuple[int, int, int, int]:
    dims = tuple(int(s) for s in shape)
    if len(dims) != 4:
        raise ValueError(f"{op}: {name} must be 4-D {layout}, got shape {dims}")
    return dims[0], dims[1], dims[2], dims[3]


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


def out_size(size: int, before: int, after: int, k: int, stride: int, dilation: int) -> int:
    """Window positions along one axis of ``size`` padded by ``before`` and ``after``."""
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


def conv_window(
    op: str, x_shape: Any, w_shape: Any, stride: Any, padding: Any, dilation: Any
) -> Window2d:
    """Check the arguments of :func:`conv2d` (and its gradients) and return its windows."""
    n, c, h, w = _shape4(x_shape, op, "x", "(N, C, H, W)")
    o, wc, kh, kw = _shape4(w_shape, op, "w", "(O, C, KH, KW)")
    s = pair(stride, op, "stride", 1)
    d = pair(dilation, op, "dilation", 1)
    pads = padding2d(padding, op)
    if wc != c:
        raise ValueError(
            f"{op}: x of shape {(n, c, h, w)} has {c} channels but w of shape "
            f"{(o, wc, kh, kw)} expects {wc}"
        )
    if kh < 1 or kw < 1:
        raise ValueError(f"{op}: w of shape {(o, wc, kh, kw)} has an empty kernel")
    out_h = out_size(h, *pads[0], kh, s[0], d[0])
    out_w = out_size(w, *pads[1], kw, s[1], d[1])
    if out_h < 1 or out_w < 1:
        span = (d[0] * (kh - 1) + 1, d[1] * (kw - 1) + 1)
        padded = (h + sum(pads[0]), w + sum(pads[1]))
        raise ValueError(
            f"{op}: kernel {(kh, kw)} with dilation {d} spans {span}, larger than the padded "
            f"input {padded} (x of shape {(n, c, h, w)}, padding {pads})"
        )
    return Window2d(n, c, h, w, kh, kw, s, pads, d, out_h, out_w)


def conv_transpose_window(
    op: str,
    x_shape: Any,
    w_shape: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    output_padding: Any,
) -> Window2d:
    """Check the arguments of :func:`conv2d_transpose`; the windows lie in its *output*."""
    n, cin, h, w = _shape4(x_shape, op, "x", "(N, C_in, H, W)")
    wcin, cout, kh, kw = _shape4(w_shape, op, "w", "(C_in, C_out, KH, KW)")
    s = pair(stride, op, "stride", 1)
    d = pair(dilation, op, "dilation", 1)
    pads = padding2d(padding, op)
    op_h, op_w = output_padding_pair(op, output_padding, s, d)
    if wcin != cin:
        raise ValueError(
            f"{op}: x of shape {(n, cin, h, w)} has {cin} channels but w of shape "
            f"{(wcin, cout, kh, kw)} expects {wcin}"
        )
    if kh < 1 or kw < 1 or h < 1 or w < 1:
        raise ValueError(
            f"{op}: x of shape {(n, cin, h, w)} and w of shape {(wcin, cout, kh, kw)} need "
            "non-empty images and kernels"
        )
    out_h = (h - 1) * s[0] - sum(pads[0]) + d[0] * (kh - 1) + op_h + 1
    out_w = (w - 1) * s[1] - sum(pads[1]) + d[1] * (kw - 1) + op_w + 1
    if out_h < 1 or out_w < 1:
        raise ValueError(
            f"{op}: padding {pads} leaves no output for x of shape {(n, cin, h, w)} and w of "
            f"shape {(wcin, cout, kh, kw)} (output size {(out_h, out_w)})"
        )
    # the adjoint conv2d slides a (C_out -> C_in) kernel over the output image
    return Window2d(n, cout, out_h, out_w, kh, kw, s, pads, d, h, w)


def pool_window(op: str, x_shape: Any, kernel_size: Any, stride: Any, padding: Any) -> Window2d:
    """Check the arguments of the pooling kernels and return their windows."""
    n, c, h, w = _shape4(x_shape, op, "x", "(N, C, H, W)")
    k = pair(kernel_size, op, "kernel_size", 1)
    s = k if stride is None else pair(stride, op, "stride", 1)
    pads = padding2d(padding, op)
    check_pool_padding(op, pads, k)
    out_h = out_size(h, *pads[0], k[0], s[0], 1)
    out_w = out_size(w, *pads[1], k[1], s[1], 1)
    if out_h < 1 or out_w < 1:
        padded = (h + sum(pads[0]), w + sum(pads[1]))
        raise ValueError(
            f"{op}: kernel_size {k} is larger than the padded input {padded} (x of shape "
            f"{(n, c, h, w)}, padding {pads})"
        )
    return Window2d(n, c, h, w, k[0], k[1], s, pads, (1, 1), out_h, out_w)


def check_output_shape(op: str, name: str, shape: Any, win: Window2d, channels: int) -> None:
    """Raise unless ``shape`` is the ``(N, channels, out_h, out_w)`` that ``win`` produces."""
    want = (win.n, channels, win.out_h, win.out_w)
    if tuple(shape) != want:
        raise ValueError(f"{op}: {name} has shape {tuple(shape)}, expected {want}")


def conv_padding(
    op: str,
    padding: Any,
    sizes: Sequence[int | None],
    kernel: Any,
    stride: IntPair,
    dilation: IntPair,
) -> Padding2d:
    """``padding`` of a convolution as ``((top, bottom), (left, right))``: ``"valid"``,
    ``"same"`` (needs known sizes) or any form :func:`padding2d` takes."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        pads = []
        for n, k, s, d in zip(sizes, kernel, stride, dilation, strict=True):
            if n is None:
                raise ValueError(
                    f"{op}: padding='same' needs known image sizes, got {tuple(sizes)}"
                )
            total = max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
            pads.append((total // 2, total - total // 2))
        return pads[0], pads[1]
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or pairs, got {padding!r}")
    return padding2d(padding, op)


def conv_transpose_padding(
    op: str, padding: Any, kernel: Any, stride: IntPair, dilation: IntPair, output_padding: IntPair
) -> Padding2d:
    """``padding`` of a transposed convolution: ``"valid"``, ``"same"`` (output ``size *
    stride``; needs ``dilation*(k-1) + 1 + output_padding >= stride``) or explicit."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        totals = [
            d * (k - 1) + 1 - s + o
            for k, s, d, o in zip(kernel, stride, dilation, output_padding, strict=True)
        ]
        if min(totals) < 0:
            raise ValueError(
                f"{op}: padding='same' needs kernel {tuple(kernel)} at least stride {stride} "
                "here; give explicit padding"
            )
        return (totals[0] // 2, totals[0] - totals[0] // 2), (
            totals[1] // 2,
            totals[1] - totals[1] // 2,
        )
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or pairs, got {padding!r}")
    return padding2d(padding, op)


def output_padding_pair(op: str, value: Any, stride: IntPair, dilation: IntPair) -> IntPair:
    """``output_padding`` as a pair, each smaller than the stride or the dilation."""
    out = pair(value, op, "output_padding", 0)
    if out[0] >= max(stride[0], dilation[0]) or out[1] >= max(stride[1], dilation[1]):
        raise ValueError(
            f"{op}: output_padding {out} must be smaller than stride {stride} or dilation "
            f"{dilation}"
        )
    return out


def window_output(
    size: int | None, pad: IntPair, kernel: int, stride: int, dilation: int = 1
) -> int | None:
    """Number of window positions along one axis (``None`` while the size is unknown)."""
    if size is None:
        return None
    return out_size(size, pad[0], pad[1], kernel, stride, dilation)


def transpose_output(
    size: int | None, pad: IntPair, kernel: int, stride: int, dilation: int, output_padding: int
) -> int | None:
    """Output size of a transposed convolution along one axis (``None`` while unknown)."""
    if size is None:
        return None
    return (size - 1) * stride - pad[0] - pad[1] + dilation * (kernel - 1) + output_padding + 1


def check_pool_padding(op: str, pads: Padding2d, kernel: IntPair) -> None:
    """Pooling padding at most half the kernel on every side (PyTorch's rule)."""
    if max(pads[0]) > kernel[0] // 2 or max(pads[1]) > kernel[1] // 2:
        raise ValueError(
            f"{op}: padding {pads} must be at most half of kernel_size {kernel} on every side "
            "(PyTorch's rule: beyond it, windows would hold mostly padding)"
        )
