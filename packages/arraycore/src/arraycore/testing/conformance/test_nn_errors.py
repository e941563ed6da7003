"""Conformance of the ``xp.nn`` kernels' errors: bad shapes, sizes, paddings, dtypes and labels
raise before any computation, naming the op and the shapes (the rules of
:mod:`arraycore.nn_shapes`)."""

from __future__ import annotations

from typing import Any

import pytest

from .test_nn import _dtype


def _f32(xp: Any, *shape: int) -> Any:
    return xp.zeros(shape, dtype=xp.float32)


BAD_CALLS: list[tuple[str, Any, type[Exception], str]] = [
    (
        "conv2d-3d-x",
        lambda xp: xp.nn.conv2d(_f32(xp, 3, 5, 5), _f32(xp, 2, 3, 3, 3)),
        ValueError,
        r"conv2d: x must be 4-D \(N, C, H, W\), got shape \(3, 5, 5\)",
    ),
    (
        "conv2d-channels",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 3, 5, 5), _f32(xp, 2, 4, 3, 3)),
        ValueError,
        r"conv2d: x of shape \(1, 3, 5, 5\) has 3 channels but w of shape \(2, 4, 3, 3\)",
    ),
    (
        "conv2d-kernel-too-large",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), _f32(xp, 1, 1, 3, 3), dilation=2),
        ValueError,
        r"conv2d: kernel \(3, 3\) with dilation \(2, 2\) spans \(5, 5\), larger than the "
        r"padded input \(4, 4\)",
    ),
    (
        "conv2d-stride-0",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), _f32(xp, 1, 1, 3, 3), stride=(1, 0)),
        ValueError,
        r"conv2d: stride must be >= 1, got \(1, 0\)",
    ),
    (
        "conv2d-negative-padding",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), _f32(xp, 1, 1, 3, 3), padding=-1),
        ValueError,
        r"conv2d: padding must be an int, \(ph, pw\) or \(\(top, bottom\), \(left, right\)\)",
    ),
    (
        "conv2d-integer-w",
        lambda xp: xp.nn.conv2d(_f32(xp, 1, 1, 4, 4), xp.zeros((1, 1, 3, 3), dtype=xp.int32)),
        TypeError,
        r"conv2d: w must have a real floating dtype, got int32",
    ),
    (
        "backward-data-dy-shape",
        lambda xp: xp.nn.conv2d_backward_data(
            _f32(xp, 1, 2, 3, 3), _f32(xp, 2, 1, 3, 3), (1, 1, 6, 6)
        ),
        ValueError,
        r"conv2d_backward_data: dy has shape \(1, 2, 3, 3\), expected \(1, 2, 4, 4\)",
    ),
    (
        "backward-filter-dy-shape",
        lambda xp: xp.nn.conv2d_backward_filter(
            _f32(xp, 1, 1, 6, 6), _f32(xp, 1, 3, 4, 4), (2, 1, 3, 3)
        ),
        ValueError,
        r"conv2d_backward_filter: dy has shape \(1, 3, 4, 4\), expected \(1, 2, 4, 4\)",
    ),
    (
        "transpose-output-padding",
        lambda xp: xp.nn.conv2d_transpose(
            _f32(xp, 1, 2, 3, 3), _f32(xp, 2, 1, 3, 3), stride=2, output_padding=2
        ),
        ValueError,
        r"conv2d_transpose: output_padding \(2, 2\) must be smaller than stride \(2, 2\)",
    ),
    (
        "transpose-channels",
        lambda xp: xp.nn.conv2d_transpose(_f32(xp, 1, 2, 3, 3), _f32(xp, 3, 1, 3, 3)),
        ValueError,
        r"conv2d_transpose: x of shape \(1, 2, 3, 3\) has 2 channels but w of shape "
        r"\(3, 1, 3, 3\) expects 3",
    ),
    (
        "max-pool-padding",
        lambda xp: xp.nn.max_pool2d(_f32(xp, 1, 1, 4, 4), 3, 2, 2),
        ValueError,
        r"max_pool2d: padding \(\(2, 2\), \(2, 2\)\) must be at most half of kernel_size "
        r"\(3, 3\)",
    ),
    (
        "avg-pool-kernel-too-large",
        lambda xp: xp.nn.avg_pool2d(_f32(xp, 1, 1, 4, 4), 5),
        ValueError,
        r"avg_pool2d: kernel_size \(5, 5\) is larger than the padded input \(4, 4\)",
    ),
    (
        "max-pool-backward-dy-shape",
        lambda xp: xp.nn.max_pool2d_backward(_f32(xp, 1, 1, 3, 3), _f32(xp, 1, 1, 4, 4), 2),
        ValueError,
        r"max_pool2d_backward: dy has shape \(1, 1, 3, 3\), expected \(1, 1, 2, 2\)",
    ),
    (
        "pool-2d-x",
        lambda xp: xp.nn.max_pool2d(_f32(xp, 4, 4), 2),
        ValueError,
        r"max_pool2d: x must be 4-D \(N, C, H, W\), got shape \(4, 4\)",
    ),
    (
        "softmax-axis",
        lambda xp: xp.nn.softmax(_f32(xp, 2, 3), axis=2),
        ValueError,
        r"softmax: axis 2 is out of range for an array of 2 dimensions",
    ),
    (
        "batch_norm-3d-x",
        lambda xp: xp.nn.batch_norm(_f32(xp, 2, 3, 4), _f32(xp, 3), _f32(xp, 3)),
        ValueError,
        r"batch_norm: x must be \(N, C\) or \(N, C, H, W\), got shape \(2, 3, 4\)",
    ),
    (
        "batch_norm-gamma",
        lambda xp: xp.nn.batch_norm(_f32(xp, 2, 3, 4, 4), _f32(xp, 4), _f32(xp, 3)),
        ValueError,
        r"batch_norm: gamma has shape \(4,\), expected \(3,\) for x of shape \(2, 3, 4, 4\)",
    ),
    (
        "batch_norm_backward-dy",
        lambda xp: xp.nn.batch_norm_backward(
            _f32(xp, 2, 4), _f32(xp, 2, 3), _f32(xp, 3), _f32(xp, 3), _f32(xp, 3)
        ),
        ValueError,
        r"batch_norm_backward: dy has shape \(2, 4\), expected \(2, 3\)",
    ),
    (
        "batch_norm_relu-gamma",
        lambda xp: xp.nn.batch_norm_relu(_f32(xp, 2, 3, 4, 4), _f32(xp, 4), _f32(xp, 3)),
        ValueError,
        r"batch_norm_relu: gamma has shape \(4,\), expected \(3,\) for x of shape \(2, 3, 4, 4\)",
    ),
    (
        "batch_norm_relu-eps",
        lambda xp: xp.nn.batch_norm_relu(_f32(xp, 2, 3), _f32(xp, 3), _f32(xp, 3), eps=0.0),
        ValueError,
        r"batch_norm_relu: eps must be > 0, got 0.0",
    ),
    (
        "batch_norm_relu_backward-y",
        lambda xp: xp.nn.batch_norm_relu_backward(
            _f32(xp, 2, 3), _f32(xp, 2, 3), _f32(xp, 3), _f32(xp, 3), _f32(xp, 3), _f32(xp, 3, 2)
        ),
        ValueError,
        r"batch_norm_relu_backward: y has shape \(3, 2\), expected \(2, 3\)",
    ),
    (
        "batch_norm_relu_backward-y-dtype",
        lambda xp: xp.nn.batch_norm_relu_backward(
            _f32(xp, 2, 3),
            _f32(xp, 2, 3),
            _f32(xp, 3),
            _f32(xp, 3),
            _f32(xp, 3),
            xp.zeros((2, 3), dtype=xp.int32),
        ),
        TypeError,
        r"batch_norm_relu_backward: y must have a real floating dtype, got int32",
    ),
    (
        "affine-k",
        lambda xp: xp.nn.affine(_f32(xp, 2, 3), _f32(xp, 4, 5), _f32(xp, 5)),
        ValueError,
        r"affine: needs x \(\.\.\., K\) and w \(K, N\), got x of shape \(2, 3\) and w of "
        r"shape \(4, 5\)",
    ),
    (
        "affine-w",
        lambda xp: xp.nn.affine(_f32(xp, 2, 3), _f32(xp, 3), _f32(xp, 1)),
        ValueError,
        r"affine: needs x \(\.\.\., K\) and w \(K, N\), got x of shape \(2, 3\) and w of "
        r"shape \(3,\)",
    ),
    (
        "affine-bias",
        lambda xp: xp.nn.affine(_f32(xp, 2, 3), _f32(xp, 3, 5), _f32(xp, 1, 5)),
        ValueError,
        r"affine: bias has shape \(1, 5\), expected \(5,\) for w of shape \(3, 5\)",
    ),
    (
        "affine-int",
        lambda xp: xp.nn.affine(_f32(xp, 2, 3), _f32(xp, 3, 5), xp.zeros((5,), dtype=xp.int32)),
        TypeError,
        r"affine: bias must have a real floating dtype, got int32",
    ),
    (
        "bias_relu-bias",
        lambda xp: xp.nn.bias_relu(_f32(xp, 2, 3, 4, 4), _f32(xp, 4)),
        ValueError,
        r"bias_relu: bias has shape \(4,\), expected \(3,\) for x of shape \(2, 3, 4, 4\) "
        r"along axis 1",
    ),
    (
        "bias_relu-axis",
        lambda xp: xp.nn.bias_relu(_f32(xp, 2, 3), _f32(xp, 3), axis=2),
        ValueError,
        r"bias_relu: axis 2 is out of range for an array of 2 dimensions",
    ),
    (
        "bias_relu-axis-type",
        lambda xp: xp.nn.bias_relu(_f32(xp, 2, 3), _f32(xp, 3), axis=1.0),
        TypeError,
        r"bias_relu: axis must be an int, got 1.0",
    ),
    (
        "bias_relu-int-bias",
        lambda xp: xp.nn.bias_relu(_f32(xp, 2, 3), xp.zeros((3,), dtype=xp.int32)),
        TypeError,
        r"bias_relu: bias must have a real floating dtype, got int32",
    ),
    (
        "bias_relu-out",
        lambda xp: xp.nn.bias_relu(_f32(xp, 2, 3), _f32(xp, 3), out=_f32(xp, 3, 2)),
        ValueError,
        r"bias_relu: out has shape \(3, 2\), x has \(2, 3\)",
    ),
    (
        "bias_relu_backward-y",
        lambda xp: xp.nn.bias_relu_backward(_f32(xp, 2, 3), _f32(xp, 3, 2)),
        ValueError,
        r"bias_relu_backward: shapes differ \(dy \(2, 3\), y \(3, 2\)\)",
    ),
    (
        "bias_relu_backward-int",
        lambda xp: xp.nn.bias_relu_backward(_f32(xp, 2, 3), xp.zeros((2, 3), dtype=xp.int32)),
        TypeError,
        r"bias_relu_backward: y must have a real floating dtype, got int32",
    ),
    (
        "one-hot-float-indices",
        lambda xp: xp.nn.one_hot(_f32(xp, 3), 4),
        TypeError,
        r"one_hot: indices must have an integer dtype, got float32 \(shape \(3,\)\)",
    ),
    (
        "softmax_cross_entropy-labels",
        lambda xp: xp.nn.softmax_cross_entropy(_f32(xp, 3, 4), xp.zeros((4,), dtype=xp.int64)),
        ValueError,
        r"softmax_cross_entropy: labels of shape \(4,\) do not match logits of shape "
        r"\(3, 4\) \(expected \(3,\)\)",
    ),
    (
        "softmax_cross_entropy-float-labels",
        lambda xp: xp.nn.softmax_cross_entropy(_f32(xp, 3, 4), _f32(xp, 3)),
        TypeError,
        r"softmax_cross_entropy: labels must have an integer dtype, got float32 \(shape \(3,\)\)",
    ),
    (
        "layer_norm-gamma-shape",
        lambda xp: xp.nn.layer_norm(_f32(xp, 2, 3, 4), _f32(xp, 3), _f32(xp, 3)),
        ValueError,
        r"layer_norm: gamma of shape \(3,\) must be the trailing dimensions of x of shape "
        r"\(2, 3, 4\)",
    ),
    (
        "layer_norm-beta-shape",
        lambda xp: xp.nn.layer_norm(_f32(xp, 2, 4), _f32(xp, 4), _f32(xp, 2)),
        ValueError,
        r"layer_norm: beta has shape \(2,\), expected \(4,\)",
    ),
    (
        "layer_norm-eps",
        lambda xp: xp.nn.layer_norm(_f32(xp, 2, 4), _f32(xp, 4), _f32(xp, 4), eps=0.0),
        ValueError,
        r"layer_norm: eps must be > 0, got 0.0",
    ),
    (
        "layer_norm_backward-mean-shape",
        lambda xp: xp.nn.layer_norm_backward(
            _f32(xp, 2, 4), _f32(xp, 2, 4), _f32(xp, 4), _f32(xp, 4), _f32(xp, 2)
        ),
        ValueError,
        r"layer_norm_backward: mean has shape \(4,\), expected \(2,\)",
    ),
    (
        "attention-rank",
        lambda xp: xp.nn.scaled_dot_product_attention(_f32(xp, 4), _f32(xp, 4), _f32(xp, 4)),
        ValueError,
        r"scaled_dot_product_attention: q, k and v need the same number of axes, at least 2",
    ),
    (
        "attention-leading-axes",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 2, 3, 4), _f32(xp, 3, 5, 4), _f32(xp, 3, 5, 4)
        ),
        ValueError,
        r"scaled_dot_product_attention: q, k and v must share their leading \(batch, head\) "
        r"axes; got shapes \(2, 3, 4\), \(3, 5, 4\), \(3, 5, 4\)",
    ),
    (
        "attention-widths",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 2, 3, 4), _f32(xp, 2, 5, 8), _f32(xp, 2, 5, 4)
        ),
        ValueError,
        r"scaled_dot_product_attention: q \(\.\.\., Tq, d\), k \(\.\.\., Tk, d\) and v "
        r"\(\.\.\., Tk, dv\) do not align",
    ),
    (
        "attention-mask-shape",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 2, 3, 4), _f32(xp, 2, 5, 4), _f32(xp, 2, 5, 4), xp.ones((3, 4), dtype=xp.bool)
        ),
        ValueError,
        r"scaled_dot_product_attention: mask of shape \(3, 4\) does not broadcast to the "
        r"scores \(2, 3, 5\)",
    ),
    (
        "attention-mask-dtype",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 3, 4), _f32(xp, 5, 4), _f32(xp, 5, 4), xp.zeros((3, 5), dtype=xp.int32)
        ),
        TypeError,
        r"scaled_dot_product_attention: mask must be boolean or of q's dtype float32",
    ),
    (
        "attention-integer",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 3, 4), xp.zeros((5, 4), dtype=xp.int32), _f32(xp, 5, 4)
        ),
        TypeError,
        r"scaled_dot_product_attention: k must have a real floating dtype, got int32",
    ),
    (
        "attention-dropout-shape",
        lambda xp: xp.nn.scaled_dot_product_attention(
            _f32(xp, 3, 4), _f32(xp, 5, 4), _f32(xp, 5, 4), dropout_mask=_f32(xp, 1, 5)
        ),
        ValueError,
        r"scaled_dot_product_attention: dropout_mask has shape \(1, 5\), expected the "
        r"scores' \(3, 5\)",
    ),
    (
        "attention_backward-saved",
        lambda xp: xp.nn.scaled_dot_product_attention_backward(
            _f32(xp, 3, 6),
            _f32(xp, 3, 4),
            _f32(xp, 5, 4),
            _f32(xp, 5, 6),
            _f32(xp, 3, 6),
            _f32(xp, 5),
        ),
        ValueError,
        r"scaled_dot_product_attention_backward: saved has shape \(5,\), expected the rows' "
        r"log-sum-exp \(3,\) or the probabilities \(3, 5\)",
    ),
    (
        "attention_backward-dy",
        lambda xp: xp.nn.scaled_dot_product_attention_backward(
            _f32(xp, 3, 4),
            _f32(xp, 3, 4),
            _f32(xp, 5, 4),
            _f32(xp, 5, 6),
            _f32(xp, 3, 6),
            _f32(xp, 3),
        ),
        ValueError,
        r"scaled_dot_product_attention_backward: dy has shape \(3, 4\), expected \(3, 6\)",
    ),
    (
        "gelu-approximate",
        lambda xp: xp.nn.gelu(_f32(xp, 3), approximate="erf"),
        ValueError,
        r"gelu: approximate must be 'tanh'.*or 'none'.*got 'erf'",
    ),
    (
        "gelu-integer",
        lambda xp: xp.nn.gelu(xp.zeros((3,), dtype=xp.int32)),
        TypeError,
        r"gelu: x must have a real floating dtype, got int32",
    ),
    (
        "gelu_backward-shapes",
        lambda xp: xp.nn.gelu_backward(_f32(xp, 3, 4), _f32(xp, 4, 3)),
        ValueError,
        r"gelu_backward: shapes differ \(dy \(3, 4\), x \(4, 3\)\)",
    ),
    (
        "relu_backward-shapes",
        lambda xp: xp.nn.relu_backward(_f32(xp, 3, 4), _f32(xp, 4, 3)),
        ValueError,
        r"relu_backward: shapes differ \(dy \(3, 4\), y \(4, 3\)\)",
    ),
    (
        "relu_backward-integer",
        lambda xp: xp.nn.relu_backward(_f32(xp, 3), xp.zeros((3,), dtype=xp.int32)),
        TypeError,
        r"relu_backward: y must have a real floating dtype, got int32",
    ),
    (
        "softmax_backward-shapes",
        lambda xp: xp.nn.softmax_backward(_f32(xp, 3, 4), _f32(xp, 4, 3)),
        ValueError,
        r"softmax_backward: shapes differ \(dy \(3, 4\), y \(4, 3\)\)",
    ),
    (
        "softmax_backward-integer",
        lambda xp: xp.nn.softmax_backward(xp.zeros((3,), dtype=xp.int32), _f32(xp, 3)),
        TypeError,
        r"softmax_backward: dy must have a real floating dtype, got int32",
    ),
    (
        "softmax_backward-axis",
        lambda xp: xp.nn.softmax_backward(_f32(xp, 3, 4), _f32(xp, 3, 4), axis=2),
        ValueError,
        r"softmax_backward: axis 2 is out of range for an array of 2 dimensions",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_bad_input_errors_name_the_op_and_shapes(
    xp: Any, call: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call(xp)


def test_mixed_dtypes_are_an_error(xp: Any) -> None:
    _dtype(xp, "float64")
    x, w = _f32(xp, 1, 1, 4, 4), xp.zeros((1, 1, 3, 3), dtype=xp.float64)
    with pytest.raises(TypeError, match=r"conv2d: dtypes differ \(x float32, w float64\)"):
        xp.nn.conv2d(x, w)
