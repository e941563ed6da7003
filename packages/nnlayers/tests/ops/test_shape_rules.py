"""nnlayers' nn ops and arraycore's nn kernels share one shape rule (arraycore.nn_shapes): they
accept and reject exactly the same arguments, with the same message, and agree on output shapes;
the layers check the same rules when they are made; where the two packages used to disagree,
the rule is PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
import nnlayers.expr as ex
from nnlayers.errors import ShapeError
from nnlayers.layers import Conv2D, Conv2DTranspose, Pool2D

X = np.zeros((1, 2, 7, 6), np.float32)
W = np.zeros((3, 2, 3, 2), np.float32)
WT = np.zeros((2, 3, 3, 2), np.float32)  # (C_in, C_out, KH, KW)

POOLS: list[dict[str, Any]] = [
    {"kernel_size": 3, "stride": None, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 2},  # beyond half the kernel
    {"kernel_size": (4, 2), "stride": 1, "padding": ((2, 0), (1, 1))},
    {"kernel_size": 2, "stride": 2, "padding": -1},
    {"kernel_size": 2, "stride": 1, "padding": ((1, 0), (0, -1))},
    {"kernel_size": True, "stride": 1, "padding": 0},  # a bool is not a size
    {"kernel_size": 2, "stride": 1.0, "padding": 0},
    {"kernel_size": 8, "stride": 1, "padding": 0},  # larger than the image
    {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1)},
    {"kernel_size": 2, "stride": None, "padding": "same"},  # not for pooling
]
CONVS: list[dict[str, Any]] = [
    {"stride": 1, "padding": 1, "dilation": 1},
    {"stride": (2, 1), "padding": ((0, 1), (2, 0)), "dilation": (1, 2)},
    {"stride": 0, "padding": 0, "dilation": 1},
    {"stride": 1, "padding": ((1,), (0, 0)), "dilation": 1},
    {"stride": 1, "padding": 0, "dilation": 4},  # the kernel spans more than the image
    {"stride": 1, "padding": -2, "dilation": 1},
    {"stride": 1, "padding": ((0, 0), (True, 0)), "dilation": 1},
    {"stride": 1, "padding": "same", "dilation": 2},
    {"stride": 2, "padding": "same", "dilation": 1},  # TensorFlow's rule
    {"stride": (2, 3), "padding": "valid", "dilation": 1},
    {"stride": 1, "padding": "full", "dilation": 1},
]
TRANSPOSED: list[dict[str, Any]] = [
    {"stride": 2, "padding": 1, "output_padding": 1},
    {"stride": 2, "padding": "same", "output_padding": 0},
    {"stride": 3, "padding": "same", "output_padding": 0},  # kernel smaller than the stride
    {"stride": 2, "padding": "valid", "output_padding": 2},  # output_padding >= stride
    {"stride": 1, "padding": ((2, 2), (0, 0)), "output_padding": 0},
    {"stride": (1, 2), "padding": (1, 0), "output_padding": (0, 1)},
    {"stride": 1, "padding": -1, "output_padding": 0},
]
SHAPES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((1, 2, 5, 5), (3, 2, 0, 2)),  # an empty kernel
    ((1, 2, 5, 5), (3, 4, 3, 3)),  # channels differ
    ((0, 2, 5, 5), (3, 2, 3, 3)),  # an empty batch is fine
    ((1, 2, 5), (3, 2, 3, 3)),
]


def _outcome(call: Any) -> Any:
    """The output shape, or the error's type and message (nnlayers' ShapeError puts the node
    and its inputs after the first line, which must be the kernel's message)."""
    try:
        return tuple(call())
    except ShapeError as exc:
        return type(exc.__cause__).__name__, str(exc).splitlines()[0]
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("case", POOLS, ids=[str(i) for i in range(len(POOLS))])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_accepts_what_the_kernels_accept(case: dict[str, Any], kind: str) -> None:
    xp = arraycore.namespace("numpy")
    kernel = getattr(xp.nn, f"{kind}_pool2d")
    op = getattr(ex, f"{kind}_pool2d")
    args = (case["kernel_size"], case["stride"], case["padding"])
    in_kernel = _outcome(lambda: kernel(xp.asarray(X), *args).shape)
    in_graph = _outcome(lambda: op(ex.placeholder(X.shape), *args).spec.shape)
    assert in_graph == in_kernel, case


