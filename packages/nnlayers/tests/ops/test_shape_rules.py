"""nnlayers' nn ops and arraycore's nn kernels share one shape rule (arraycore.nn_shapes): they
accept and reject exactly the same arguments, and agree on output shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
import nnlayers.expr as ex

X = np.zeros((1, 2, 7, 6), np.float32)
W = np.zeros((3, 2, 3, 2), np.float32)

POOLS: list[dict[str, Any]] = [
    {"kernel_size": 3, "stride": None, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 2},  # beyond half the kernel
    {"kernel_size": (4, 2), "stride": 1, "padding": ((2, 0), (1, 1))},
    {"kernel_size": 2, "stride": 2, "padding": -1},
    {"kernel_size": True, "stride": 1, "padding": 0},  # a bool is not a size
    {"kernel_size": 8, "stride": 1, "padding": 0},  # larger than the image
    {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1)},
]
CONVS: list[dict[str, Any]] = [
    {"stride": 1, "padding": 1, "dilation": 1},
    {"stride": (2, 1), "padding": ((0, 1), (2, 0)), "dilation": (1, 2)},
    {"stride": 0, "padding": 0, "dilation": 1},
    {"stride": 1, "padding": ((1,), (0, 0)), "dilation": 1},
    {"stride": 1, "padding": 0, "dilation": 4},  # the kernel spans more than the image
    {"stride": 1, "padding": -2, "dilation": 1},
]


def _outcome(call: Any) -> Any:
    """The output shape, or "rejected" (nnlayers wraps the kernels' errors in its ShapeError)."""
    try:
        return tuple(call())
    except (TypeError, ValueError):
        return "rejected"


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
