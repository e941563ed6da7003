"""The static memory plan (``nnlayers.graph.memory``): timelines worked out by hand for small
graphs (an MLP, a chain of in-place ops, a fan-out accumulating gradients, a batch-norm conv
net), the summary's and the profile's reports, that nothing is planned during a step, and, on
the OpenCL backend, the planned training-step peak against the peak its memory pool counts.

Measured / planned peak on OpenCL (PoCL, float32, ``Graph.forward`` then ``Graph.backward``,
training / evaluation; each test states its bounds and the reason for a gap): MLP with dropout
1.000 / 1.000; fan-out 1.000 / 1.000; views 1.000 / 1.000; in-place chain 1.33 (relu_backward's
dense copy of the sum's broadcast gradient) / 1.002; batch-norm conv net 1.84 (the
convolutions' im2col columns, a kernel workspace no spec shows) / 1.000; LSTM classifier 4.9
(its saved workspace, unknown to the plan, which names it) in training.
"""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import arraycore
import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.graph import memory
from nnlayers.graph.plan import ADD, ADD_INPLACE
from nnlayers.layers import LSTM, Affine, BatchNorm, Conv2D, Dropout, Flatten, Pool2D, Sequential

F32 = 4  # bytes per float32


@pytest.fixture(autouse=True)
def _fusion_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plans below are worked out with the plan's fusions as they are by default."""
    monkeypatch.delenv("NNLAYERS_FUSION", raising=False)


def _param(shape: tuple[int, ...], name: str, seed: int = 0) -> Parameter:
    rng = np.random.default_rng(seed)
    return Parameter((0.1 * rng.standard_normal(shape)).astype(np.float32), name=name)


def _step(plan: memory.MemoryPlan, phase: str, op: str) -> memory.MemoryStep:
    (found,) = [s for s in plan.steps if s.phase == phase and s.op == op]
    return found