@pytest.mark.parametrize("case", CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_convolution_accepts_what_the_kernels_accept(case: dict[str, Any]) -> None:
    xp = arraycore.namespace("numpy")
    in_kernel = _outcome(lambda: xp.nn.conv2d(xp.asarray(X), xp.asarray(W), **case).shape)
    graph = lambda: ex.conv2d(ex.placeholder(X.shape), ex.constant(W), **case).spec.shape
    assert _outcome(graph) == in_kernel, case


@pytest.mark.parametrize("case", TRANSPOSED, ids=[str(i) for i in range(len(TRANSPOSED))])
def test_transposed_convolution_accepts_what_the_kernel_accepts(case: dict[str, Any]) -> None:
    xp = arraycore.namespace("numpy")
    in_kernel = _outcome(
        lambda: xp.nn.conv2d_transpose(xp.asarray(X), xp.asarray(WT), **case).shape
    )
    graph = lambda: ex.conv2d_transpose(ex.placeholder(X.shape), ex.constant(WT), **case)
    assert _outcome(lambda: graph().spec.shape) == in_kernel, case


@pytest.mark.parametrize(("x_shape", "w_shape"), SHAPES, ids=str)
def test_image_and_kernel_shapes_are_checked_alike(x_shape: Any, w_shape: Any) -> None:
    xp = arraycore.namespace("numpy")
    x, w = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)
    in_kernel = _outcome(lambda: xp.nn.conv2d(xp.asarray(x), xp.asarray(w)).shape)
    in_graph = _outcome(lambda: ex.conv2d(ex.placeholder(x_shape), ex.constant(w)).spec.shape)
    assert in_graph == in_kernel
    wt = np.zeros((w_shape[1], w_shape[0], *w_shape[2:]), np.float32)
    in_kernel = _outcome(lambda: xp.nn.conv2d_transpose(xp.asarray(x), xp.asarray(wt)).shape)
    graph = lambda: ex.conv2d_transpose(ex.placeholder(x_shape), ex.constant(wt)).spec.shape
    assert _outcome(graph) == in_kernel


