"""``nnlayers.profile``: every op's time, forward and backward, without changing what runs."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from arraycore import to_numpy
from nnlayers import Parameter
from nnlayers.layers import Linear, Sequential
from nnlayers.models import Classifier


def _classifier() -> Classifier:
    net = Sequential([Linear(16, activation="relu"), Linear(3)], seed=0)
    return Classifier(net, (8,), optimizer=nnlayers.optim.SGD(0.1), seed=0)


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 3, 32)


def _host(value: object) -> np.ndarray:
    return np.asarray(value) if isinstance(value, np.generic | np.ndarray) else to_numpy(value)


def test_profile_times_each_op_forward_and_backward() -> None:
    model = _classifier()
    batch = _batch()
    model.train_step(batch)
    with nnlayers.profile() as prof:
        for _ in range(3):
            model.train_step(batch)
    rows = {(r.op, r.phase): r for r in prof.rows()}
    for op, per_step in (("matmul", 2), ("relu", 1)):  # two layers' products, one's relu
        for phase in ("forward", "backward"):
            assert rows[(op, phase)].calls == per_step * 3, (op, phase)
    assert rows[("softmax_cross_entropy", "forward")].calls == 3
    assert rows[("optimizer", "update")].calls == 3  # the optimiser's step, a row of its own
    assert any(r.node == "SGD.step" for r in prof.rows(by="node"))
    assert all(r.seconds > 0 for r in rows.values())
    assert 0 < prof.op_seconds <= prof.wall_seconds
    # the rows by node add up to the rows by op, and name each node with its output shape
    by_node = prof.rows(by="node")
    assert sum(r.seconds for r in by_node) == pytest.approx(prof.op_seconds)
    assert any(r.op == "matmul" and r.node.endswith("(32x16)") for r in by_node)
    assert sorted(r.seconds for r in by_node) == [r.seconds for r in reversed(by_node)]


def test_profiled_steps_compute_what_unprofiled_ones_do() -> None:
    plain, profiled = _classifier(), _classifier()
    for seed in range(3):
        out = plain.train_step(_batch(seed))
        with nnlayers.profile():
            profiled_out = profiled.train_step(_batch(seed))
        for a, b in zip(out, profiled_out, strict=True):
            np.testing.assert_array_equal(_host(b), _host(a))
    for p, q in zip(plain.params, profiled.params, strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_profile_leaves_the_graph_unprofiled_afterwards() -> None:
    x = ex.placeholder((None, 4), name="x")
    w = Parameter(np.ones((4, 2), np.float32), name="w")
    graph = nnlayers.compile(ex.sum(ex.tanh(x @ w)))
    feeds = {x: np.ones((5, 4), np.float32)}
    graph.forward(feeds)
    graph.backward()
    own = dict(graph._plans)
    with nnlayers.profile() as prof:
        graph.forward(feeds)
        graph.backward()
    assert dict(graph._plans) == own  # the graph's own plans were neither used nor replaced
    counted = prof.op_seconds
    graph.forward(feeds)
    graph.backward()
    assert prof.op_seconds == counted
    assert {(r.op, r.phase) for r in prof.rows()} == {
        ("matmul", "forward"), ("matmul", "backward"), ("tanh", "forward"),
        ("tanh", "backward"), ("sum", "forward"), ("sum", "backward"),
    }  # fmt: skip


def test_table_lists_ops_shares_and_the_time_outside_them() -> None:
    model = _classifier()
    with nnlayers.profile(sync=False) as prof:
        model.train_step(_batch())
        time.sleep(0.02)  # outside every op
    table = prof.table()
    lines = table.splitlines()
    assert lines[0].split() == ["op", "phase", "calls", "total", "ms", "mean", "us", "share"]
    assert any(line.startswith("matmul") and "forward" in line for line in lines)
    outside = next(line for line in lines if line.startswith("outside the ops"))
    assert float(outside.split()[3]) >= 20.0  # ms: the sleep
    assert lines[-1].startswith("wall ") and "host time only" in lines[-1]
    short = prof.table(by="node", top=2).splitlines()
    assert short[4].startswith("(") and "more)" in short[4]
    with pytest.raises(ValueError, match="by must be 'op' or 'node'"):
        prof.table(by="layer")


def test_profiles_do_not_nest_and_stay_in_their_thread() -> None:
    with nnlayers.profile():
        with pytest.raises(RuntimeError, match="already collecting"), nnlayers.profile():
            pass
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(nnlayers.profiler.active()))
        thread.start()
        thread.join()
        assert seen == [None]
    assert nnlayers.profiler.active() is None