# -- graphs worked out by hand ----------------------------------------------------------------
def _mlp(n: int = 8) -> tuple[nnlayers.Graph, int]:
    """``softmax_cross_entropy(relu(x @ W1 + b1) @ W2 + b2, y)``, x (n, 4), 32 hidden units,
    4 classes: too small for the plan's bias fusions, so every add and the ReLU run in place."""
    x = ex.placeholder((None, 4), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    w1, b1 = _param((4, 32), "W1"), _param((32,), "b1", 1)
    w2, b2 = _param((32, 4), "W2", 2), _param((4,), "b2", 3)
    logits = ex.relu(x @ w1 + b1) @ w2 + b2
    return nnlayers.compile(ex.softmax_cross_entropy(logits, y)), n


def test_mlp_training_and_evaluation_steps_by_hand() -> None:
    graph, n = _mlp()
    plan = graph.memory_plan(batch_size=n)
    hidden, logits, loss = n * 32 * F32, n * 4 * F32, F32
    dw1, db1, dw2, db2 = 4 * 32 * F32, 32 * F32, 32 * 4 * F32, 4 * F32
    assert plan.train and plan.unknown_residuals == ()
    assert plan.parameter_bytes == dw1 + db1 + dw2 + db2
    assert plan.input_bytes == n * 4 * F32 + n * 8 + F32  # x, the int64 labels, the seed
    # forward: the first product, then its bias add and the ReLU in place (0 bytes); the
    # second product and its bias add in place; the cross-entropy's residual (its gradient,
    # logits-sized) and the loss, while the logits are still there
    made = [s.allocated_bytes for s in plan.steps if s.phase == "forward"]
    assert made == [hidden, 0, 0, logits, 0, logits + loss]
    assert plan.forward_peak_bytes == hidden + 2 * logits + loss
    # kept for backward: the hidden layer (read by the second product's backward and by the
    # ReLU's), the cross-entropy's residual and the loss
    assert plan.saved_bytes == hidden + logits + loss
    # the cross-entropy's gradient is its residual, scaled in place: nothing new
    assert _step(plan, "backward", "softmax_cross_entropy").allocated_bytes == 0
    # the peak: the ReLU's backward makes its gradient while the hidden layer (its output) and
    # the second product's gradient for it (its dy) are live, beside dW2, db2 and the loss
    relu = _step(plan, "backward", "relu")
    assert relu.allocated_bytes == hidden
    assert plan.peak_bytes == relu.peak_bytes == 3 * hidden + dw2 + db2 + loss
    assert plan.steps[plan.peak_step] is relu and plan.peak_at.startswith("backward of relu")
    assert plan.peak_by_kind == {
        "activation": hidden + loss,
        "residual": 0,
        "gradient": 2 * hidden + dw2 + db2,
        "temporary": 0,
    }
    assert sum(plan.peak_by_kind.values()) == plan.peak_bytes
    # what the step leaves: the parameters' gradients (none of them copied) and the loss
    assert plan.gradient_bytes == dw1 + db1 + dw2 + db2
    assert plan.end_bytes == plan.gradient_bytes + loss
    assert plan.total_peak_bytes == plan.peak_bytes + plan.parameter_bytes + plan.input_bytes
    assert graph.peak_memory(batch_size=n) == plan.total_peak_bytes

    # evaluation: the same steps without backward; the cross-entropy's residual is dropped as
    # soon as it is made, and each input goes after its last reader
    evaluation = graph.memory_plan(batch_size=n, train=False)
    assert not evaluation.train and evaluation.gradient_bytes == 0
    assert [s.allocated_bytes for s in evaluation.steps] == made
    assert evaluation.peak_bytes == hidden + logits  # the second product beside the hidden layer
    assert evaluation.end_bytes == loss
    assert [s.live_bytes for s in evaluation.steps][-1] == loss


def test_a_chain_of_in_place_ops_by_hand() -> None:
    """``sum(relu(tanh(x @ w) + b))``: in evaluation every op after the product writes into
    its buffer; in training the tanh keeps its output for backward, so the add makes a new
    array (which the ReLU then overwrites)."""
    n, units = 8, 64
    x = ex.placeholder((None, 4), name="x")
    w, b = _param((4, units), "w"), _param((units,), "b", 1)
    graph = nnlayers.compile(ex.sum(ex.relu(ex.tanh(x @ w) + b)))
    a, db, dw, loss = n * units * F32, units * F32, 4 * units * F32, F32

    evaluation = graph.memory_plan(batch_size=n, train=False)
    assert [s.allocated_bytes for s in evaluation.steps] == [a, 0, 0, 0, loss]
    assert evaluation.peak_bytes == a + loss

    plan = graph.memory_plan(batch_size=n)
    assert [s.allocated_bytes for s in plan.steps if s.phase == "forward"] == [a, 0, a, 0, loss]
    assert plan.forward_peak_bytes == plan.saved_bytes == 2 * a + loss  # tanh's, relu's outputs
    # backward: the sum's gradient is a view of the seed (0 bytes); the ReLU's is new; the add
    # hands it on to the tanh as it is and sums db; the tanh makes its own while its output and
    # the ReLU's gradient are live: the peak
    assert [s.allocated_bytes for s in plan.steps if s.phase == "backward"] == [0, a, db, a, dw]
    tanh = _step(plan, "backward", "tanh")
    assert plan.peak_bytes == tanh.peak_bytes == 3 * a + db + loss
    assert _step(plan, "backward", "relu").peak_bytes == 3 * a + loss
    assert plan.end_bytes == dw + db + loss


def test_fan_out_accumulates_gradients_by_hand() -> None:
    """``sum(sigmoid(h) + tanh(h) + h)``, ``h = x @ w``: ``h``'s gradient comes from the last
    add (``dy`` itself, a view of the seed), then the tanh (added into a new array) and the
    sigmoid (added in place into it)."""
    n, units = 8, 64
    x = ex.placeholder((None, 4), name="x")
    w = _param((4, units), "w")
    h = x @ w
    graph = nnlayers.compile(ex.sum(ex.sigmoid(h) + ex.tanh(h) + h))
    a, dw, loss = n * units * F32, 4 * units * F32, F32
    specialised = graph.specialise(batch_size=n)
    modes = [mode for step in specialised.backward_steps for _, _, mode, _, _ in step[4]]
    assert modes.count(ADD) == 1 and modes.count(ADD_INPLACE) == 1  # both kinds exercised

    plan = specialised.memory_plan()
    # forward: h, sigmoid, tanh and their sum are new (h has three readers and the other two
    # are kept for backward: no donor); the last add writes into the first sum; h goes after it
    assert [s.allocated_bytes for s in plan.steps if s.phase == "forward"] == [a, a, a, a, 0, loss]
    assert plan.forward_peak_bytes == 4 * a
    assert plan.saved_bytes == 2 * a + loss
    # backward of the tanh: its gradient, then the sum with h's first contribution (a new
    # array): four arrays of h's size at once, the sigmoid's and tanh's outputs among them
    tanh = _step(plan, "backward", "tanh")
    assert tanh.allocated_bytes == 2 * a
    assert plan.peak_bytes == tanh.peak_bytes == 4 * a + loss
    assert plan.peak_step == plan.steps.index(tanh)
    assert plan.peak_by_kind["gradient"] == 2 * a
    # the sigmoid's gradient is added in place; the tanh's, still held by the generated code's
    # ``gs`` until the sigmoid's backward returns, is live meanwhile
    sigmoid = _step(plan, "backward", "sigmoid")
    assert sigmoid.allocated_bytes == a and sigmoid.peak_bytes == 4 * a + loss
    assert _step(plan, "backward", "matmul").peak_bytes == 2 * a + dw + loss
    assert plan.end_bytes == dw + loss
    # each accumulated gradient is a buffer of its own, made and released where the plan says
    grads = [b for b in plan.buffers if b.kind == "gradient" and b.nbytes == a]
    assert len(grads) == 3 and all(b.last is not None and b.last > b.first for b in grads)


def _bn_net(fused: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[nnlayers.Graph, int]:
    """``mean(relu(batch_norm(conv2d(x, w))))``, x (2, 3, 8, 8), 4 filters 3x3, padding 1."""
    if not fused:
        monkeypatch.setenv("NNLAYERS_FUSION", "0")
    x = ex.placeholder((None, 3, 8, 8), name="x")
    w = _param((4, 3, 3, 3), "w")
    gamma = Parameter(np.ones(4, np.float32), name="gamma")
    beta = Parameter(np.zeros(4, np.float32), name="beta")
    mean = Parameter(np.zeros(4, np.float32), name="mean", trainable=False)
    var = Parameter(np.ones(4, np.float32), name="var", trainable=False)
    y = ex.batch_norm(ex.conv2d(x, w, padding=1), gamma, beta, mean, var)
    return nnlayers.compile(ex.mean(ex.relu(y))), 2


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_batch_norm_conv_net_by_hand(fused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, n = _bn_net(fused, monkeypatch)
    a, c, loss = n * 4 * 8 * 8 * F32, 4 * F32, F32
    dw = 4 * 3 * 3 * 3 * F32
    plan = graph.memory_plan(batch_size=n)
    ops = [s.op for s in plan.steps if s.phase == "forward"]
    assert ops == (
        ["conv2d", "batch_norm_relu", "relu_in_batch_norm", "mean"]
        if fused
        else ["conv2d", "batch_norm", "relu", "mean"]
    )
    # forward: the convolution, the normalised output with the batch's mean and 1 / std (the
    # residual), the ReLU (an alias of the fused op's output, or in place), the loss
    made = [s.allocated_bytes for s in plan.steps if s.phase == "forward"]
    assert made == [a, a + 2 * c, 0, loss]
    assert plan.forward_peak_bytes == plan.saved_bytes == 2 * a + 2 * c + loss
    # the peak, at the batch norm's backward: the convolution's output and the normalised one
    # (both read there), the residual, dy (the ReLU's gradient, or the mean's 4-byte one
    # passed through the alias), dx, dgamma and dbeta
    bn = _step(plan, "backward", "batch_norm_relu" if fused else "batch_norm")
    assert bn.allocated_bytes == a + 2 * c
    dy = F32 if fused else a
    live_beside = 0 if fused else -a  # unfused, the ReLU's output is gone once read there
    assert plan.peak_bytes == bn.peak_bytes == 3 * a + 4 * c + loss + dy + live_beside
    assert plan.steps[plan.peak_step] is bn
    assert plan.peak_by_kind["residual"] == 2 * c
    assert plan.gradient_bytes == dw + 2 * c and plan.end_bytes == dw + 2 * c + loss
    # the running statistics are parameters (not trainable): beside the step, not in it
    assert plan.parameter_bytes == dw + 4 * c

    # evaluation: the running statistics' path computes (x - mean) * scale + beta as three
    # array operations, so two more arrays of x's size (and scale) live while y is made,
    # beside 1 / std (a residual dropped at once)
    evaluation = graph.memory_plan(batch_size=n, train=False)
    step = _step(evaluation, "forward", "batch_norm_relu" if fused else "batch_norm")
    assert step.allocated_bytes == a + c + 2 * a + c
    assert evaluation.peak_bytes == step.peak_bytes == 4 * a + 2 * c
    assert evaluation.peak_by_kind["temporary"] == 2 * a + c


def test_views_share_their_buffer_and_outlive_the_slot_they_came_from() -> None:
    """A reshape of a contiguous array, a slice and a transpose are views (0 bytes) that keep
    their base alive; a reshape of a transposed array is a copy; in backward a reshape of the
    sum's broadcast gradient is a copy too, and a slice's gradient is new zeros."""
    x = ex.placeholder((None, 6, 4), name="x")
    w = _param((6, 4), "w")
    y = ex.exp(x * w)  # (n, 6, 4), new
    flat = ex.reshape(y, (-1, 24))  # a view
    part = y[:, :3]  # a strided view
    moved = ex.reshape(ex.permute_dims(y, (0, 2, 1)), (-1, 24))  # a view, then a copy
    graph = nnlayers.compile(ex.sum(flat) + ex.sum(part) + ex.sum(moved))
    n = 5
    a, loss = n * 6 * 4 * F32, F32
    evaluation = graph.memory_plan(batch_size=n, train=False)
    made = [(s.op, s.allocated_bytes) for s in evaluation.steps]
    assert made == [
        ("multiply", a), ("exp", a), ("reshape", 0), ("sum", loss), ("getitem", 0),
        ("sum", loss), ("add", loss), ("permute_dims", 0), ("reshape", a), ("sum", loss),
        ("add", loss),
    ]  # fmt: skip
    # the exp's slot goes at the transpose (its last reader), its buffer once the transpose's
    # view of it has been copied
    (exp,) = [b for b in evaluation.buffers if b.label.startswith("output of exp")]
    assert (exp.first, exp.last) == (1, 8)
    assert evaluation.peak_bytes == 2 * a + loss and evaluation.peak_step == 8

    plan = graph.memory_plan(batch_size=n)
    backward = [(s.op, s.allocated_bytes) for s in plan.steps if s.phase == "backward"]
    assert backward == [
        ("add", 0), ("sum", 0),
        ("reshape", a),  # the sum's gradient broadcasts: reshaping it copies
        ("permute_dims", 0), ("add", 0), ("sum", 0),
        ("getitem", 2 * a),  # zeros of y's shape, and the sum with the first contribution
        ("sum", 0), ("reshape", a), ("exp", a), ("multiply", 6 * 4 * F32),
    ]  # fmt: skip


def test_unknown_residuals_are_named_and_counted_as_zero() -> None:
    net = Sequential([LSTM(8), Affine(3)], seed=0)
    model = nnlayers.Classifier(net, (5, 4), seed=0)
    plan = model.graph.memory_plan(batch_size=4, train=True)
    assert len(plan.unknown_residuals) == 1
    assert plan.unknown_residuals[0].startswith("lstm #")
    assert "saved workspace" in plan.unknown_residuals[0]
    assert "not counted (unknown residuals): lstm #" in str(plan)
    assert not any(
        b.kind == "residual" and b.label.startswith("residual of lstm") for b in plan.buffers
    )


def test_an_op_may_say_how_large_its_residual_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from nnlayers.ops.nn.recurrent import LSTMSequence

    def residual_bytes(self: Any, x: Any, *specs: Any) -> int:
        return 1000

    monkeypatch.setattr(LSTMSequence, "residual_bytes", residual_bytes, raising=False)
    net = Sequential([LSTM(8), Affine(3)], seed=0)
    model = nnlayers.Classifier(net, (5, 4), seed=0)
    plan = model.graph.memory_plan(batch_size=4, train=True)
    assert plan.unknown_residuals == ()
    assert [b.nbytes for b in plan.buffers if b.kind == "residual"][:1] == [1000]


def test_timeline_text_and_report() -> None:
    graph, n = _mlp()
    plan = graph.memory_plan(batch_size=n)
    lines = plan.table().splitlines()
    assert lines[0].split() == ["step", "made", "high", "live", "after"]
    assert len(lines) == 2 + len(plan.steps)
    assert sum("<- peak" in line for line in lines) == 1
    assert "backward of relu" in next(line for line in lines if "<- peak" in line)
    text = str(plan)
    assert text.startswith("training step: peak ") and "beside parameters" in text
    assert memory.format_bytes(512) == "512 B" and memory.format_bytes(3 << 20) == "3.00 MiB"


def test_docstring_examples() -> None:
    module = importlib.import_module("nnlayers.graph.memory")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# -- reports: summary and profile -----------------------------------------------------------
def _classifier() -> nnlayers.Classifier:
    net = Sequential([Affine(32, activation="relu"), Affine(3)], seed=0)
    return nnlayers.Classifier(net, (8,), optimizer=nnlayers.optim.SGD(0.1), seed=0)


def test_summary_reports_the_planned_steps_at_a_batch_size() -> None:
    model = _classifier()
    plain = nnlayers.summary(model)
    assert plain.training_memory is None and plain.evaluation_memory is None
    assert "Planned" not in str(plain)
    s = nnlayers.summary(model, batch_size=16)
    assert s.batch_size == 16
    assert s.training_memory is not None and s.evaluation_memory is not None
    want = model.graph.memory_plan(batch_size=16, train=True)
    assert s.training_memory.peak_bytes == want.peak_bytes
    assert s.training_memory.parameter_bytes == s.param_bytes
    assert s.evaluation_memory.peak_bytes == model.graph.memory_plan(16, train=False).peak_bytes
    text = str(s)
    training = next(line for line in text.splitlines() if line.startswith("Planned training"))
    assert training.startswith(
        f"Planned training step, batch 16: peak {memory.format_bytes(want.peak_bytes)} ("
    )
    assert "gradients" in training and "+ inputs" in training
    assert any(line.startswith("Planned evaluation step, batch 16") for line in text.splitlines())
    with pytest.raises(ValueError, match="batch_size= plans the memory of a model"):
        nnlayers.summary(Affine(3), (4,), batch_size=8)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        nnlayers.summary(model, batch_size=0)


def test_summary_names_unknown_residuals() -> None:
    model = nnlayers.Classifier(Sequential([LSTM(8), Affine(3)], seed=0), (5, 4), seed=0)
    text = str(nnlayers.summary(model, batch_size=4))
    assert "Not counted (size unknown): lstm #" in text


def test_profile_reports_the_planned_peak_beside_the_measured_one(xp: Any) -> None:
    model = _classifier()
    rng = np.random.default_rng(0)
    batch = (rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 3, 16))
    model.train_step(batch)
    with nnlayers.profile() as prof:
        model.train_step(batch)
        model.evaluate(*batch)
    found = prof.memory()
    labels = [label for label, _ in found.plans]
    assert any(label.startswith("training step, feeds 16x8, 16") for label in labels)
    (training,) = [p for label, p in found.plans if label.startswith("training")]
    assert training.peak_bytes == model.graph.memory_plan(batch_size=16, train=True).peak_bytes
    assert found.planned_peak_bytes == max(p.peak_bytes for _, p in found.plans)
    lines = prof.table().splitlines()
    assert lines[-1].startswith("wall ")
    line = lines[-2]
    assert line.startswith("memory: ") and "step peak" in line and "parameters" in line
    if xp.__array_namespace_info__().memory_stats() is None:
        assert found.measured_peak_bytes is None and found.ratio is None
        assert line.endswith(f"the {xp.name} backend does not count its memory")
    else:
        assert found.measured_peak_bytes is not None and found.start_bytes is not None
        assert found.measured_peak_bytes >= found.start_bytes
        assert found.ratio is not None and found.ratio > 0
        assert line.startswith("memory: measured peak ")


def test_a_profile_without_memory_leaves_the_backend_counter_alone(
    xp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = type(xp.__array_namespace_info__())

    def refuse(self: Any) -> None:
        raise AssertionError("the profile reset the backend's memory counter")

    monkeypatch.setattr(info, "reset_memory_stats", refuse)
    model = _classifier()
    rng = np.random.default_rng(0)
    batch = (rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 3, 16))
    with nnlayers.profile(memory=False) as prof:
        model.train_step(batch)
    found = prof.memory()
    assert found.measured_peak_bytes is None and found.planned_peak_bytes is not None


def test_a_profile_of_nothing_has_no_memory_line() -> None:
    with nnlayers.profile() as prof:
        pass
    assert prof.memory().plans == ()
    assert not any(line.startswith("memory:") for line in prof.table().splitlines())


def test_nothing_is_planned_during_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory plan is worked out on request only: steps, profiled or not, never call it."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a step planned memory")

    monkeypatch.setattr(memory, "memory_plan", refuse)
    model = _classifier()
    rng = np.random.default_rng(0)
    batch = (rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 3, 16))
    for _ in range(2):
        model.train_step(batch)
    with nnlayers.profile() as prof:
        model.train_step(batch)
    assert prof.rows()  # timed, and nothing planned meanwhile (nor when the block ended)
    with pytest.raises(AssertionError, match="planned memory"):
        prof.memory()


