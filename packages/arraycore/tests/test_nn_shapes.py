"""arraycore.nn_shapes: the one shape rule of each nn op (argument forms, 'valid'/'same', output
sizes with unknown sizes, windows), which xp.nn on every backend and nnlayers' ops share."""

from __future__ import annotations

import math
from typing import Any

import pytest

from arraycore import nn_shapes as ns

# -- argument forms -------------------------------------------------------------------------------
GOOD_PADDINGS: list[tuple[Any, Any]] = [
    (0, ((0, 0), (0, 0))),
    (2, ((2, 2), (2, 2))),
    ((1, 2), ((1, 1), (2, 2))),
    ([1, 2], ((1, 1), (2, 2))),
    (((1, 0), (0, 3)), ((1, 0), (0, 3))),
    ([[1, 0], [0, 3]], ((1, 0), (0, 3))),
]
BAD_PADDINGS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    ((1, -1), ValueError),
    (((1, -1), (0, 0)), ValueError),
    (((0, 0), (-2, 0)), ValueError),
    (((1,), (0, 0)), ValueError),
    (((1, 0, 0), (0, 0)), ValueError),
    ((1, 2, 3), ValueError),
    (((0, 0), 1), TypeError),
    (True, TypeError),
    ((True, 0), TypeError),
    (((True, 0), (0, 0)), TypeError),
    (1.0, TypeError),
    (((1.0, 0), (0, 0)), TypeError),
    ("same", TypeError),  # not for a pooling (padding2d); the convolutions take it
    (None, TypeError),
]


@pytest.mark.parametrize(("value", "want"), GOOD_PADDINGS, ids=str)
def test_padding_forms(value: Any, want: Any) -> None:
    assert ns.padding2d(value, "conv2d") == want


@pytest.mark.parametrize(("value", "error"), BAD_PADDINGS, ids=str)
def test_bad_paddings_name_the_op_and_the_value(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^max_pool2d: padding must be an int, .*got "):
        ns.padding2d(value, "max_pool2d")


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (True, TypeError, r"stride must be an int, got True"),
        (2.0, TypeError, r"stride must be an int, got 2\.0"),
        ((1, False), TypeError, r"stride must be an int, got False"),
        ("2", TypeError, r"stride must be an int, got '2'"),
        (0, ValueError, r"stride must be >= 1, got 0"),
        ((1, 0), ValueError, r"stride must be >= 1, got \(1, 0\)"),
        ((1, 2, 3), ValueError, r"stride must be an int or a pair \(h, w\), got \(1, 2, 3\)"),
    ],
    ids=str,
)
def test_sizes_are_ints_not_bools(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match="^conv2d: " + match):
        ns.pair(value, "conv2d", "stride", 1)


def test_numpy_integers_are_ints() -> None:
    np = pytest.importorskip("numpy")
    assert ns.pair((np.int64(2), np.int32(3)), "conv2d", "stride", 1) == (2, 3)


@pytest.mark.parametrize("padding", ["SAME", "full", "causal"])
def test_only_valid_and_same_are_named_paddings(padding: str) -> None:
    with pytest.raises(ValueError, match=r"^Conv2D: padding must be 'valid', 'same' or an int"):
        ns.padding_arg(padding, "Conv2D")


# -- 'same' and 'valid' ---------------------------------------------------------------------------
def _tf_same(n: int, k: int, s: int, d: int) -> tuple[int, int]:
    """TensorFlow's 'SAME' padding along one axis, as its documentation writes it."""
    span = d * (k - 1) + 1
    total = max(span - s, 0) if n % s == 0 else max(span - n % s, 0)
    return total // 2, total - total // 2


@pytest.mark.parametrize("s", [1, 2, 3])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_same_is_tensorflows_rule(k: int, d: int, s: int) -> None:
    for n in range(1, 13):
        shape, g = ns.conv2d_shape("conv2d", (2, 3, n, n + 1), (4, 3, k, k), s, "same", d)
        assert shape == (2, 4, math.ceil(n / s), math.ceil((n + 1) / s))
        assert g.pads == (_tf_same(n, k, s, d), _tf_same(n + 1, k, s, d))


def test_same_at_stride_one_needs_no_sizes() -> None:
    shape, g = ns.conv2d_shape("conv2d", (None, 3, None, 9), (4, 3, 4, 3), 1, "same", (1, 2))
    assert shape == (None, 4, None, 9)
    assert g.pads == ((1, 2), (2, 2))
    with pytest.raises(ValueError, match=r"conv2d: padding='same' with stride \(2, 2\) needs"):
        ns.conv2d_shape("conv2d", (None, 3, None, 9), (4, 3, 4, 3), 2, "same")


def test_valid_is_no_padding() -> None:
    shape, g = ns.conv2d_shape("conv2d", (1, 1, 7, 7), (1, 1, 3, 3), 2, "valid")
    assert (shape, g.pads) == ((1, 1, 3, 3), ((0, 0), (0, 0)))


@pytest.mark.parametrize("s", [1, 2, 3])
@pytest.mark.parametrize("k", [3, 4, 5])
@pytest.mark.parametrize("n", [1, 4, 7])
def test_transposed_same_multiplies_by_the_stride(n: int, k: int, s: int) -> None:
    shape, _ = ns.conv2d_transpose_shape("conv2d_transpose", (1, 2, n, n), (2, 5, k, k), s, "same")
    assert shape == (1, 5, n * s, n * s)


def test_transposed_same_needs_a_kernel_as_large_as_the_stride() -> None:
    with pytest.raises(ValueError, match=r"Conv2DTranspose: padding='same' needs kernel \(2, 2\)"):
        ns.conv_transpose_padding("Conv2DTranspose", "same", (2, 2), (3, 3), (1, 1), (0, 0))


