"""Conformance of the ``xp.nn`` kernels' argument forms, the rules of :mod:`arraycore.nn_shapes`
(which nnlayers' ops share): every way of writing a padding gives the same result, ``"valid"``
and ``"same"`` (TensorFlow's rule) are the explicit paddings they stand for in the
convolutions, their gradients and the transposed convolution, and what the rules refuse is
refused before any computation, naming the op and the value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arraycore import nn_shapes
from arraycore.testing import assert_close, to_host
from arraycore.testing import nn_reference as ref

from .test_nn import _random

F32 = np.dtype(np.float32)

# x shape, w shape, stride, dilation: odd and even kernels, strides that do and do not divide
SAME_CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), (1, 1)),
    ((1, 2, 8, 5), (3, 2, 4, 2), (1, 1), (1, 2)),
    ((2, 2, 9, 8), (2, 2, 3, 4), (2, 3), (1, 1)),
    ((1, 1, 5, 6), (2, 1, 1, 2), (2, 2), (2, 1)),
]


@pytest.mark.parametrize("case", SAME_CASES, ids=str)
@pytest.mark.parametrize("padding", ["valid", "same"])
def test_named_paddings_are_their_explicit_paddings(xp: Any, case: Any, padding: str) -> None:
    x_shape, w_shape, stride, dilation = case
    _, g = nn_shapes.conv2d_shape("conv2d", x_shape, w_shape, stride, padding, dilation)
    x_np, w_np = _random(0, x_shape, F32), _random(1, w_shape, F32)
    x, w = xp.asarray(x_np), xp.asarray(w_np)
    named = {"stride": stride, "padding": padding, "dilation": dilation}
    explicit = {**named, "padding": g.pads}
    scale = w_shape[1] * w_shape[2] * w_shape[3]
    y = xp.nn.conv2d(x, w, **named)
    want = ref.conv2d(x_np, w_np, stride, g.pads, dilation).astype(np.float32)
    assert_close(y, want, scale=scale, err_msg=str(case))
    if padding == "same":
        assert tuple(y.shape[2:]) == tuple(-(-n // s) for n, s in zip(x_shape[2:], stride))
    dy = xp.asarray(_random(2, tuple(y.shape), F32))
    dx = xp.nn.conv2d_backward_data(dy, w, x_shape, **named)
    assert_close(dx, to_host(xp.nn.conv2d_backward_data(dy, w, x_shape, **explicit)), scale=scale)
    dw = xp.nn.conv2d_backward_filter(x, dy, w_shape, **named)
    dw_explicit = xp.nn.conv2d_backward_filter(x, dy, w_shape, **explicit)
    assert_close(dw, to_host(dw_explicit), scale=int(np.prod(y.shape)))


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_transposed_same_multiplies_the_size_by_the_stride(xp: Any, stride: int) -> None:
    x_np, w_np = _random(0, (2, 3, 4, 5), F32), _random(1, (3, 2, 3, 4), F32)
    y = xp.nn.conv2d_transpose(xp.asarray(x_np), xp.asarray(w_np), stride=stride, padding="same")
    assert tuple(y.shape) == (2, 2, 4 * stride, 5 * stride)
    _, g = nn_shapes.conv2d_transpose_shape(
        "conv2d_transpose", x_np.shape, w_np.shape, stride, "same"
    )
    want = ref.conv2d_transpose(x_np, w_np, (stride, stride), g.pads, (1, 1), (0, 0))
    assert_close(y, want.astype(np.float32), scale=3 * 3 * 4)


@pytest.mark.parametrize(
    "padding", [1, (1, 1), [1, 1], ((1, 1), (1, 1)), [[1, 1], [1, 1]], (np.int64(1), 1)], ids=str
)
def test_every_padding_form_gives_the_same_result(xp: Any, padding: Any) -> None:
    x = xp.asarray(_random(0, (1, 2, 5, 5), F32))
    w = xp.asarray(_random(1, (2, 2, 3, 3), F32))
    want = to_host(xp.nn.conv2d(x, w, padding=((1, 1), (1, 1))))
    assert_close(xp.nn.conv2d(x, w, padding=padding), want, scale=18)
    pooled = to_host(xp.nn.max_pool2d(x, 3, 1, ((1, 1), (1, 1))))
    assert_close(xp.nn.max_pool2d(x, 3, 1, padding), pooled)


def _f32(xp: Any, *shape: int) -> Any:
    return xp.zeros(shape, dtype=xp.float32)


REFUSED: list[tuple[str, Any, type[Exception], str]] = [
    (
        "bool-kernel-size",
        lambda xp: xp.nn.max_pool2d(_f32(xp, 1, 1, 4, 4), True),
        TypeError,
        r"max_pool2d: kernel_size must be an int, got True",
    ),
    (
        "float-stride",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), _f32(xp, 1, 1, 3, 3), stride=1.0),
        TypeError,
        r"conv2d: stride must be an int, got 1\.0",
    ),
    (
        "bool-in-explicit-padding",
        lambda xp: xp.nn.avg_pool2d(_f32(xp, 1, 1, 4, 4), 2, 1, ((True, 0), (0, 0))),
        TypeError,
        r"avg_pool2d: padding must be an int, .* got \(\(True, 0\), \(0, 0\)\)",
    ),
    (
        "negative-explicit-padding",
        lambda xp: xp.nn.conv2d_transpose(
            _f32(xp, 1, 2, 3, 3), _f32(xp, 2, 1, 3, 3), padding=((0, 0), (1, -1))
        ),
        ValueError,
        r"conv2d_transpose: padding must be an int, .* got \(\(0, 0\), \(1, -1\)\)",
    ),
    (
        "unknown-named-padding",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), _f32(xp, 1, 1, 3, 3), padding="full"),
        ValueError,
        r"conv2d: padding must be 'valid', 'same' or an int, .* got 'full'",
    ),
    (
        "same-pooling",
        lambda xp: xp.nn.max_pool2d(_f32(xp, 1, 1, 4, 4), 2, 1, "same"),
        TypeError,
        r"max_pool2d: padding must be an int, .* got 'same'",
    ),
    (
        "empty-kernel",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 2, 4, 4), _f32(xp, 3, 2, 0, 2)),
        ValueError,
        r"conv2d: w of shape \(3, 2, 0, 2\) has an empty kernel",
    ),
    (
        "transpose-empty-image",
        lambda xp: xp.nn.conv2d_transpose(_f32(xp, 1, 2, 0, 3), _f32(xp, 2, 1, 3, 3)),
        ValueError,
        r"conv2d_transpose: x of shape \(1, 2, 0, 3\) and w of shape \(2, 1, 3, 3\) need "
        r"non-empty images and kernels",
    ),
    (
        "transpose-same-small-kernel",
        lambda xp: xp.nn.conv2d_transpose(
            _f32(xp, 1, 2, 3, 3), _f32(xp, 2, 1, 2, 2), stride=3, padding="same"
        ),
        ValueError,
        r"conv2d_transpose: padding='same' needs kernel \(2, 2\) at least stride \(3, 3\)",
    ),
    (
        "backward-data-unknown-size",
        lambda xp: xp.nn.conv2d_backward_data(
            _f32(xp, 1, 2, 3, 3), _f32(xp, 2, 1, 3, 3), (1, 1, None, 5)
        ),
        ValueError,
        r"conv2d_backward_data: the kernels need known sizes",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_arguments_name_the_op_and_the_value(
    xp: Any, call: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call(xp)