# -- OpenCL: planned against measured ----------------------------------------------------------
@pytest.fixture(scope="module")
def opencl() -> Iterator[Any]:
    try:
        xp = arraycore.namespace("opencl")
    except arraycore.BackendError as exc:
        print(f"OpenCL backend not usable here, its measurements are skipped: {exc}")
        pytest.skip(f"the OpenCL backend is not usable here: {exc}")
    with arraycore.use("opencl"):
        yield xp


def _measured(graph: nnlayers.Graph, feeds: dict[Any, np.ndarray], train: bool) -> list[int]:
    """The pool's peak over one step, less the bytes live before it (parameters, feeds, seed),
    for three steps; the last step's gradients are dropped before each (as train_step does)."""
    xp = graph.xp
    info = xp.__array_namespace_info__()
    device = {k: xp.asarray(v) for k, v in feeds.items()}
    (graph.train if train else graph.eval)()
    peaks = []
    for _ in range(3):
        graph.clear_gradients()
        info.reset_memory_stats()
        before = info.memory_stats()["used_bytes"]
        out = graph.forward(device)
        if train:
            graph.backward()
        peaks.append(info.memory_stats()["peak_bytes"] - before)
        del out
    return peaks


def _ratio(graph: nnlayers.Graph, feeds: dict[Any, np.ndarray], train: bool) -> float:
    peaks = _measured(graph, feeds, train)
    assert len(set(peaks[1:])) == 1, peaks  # every step alike once warm
    planned = graph.memory_plan(train=train)
    ratio = peaks[-1] / planned.peak_bytes
    what = "training" if train else "evaluation"
    print(f"{what}: measured {peaks[-1]} B, planned {planned.peak_bytes} B, ratio {ratio:.4f}")
    return ratio