def test_unknown_sizes_are_inferred_where_the_rule_allows() -> None:
    x = ex.placeholder((None, 2, None, None))
    w = ex.constant(W)
    assert ex.conv2d(x, w, padding="same").shape == (None, 3, None, None)
    assert ex.max_pool2d(x, 2).shape == (None, 2, None, None)
    with pytest.raises(ShapeError, match=r"conv2d: padding='same' with stride \(2, 2\) needs"):
        ex.conv2d(x, w, stride=2, padding="same").spec  # noqa: B018


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Conv2D(4, 3, stride=0), ValueError, r"Conv2D: stride must be >= 1, got 0"),
        (lambda: Conv2D(4, 3, dilation=True), TypeError, r"Conv2D: dilation must be an int"),
        (lambda: Conv2D(4, 3, padding="full"), ValueError, r"Conv2D: padding must be 'valid'"),
        (lambda: Conv2D(4, 3, padding=((1, -1), (0, 0))), ValueError, r"Conv2D: padding must"),
        (lambda: Conv2D(True, 3), TypeError, r"Conv2D: filters must be an int, got True"),
        (lambda: Conv2D(4, (3, 0)), ValueError, r"Conv2D: kernel_size must be >= 1"),
        (
            lambda: Conv2DTranspose(4, 2, stride=3, padding="same"),
            ValueError,
            r"Conv2DTranspose: padding='same' needs kernel \(2, 2\) at least stride \(3, 3\)",
        ),
        (
            lambda: Conv2DTranspose(4, 3, stride=2, output_padding=2),
            ValueError,
            r"Conv2DTranspose: output_padding \(2, 2\) must be smaller than stride",
        ),
        (
            lambda: Pool2D(3, padding=2),
            ValueError,
            r"Pool2D: padding \(\(2, 2\), \(2, 2\)\) must be at most half of kernel_size",
        ),
        (lambda: Pool2D(2, stride=(1, 0)), ValueError, r"Pool2D: stride must be >= 1"),
        (lambda: Pool2D(2.0), TypeError, r"Pool2D: kernel_size must be an int, got 2\.0"),
    ],
)
def test_layers_check_the_rules_when_made(make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()


# Where arraycore and nnlayers disagreed, the shared rule is PyTorch's: PyTorch refuses exactly
# what the rule refuses (strided 'same', which follows TensorFlow, is tested above).
TORCH_CASES: list[tuple[str, dict[str, Any]]] = [
    ("max_pool2d", {"x": (1, 1, 6, 6), "kernel_size": 3, "stride": 1, "padding": 1}),
    ("max_pool2d", {"x": (1, 1, 6, 6), "kernel_size": 3, "stride": 1, "padding": 2}),
    ("avg_pool2d", {"x": (1, 1, 6, 6), "kernel_size": 2, "stride": 1, "padding": 1}),
    ("avg_pool2d", {"x": (1, 1, 6, 6), "kernel_size": (4, 2), "stride": 2, "padding": (2, 1)}),
    ("avg_pool2d", {"x": (1, 1, 6, 6), "kernel_size": (4, 2), "stride": 2, "padding": (3, 1)}),
    ("conv2d", {"x": (1, 2, 6, 6), "w": (3, 2, 0, 2)}),
    ("conv2d", {"x": (1, 2, 6, 6), "w": (3, 2, 3, 3), "padding": "same", "dilation": 2}),
    ("conv2d", {"x": (1, 2, 6, 6), "w": (3, 2, 4, 3), "padding": "same"}),
    ("conv2d", {"x": (1, 2, 6, 6), "w": (3, 2, 3, 3), "padding": "valid"}),
    ("conv2d", {"x": (1, 2, 6, 6), "w": (3, 2, 3, 3), "stride": True}),
    ("conv2d", {"x": (0, 2, 6, 6), "w": (3, 2, 3, 3)}),
    ("conv_transpose2d", {"x": (1, 2, 0, 4), "w": (2, 3, 3, 3)}),
    ("conv_transpose2d", {"x": (1, 2, 4, 4), "w": (2, 3, 0, 3)}),
    ("conv_transpose2d", {"x": (1, 2, 4, 4), "w": (2, 3, 3, 3), "stride": 2, "output_padding": 1}),
    ("conv_transpose2d", {"x": (1, 2, 4, 4), "w": (2, 3, 3, 3), "stride": 2, "output_padding": 2}),
    (
        "conv_transpose2d",
        {"x": (1, 2, 4, 4), "w": (2, 3, 3, 3), "dilation": 2, "output_padding": 1},
    ),
    ("conv_transpose2d", {"x": (1, 2, 1, 1), "w": (2, 3, 1, 1), "padding": 1}),
]


@pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")
@pytest.mark.parametrize(("name", "case"), TORCH_CASES, ids=[str(c) for c in TORCH_CASES])
def test_the_rule_refuses_what_pytorch_refuses(name: str, case: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    kwargs = dict(case)
    x_shape, w_shape = kwargs.pop("x"), kwargs.pop("w", None)
    x = np.zeros(x_shape, np.float32)
    args = () if w_shape is None else (np.zeros(w_shape, np.float32),)
    try:
        t_args = [torch.from_numpy(a) for a in (x, *args)]
        theirs: Any = tuple(getattr(functional, name)(*t_args, **kwargs).shape)
    except (RuntimeError, TypeError, ValueError):
        theirs = "refused"
    ours_name = "conv2d_transpose" if name == "conv_transpose2d" else name
    graph = lambda: getattr(ex, ours_name)(ex.placeholder(x_shape), *args, **kwargs).spec.shape
    ours = _outcome(graph)
    assert (ours if isinstance(ours[0], int) else "refused") == theirs


@pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")
@pytest.mark.parametrize("dilation", [1, 2, (1, 3)])
@pytest.mark.parametrize("kernel", [(4, 3), (2, 2), (1, 5)])
def test_same_at_stride_one_is_pytorchs(kernel: tuple[int, int], dilation: Any) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 8))
    w = rng.standard_normal((4, 3, *kernel))
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(w), padding="same", dilation=dilation
    ).numpy()
    xp = arraycore.namespace("numpy")
    got = xp.nn.conv2d(xp.asarray(x), xp.asarray(w), padding="same", dilation=dilation)
    np.testing.assert_allclose(xp.to_numpy(got), want, rtol=1e-12, atol=1e-12)
    w32 = ex.constant(w.astype(np.float32))
    graph = ex.conv2d(ex.placeholder(x.shape), w32, 1, "same", dilation)
    assert graph.shape == want.shape