# -- output sizes and checks ------------------------------------------------------------------------
def test_unknown_sizes_stay_unknown() -> None:
    assert ns.conv2d_shape("conv2d", (None, 3, 8, None), (4, 3, 3, 3))[0] == (None, 4, 6, None)
    assert ns.pool2d_shape("max_pool2d", (None, None, 8, 8), 2)[0] == (None, None, 4, 4)
    shape = ns.conv2d_transpose_shape("conv2d_transpose", (None, 2, None, 4), (2, 3, 3, 3), 2)[0]
    assert shape == (None, 3, None, 9)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: ns.conv2d_shape("conv2d", (1, 2, 5, 5), (3, 2, 0, 2)),
            r"conv2d: w of shape \(3, 2, 0, 2\) has an empty kernel",
        ),
        (
            lambda: ns.conv2d_shape("conv2d", (None, 2, 5, 5), (3, 4, 3, 3)),
            r"conv2d: x of shape \(None, 2, 5, 5\) has 2 channels but w of shape \(3, 4, 3, 3\)",
        ),
        (
            lambda: ns.conv2d_shape("conv2d", (None, 2, 5), (3, 2, 3, 3)),
            r"conv2d: x must be 4-D \(N, C, H, W\), got shape \(None, 2, 5\)",
        ),
        (
            lambda: ns.conv2d_shape("conv2d", (None, 2, 2, None), (3, 2, 3, 3)),
            r"conv2d: kernel \(3, 3\) with dilation \(1, 1\) spans \(3, 3\), larger than the "
            r"padded input \(2, None\)",
        ),
        (
            lambda: ns.conv2d_transpose_shape("conv2d_transpose", (1, 2, 0, 5), (2, 3, 3, 3)),
            r"conv2d_transpose: x of shape \(1, 2, 0, 5\) and w of shape \(2, 3, 3, 3\) need "
            r"non-empty images",
        ),
        (
            lambda: ns.conv2d_transpose_shape("conv2d_transpose", (1, 2, 1, 1), (2, 3, 1, 1), 1, 1),
            r"conv2d_transpose: padding \(\(1, 1\), \(1, 1\)\) leaves no output",
        ),
        (
            lambda: ns.pool2d_shape("avg_pool2d", (1, 1, 4, 4), 2, 1, 2),
            r"avg_pool2d: padding \(\(2, 2\), \(2, 2\)\) must be at most half of kernel_size",
        ),
        (
            lambda: ns.conv_window("conv2d_backward_data", (1, 2, None, 5), (3, 2, 3, 3), 1, 0, 1),
            r"conv2d_backward_data: the kernels need known sizes",
        ),
    ],
)
def test_refused_shapes_name_the_op_and_the_shapes(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_windows_follow_the_shape_rules() -> None:
    win = ns.conv_window("conv2d", (2, 3, 9, 8), (4, 3, 3, 2), (2, 1), "same", (1, 2))
    shape, g = ns.conv2d_shape("conv2d", (2, 3, 9, 8), (4, 3, 3, 2), (2, 1), "same", (1, 2))
    assert (win.n, win.c, win.h, win.w, win.out_h, win.out_w) == (2, 3, 9, 8, *shape[2:])
    assert (win.kh, win.kw, win.stride, win.pads, win.dilation) == (
        3,
        2,
        g.stride,
        g.pads,
        g.dilation,
    )
    twin = ns.conv_transpose_window("conv2d_transpose", (2, 3, 5, 4), (3, 6, 4, 4), 2, "same", 1, 0)
    assert (twin.n, twin.c, twin.h, twin.w, twin.out_h, twin.out_w) == (2, 6, 10, 8, 5, 4)
    pwin = ns.pool_window("max_pool2d", (1, 2, 7, 7), 3, None, 1)
    assert (pwin.out_h, pwin.out_w, pwin.stride, pwin.dilation) == (3, 3, (3, 3), (1, 1))


def test_memoised_windows_still_refuse_what_equals_a_cached_key() -> None:
    """The windows are memoised per (op, shapes, geometry); True == 1 and 2.0 == 2 as keys, yet
    a bool or float argument is still refused after the int one was cached, NumPy integers get
    the same window, and a refused call caches nothing."""
    import numpy as np

    good = ns.conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 1, ((1, 1), (1, 1)), 1)
    assert ns.conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 1, ((1, 1), (1, 1)), 1) is good
    with pytest.raises(TypeError, match="conv2d: stride"):
        ns.conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), True, ((1, 1), (1, 1)), 1)
    with pytest.raises(TypeError, match="conv2d: dilation"):
        ns.conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 1, ((1, 1), (1, 1)), 1.0)
    shape = tuple(np.int64(s) for s in (2, 3, 8, 8))
    assert ns.conv_window("conv2d", shape, (4, 3, 3, 3), 1, ((1, 1), (1, 1)), 1) == good
    pooled = ns.pool_window("max_pool2d", (2, 3, 8, 8), 2, None, 0)
    assert (pooled.out_h, pooled.out_w) == (4, 4)
    assert ns.pool_window("max_pool2d", [2, 3, 8, 8], 2, None, 0) == pooled  # a list: uncached
    for _ in range(2):
        with pytest.raises(ValueError, match="max_pool2d: kernel_size"):
            ns.pool_window("max_pool2d", (2, 3, 8, 8), 9, None, 0)
    win = ns.conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 2, "same", 1)
    assert (win.out_h, win.out_w) == (4, 4)