def _model_feeds(model: nnlayers.models.Model, *arrays: np.ndarray) -> dict[Any, np.ndarray]:
    return dict(zip(model.graph.placeholders, arrays, strict=True))


def test_opencl_mlp_peak_is_what_the_plan_says(opencl: Any) -> None:
    net = Sequential([Affine(512, activation="relu"), Dropout(0.5), Affine(10)], seed=0)
    model = nnlayers.Classifier(net, (256,), seed=0)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 256)).astype(np.float32), rng.integers(0, 10, 64)
    feeds = _model_feeds(model, x, y)
    # exact but for the pool's 8-byte minimum of the 0-d loss and metrics (4 bytes planned)
    assert 1.0 <= _ratio(model.graph, feeds, train=True) <= 1.001
    assert 1.0 <= _ratio(model.graph, feeds, train=False) <= 1.001


def test_opencl_chain_fan_out_and_views_peaks_against_the_plan(opencl: Any) -> None:
    n, units = 64, 256
    rng = np.random.default_rng(0)
    x = ex.placeholder((None, 32), name="x")
    feeds = {x: rng.standard_normal((n, 32)).astype(np.float32)}
    w, b = _param((32, units), "w"), _param((units,), "b", 1)
    chain = nnlayers.compile(ex.sum(ex.relu(ex.tanh(x @ w) + b)))
    # training 1.33: OpenCL's relu_backward makes a dense copy of its dy, the sum's gradient (a
    # broadcast view of the scalar seed): one array of the layer's size beside what the plan
    # has live in that step
    assert 1.3 <= _ratio(chain, feeds, train=True) <= 1.34
    relu = _step(chain.memory_plan(train=True), "backward", "relu").peak_bytes
    layer = n * units * F32
    assert _measured(chain, feeds, train=True)[-1] == pytest.approx(relu + layer, abs=64)
    # evaluation 1.002: the sum's partial sums (128 bytes) and the pool's 8-byte scalars
    assert 1.0 <= _ratio(chain, feeds, train=False) <= 1.003
    h = x @ _param((32, units), "w2", 2)
    fan_out = nnlayers.compile(ex.sum(ex.sigmoid(h) + ex.tanh(h) + h))
    assert 1.0 <= _ratio(fan_out, feeds, train=True) <= 1.001
    assert 1.0 <= _ratio(fan_out, feeds, train=False) <= 1.001
    # views: reshapes, a slice and a transpose of one array, and a reshape that copies
    v = ex.placeholder((None, 6, 4), name="v")
    y = ex.exp(v * _param((6, 4), "w3", 3))
    moved = ex.reshape(ex.permute_dims(y, (0, 2, 1)), (-1, 24))
    views = nnlayers.compile(ex.sum(ex.reshape(y, (-1, 24))) + ex.sum(y[:, :3]) + ex.sum(moved))
    fed = {v: rng.standard_normal((n, 6, 4)).astype(np.float32)}
    assert 1.0 <= _ratio(views, fed, train=True) <= 1.001
    assert 1.0 <= _ratio(views, fed, train=False) <= 1.001


