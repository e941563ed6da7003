"""Debugging aids: the text dump, Graphviz dot and the NaN/Inf guard."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import NonFiniteError, Parameter


def test_dump_lists_nodes_with_shapes_and_names() -> None:
    x = ex.placeholder((None, 3), name="x")
    W = Parameter(np.zeros((3, 2)), name="W")
    logits = (x @ W).named("logits")
    graph = nnlayers.compile(ex.sum(ex.softmax(logits, axis=1)))
    text = graph.dump()
    assert "%0 = placeholder : (None, 3) float32  # 'x'" in text
    assert "%1 = parameter : (3, 2) float32  # 'W', wrt, grad" in text
    assert "matmul(%0 'x', %1 'W') : (None, 2) float32  # 'logits', grad" in text
    assert "softmax[axis=1](%2 'logits')" in text
    assert text.splitlines()[-1].endswith("# output 0, grad")


def test_to_dot_is_a_digraph_with_every_edge() -> None:
    x = ex.placeholder((None, 3), name="x")
    graph = nnlayers.compile(ex.sum(ex.exp(x) + x), wrt=[])
    dot = graph.to_dot()
    assert dot.startswith("digraph nnlayers {") and dot.endswith("}")
    assert 'n0 [label="placeholder\\nx\\n(None, 3) float32", shape=box];' in dot
    assert dot.count("->") == sum(len(i) for i in graph.analysis.inputs)


def test_nan_guard_names_the_first_op() -> None:
    x = ex.placeholder((None, 2), name="x")
    h = ex.log(x).named("log_of_x")
    graph = nnlayers.compile(ex.sum(ex.exp(h)), wrt=[x], check_finite=True)
    graph.forward({x: np.array([[1.0, 2.0]])})
    graph.backward()
    with (
        np.errstate(invalid="ignore"),
        pytest.raises(
            NonFiniteError,
            match=r"forward of log 'log_of_x' \(built at .*test_graph_debug.py:\d+: h = ex.log\(x\)",
        ),
    ):
        graph.forward({x: np.array([[1.0, -2.0]])})


def test_nan_guard_checks_backward_and_sources() -> None:
    x = ex.placeholder((2,), name="x")
    graph = nnlayers.compile(ex.sum(ex.sqrt(x)), wrt=[x], check_finite=True)
    graph.forward({x: np.array([0.0, 4.0])})
    with np.errstate(divide="ignore"), pytest.raises(NonFiniteError, match="backward of sqrt"):
        graph.backward()
    with pytest.raises(NonFiniteError, match=r"placeholder 'x' \(built at .*\) holds a NaN"):
        graph.forward({x: np.array([np.nan, 1.0])})


def test_guard_off_by_default_and_switchable() -> None:
    x = ex.placeholder((1,), name="x")
    graph = nnlayers.compile(ex.log(x), wrt=[])
    with np.errstate(invalid="ignore"):
        graph.forward({x: np.array([-1.0])})
        graph.check_finite = True
        with pytest.raises(NonFiniteError):
            graph.forward({x: np.array([-1.0])})
