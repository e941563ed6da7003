"""Compiling: shape errors at setup, feeds, batch-size specialisation, memory release."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import FeedError, GraphError, Parameter, ShapeError


def mlp():
    x = ex.placeholder((None, 4), name="x")
    W1 = Parameter(np.full((4, 5), 0.1), name="W1")
    b1 = Parameter(np.zeros(5), name="b1")
    W2 = Parameter(np.full((5, 3), 0.2), name="W2")
    labels = ex.placeholder((None,), "int64", name="labels")
    h = ex.relu(x @ W1 + b1).named("hidden")
    loss = ex.softmax_cross_entropy(h @ W2, labels)
    return x, labels, loss, (W1, b1, W2)


def test_shape_error_names_op_variable_and_shapes() -> None:
    x = ex.placeholder((None, 3), name="x")
    W = Parameter(np.zeros((4, 5)), name="W")
    logits = (x @ W).named("logits")  # builds fine: nothing is inferred yet
    with pytest.raises(ShapeError) as info:
        nnlayers.compile(ex.sum(logits))
    message = str(info.value)
    assert "matmul 'logits'" in message
    assert "(None, 3) and (4, 5) do not align (3 != 4)" in message
    assert "placeholder 'x' (None, 3) float32" in message
    assert "parameter 'W' (4, 5) float32" in message
    assert "test_graph_setup.py" in message and "logits = (x @ W)" in message


def test_broadcast_error_is_caught_at_setup() -> None:
    a = ex.placeholder((None, 3), name="a")
    b = ex.placeholder((4,), name="b")
    with pytest.raises(ShapeError, match=r"add: shapes \(None, 3\), \(4,\) do not broadcast"):
        nnlayers.compile(a + b)


def test_conv_channel_mismatch_is_caught_at_setup() -> None:
    x = ex.placeholder((None, 3, 8, 8), name="images")
    w = Parameter(np.zeros((4, 2, 3, 3)), name="kernel")
    with pytest.raises(
        ShapeError,
        match=r"(?s)conv2d: x of shape \(None, 3, 8, 8\) has 3 channels but w of shape "
        r"\(4, 2, 3, 3\) expects 2\n.*input 0: placeholder 'images'",
    ):
        nnlayers.compile(ex.conv2d(x, w))


def test_reshape_error_is_caught_at_setup() -> None:
    x = ex.placeholder((None, 6), name="x")
    with pytest.raises(ShapeError, match=r"reshape: cannot reshape \(None, 6\) into \(4, 3\)"):
        nnlayers.compile(ex.reshape(x, (4, 3)))


def test_error_while_building_asks_for_shapes_lazily() -> None:
    x = ex.placeholder((2, 3))
    bad = ex.sum(x, axis=5)
    with pytest.raises(ShapeError, match="sum: axis 5 is out of range for 2 dimensions"):
        _ = bad.shape


def test_batch_size_changes_reuse_cached_plans() -> None:
    x, labels, loss, _ = mlp()
    graph = nnlayers.compile(loss)
    rng = np.random.default_rng(0)
    for n in (8, 8, 3, 8, 3):
        graph.forward({x: rng.normal(size=(n, 4)), labels: rng.integers(0, 3, n)})
        graph.backward()
    assert len(graph._plans) == 2


def test_feeds_by_name_and_clear_feed_errors() -> None:
    x, labels, loss, _ = mlp()
    graph = nnlayers.compile(loss)
    graph.forward({"x": np.ones((2, 4)), "labels": np.array([0, 2])})
    with pytest.raises(FeedError, match=r"no value for placeholder 'labels' \(None,\) int64"):
        graph.forward({x: np.ones((2, 4))})
    with pytest.raises(FeedError, match=r"placeholder 'x' expects shape \(None, 4\), got \(2, 5\)"):
        graph.forward({x: np.ones((2, 5)), labels: np.array([0, 2])})
    with pytest.raises(FeedError, match="no placeholder named 'y'"):
        graph.forward({"y": np.ones(2)})


def test_backward_needs_a_kept_forward() -> None:
    x, labels, loss, _ = mlp()
    graph = nnlayers.compile(loss)
    with pytest.raises(GraphError, match="backward\\(\\) needs a forward\\(\\)"):
        graph.backward()
    graph.eval().forward({x: np.ones((2, 4)), labels: np.array([0, 1])})
    with pytest.raises(GraphError):
        graph.backward()


def test_forward_only_releases_intermediates() -> None:
    x = ex.placeholder((None, 4), name="x")
    h = x
    for _ in range(50):
        h = ex.tanh(h)
    graph = nnlayers.compile(ex.sum(h), wrt=[])
    plan = graph.specialise(batch_size=2)
    slots = graph._slots(plan, [graph.xp.ones((2, 4), dtype=x.dtype)])
    plan.run_forward(slots, None)
    assert sum(v is not None for v in slots) == 1  # only the output is still held


def test_training_forward_keeps_only_what_backward_reads() -> None:
    x = ex.placeholder((None, 4), name="x")
    h = x
    one = ex.constant(1.0)
    for _ in range(20):
        h = h + one  # add keeps nothing for backward
    graph = nnlayers.compile(ex.sum(h), wrt=[x])
    plan = graph.specialise(batch_size=2)
    slots = graph._slots(plan, [graph.xp.ones((2, 4), dtype=x.dtype)])
    plan.run_forward(slots, [None] * plan.size)
    assert sum(v is not None for v in slots) == 0  # the constant is not read by backward either


def test_the_plan_is_readable_python_and_tracebacks_show_its_lines() -> None:
    import gc
    import linecache
    import traceback

    x, labels, loss, (W1, _, _) = mlp()
    graph = nnlayers.compile(loss)
    plan = graph.specialise(batch_size=2)
    source = plan.source
    assert "placeholder 'x' (2, 4) float32" in source and "parameter 'W1' (4, 5)" in source
    assert "def forward_train(" in source and "def backward(" in source
    assert "# matmul" in source and "# softmax_cross_entropy" in source
    assert "# relu 'hidden'" in source  # a named node is named on its line
    # the generated functions run the plan: feed, forward, backward as usual
    feeds = {x: np.ones((2, 4)), labels: np.array([0, 2])}
    graph.forward(feeds)
    grads = graph.backward()
    assert set(grads) == set(graph.wrt)
    # an error inside a step shows the step's generated line
    slots = graph._slots(plan, [graph.xp.ones((2, 4), dtype=x.dtype), np.array([0, 1])])
    slots[next(i for i, n in enumerate(plan.analysis.nodes) if n is W1)] = "not an array"
    with pytest.raises(Exception) as caught:
        plan.run_forward(slots, None)
    shown = "".join(traceback.format_tb(caught.value.__traceback__))
    assert "<nnlayers plan" in shown and "# matmul" in shown
    filename = plan._forward_eval.__code__.co_filename
    assert filename in linecache.cache
    del caught, plan
    graph._plans.clear()
    gc.collect()
    assert filename not in linecache.cache  # forgotten with the plan


@pytest.mark.parametrize("check_finite", [False, True])
def test_generated_code_calls_ops_directly_with_the_same_results(check_finite) -> None:
    # The suite runs with spec checks on, whose wrapped steps the generated code calls as they
    # are; without checks (what users run) it calls each op's method itself. Both must agree:
    # fan-out (ADD: mixed + mixed; ADD_INPLACE), slices of one array (ADD_SLICE), a cast,
    # in-place donors, an op with a residual, evaluation.
    rng = np.random.default_rng(0)
    x = ex.placeholder((None, 6), name="x")
    labels = ex.placeholder((None,), "int64", name="labels")
    W = Parameter(rng.standard_normal((6, 6)), name="W")
    b = Parameter(rng.standard_normal(6), name="b")
    h = ex.relu(x @ W + b)
    wide = h.astype("float64") * 2.0
    parts = [h[:, k : k + 2] for k in range(0, 6, 2)]
    mixed = h + h * h + wide.astype("float32") + ex.concat(parts, axis=1)
    loss = ex.softmax_cross_entropy((mixed + mixed) @ W, labels) + ex.sum(h[:, 0])
    feeds = {x: rng.standard_normal((4, 6)), labels: np.array([0, 5, 2, 3])}
    results = []
    for checks in (True, False):
        graph = nnlayers.compile(loss, wrt=[W, b], check_specs=checks, check_finite=check_finite)
        plan = graph.specialise(batch_size=4)
        direct = "_forward_train_" not in plan.source and ".forward(xp" in plan.source
        assert direct == (not checks and not check_finite)
        host = graph.xp.to_numpy
        value = host(graph.forward(feeds))
        grads = graph.backward()
        evaluated = host(graph.eval().forward(feeds))
        results.append((value, [host(grads[w]) for w in (W, b)], evaluated))
    (v1, g1, e1), (v2, g2, e2) = results
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(e1, e2)
    for a, c in zip(g1, g2, strict=True):
        np.testing.assert_array_equal(a, c)


def test_peak_memory_of_a_chain_does_not_grow_with_depth() -> None:
    def peak(depth: int, train: bool) -> int:
        x = ex.placeholder((None, 256), name="x")
        two, one = ex.constant(2.0), ex.constant(1.0)
        h = x
        for _ in range(depth):
            h = h * two + one
        graph = nnlayers.compile(ex.sum(h), wrt=[x] if train else [])
        return graph.peak_memory(batch_size=64, train=train)

    row = 64 * 256 * 4
    assert peak(10, False) == peak(40, False) <= 3 * row
    assert peak(10, True) == peak(40, True) <= 4 * row


def test_peak_memory_counts_what_backward_keeps() -> None:
    x = ex.placeholder((None, 256), name="x")
    h = x
    for _ in range(10):
        h = ex.exp(h)  # exp keeps its output for backward
    graph = nnlayers.compile(ex.sum(h), wrt=[x])
    assert graph.peak_memory(batch_size=8, train=True) >= 10 * 8 * 256 * 4
    assert graph.peak_memory(batch_size=8, train=False) <= 3 * 8 * 256 * 4


def test_multiple_outputs_and_monitoring() -> None:
    x, labels, loss, _ = mlp()
    graph = nnlayers.compile([loss, ex.mean(x)])
    value, mean = graph.forward({x: np.ones((2, 4)), labels: np.array([0, 1])})
    assert float(graph.xp.to_numpy(mean)) == 1.0
    assert np.isfinite(float(graph.xp.to_numpy(value)))


def test_float64_graph_end_to_end() -> None:
    x = ex.placeholder((None, 2), "float64", name="x")
    W = Parameter(np.eye(2), name="W", dtype="float64")
    y = ex.sum(ex.sigmoid(x @ W) * 2.0)
    graph = nnlayers.compile(y)
    out = graph.forward({x: np.zeros((3, 2))})
    assert out.dtype == np.float64
    graph.backward()
    assert W.grad.dtype == np.float64