def test_opencl_batch_norm_conv_net_peak_against_the_plan(opencl: Any) -> None:
    """The training step measures 1.84x its plan: the convolutions' backward-filter kernels
    make im2col columns of their input (C * 9 values per output pixel) and a contiguous copy
    of their transpose, a workspace no spec shows. Evaluation (no backward) is exact."""
    net = Sequential(
        [
            Conv2D(8, 3, padding="same"),
            BatchNorm(),
            "relu",
            Pool2D(2),
            Conv2D(16, 3, padding="same"),
            BatchNorm(),
            "relu",
            Pool2D(2),
            Flatten(),
            Affine(10),
        ],
        seed=0,
    )
    model = nnlayers.Classifier(net, (3, 16, 16), seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3, 16, 16)).astype(np.float32)
    feeds = _model_feeds(model, x, rng.integers(0, 10, 16))
    assert 1.0 <= _ratio(model.graph, feeds, train=True) <= 2.0
    assert 1.0 <= _ratio(model.graph, feeds, train=False) <= 1.001
    # the gap is the first convolution's backward: its input's im2col columns twice (and the
    # per-example filter products, 16 x the filter, before they are summed)
    planned = model.graph.memory_plan(train=True)
    first_conv = next(s for s in reversed(planned.steps) if s.op == "conv2d")
    columns = 16 * 16 * 16 * 3 * 9 * F32
    gap = _measured(model.graph, feeds, train=True)[-1] - first_conv.peak_bytes
    assert 2 * columns <= gap <= 2 * columns + 16 * 8 * 3 * 9 * F32


def test_opencl_lstm_peak_exceeds_the_plan_by_its_unknown_workspace(opencl: Any) -> None:
    model = nnlayers.Classifier(Sequential([LSTM(32), Affine(5)], seed=0), (12, 8), seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 12, 8)).astype(np.float32)
    feeds = _model_feeds(model, x, rng.integers(0, 5, 16))
    assert model.graph.memory_plan(batch_size=16).unknown_residuals  # named, counted as 0
    ratio = _ratio(model.graph, feeds, train=True)
    assert 1.0 < ratio <= 6.0
