"""Plans fuse ``relu(batch_norm(x))`` into one op, without changing what a step computes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from arraycore import to_numpy
from nnlayers.graph import Graph
from nnlayers.layers import Affine, BatchNorm, Conv2D, Flatten, Pool2D
from nnlayers.models import Model
from nnlayers.optim import SGD


def _host(value: Any) -> np.ndarray:
    return np.asarray(value) if isinstance(value, np.generic | np.ndarray) else to_numpy(value)


def _cnn(extra: Callable[[ex.Expr], ex.Expr] | None = None) -> tuple[Model, list[BatchNorm]]:
    """conv -> batch norm -> relu, twice, pooled, an affine head; ``extra`` may read the first
    batch norm's output as well (then that pair must not fuse)."""
    x = ex.placeholder((None, 3, 8, 8), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    norms = [BatchNorm(), BatchNorm()]
    h = x
    first = None
    for i, bn in enumerate(norms):
        z = bn(Conv2D(4, 3, padding="same", use_bias=False, seed=i)(h))
        first = z if first is None else first
        h = ex.relu(z)
    out = Affine(3, seed=7)(Flatten()(Pool2D(2)(h)))
    loss = ex.softmax_cross_entropy(out, y)
    if extra is not None:
        loss = loss + extra(first)
    return Model(loss, inputs=[x, y], optimizer=SGD(0.1, momentum=0.9)), norms


def _batches(n: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((6, 3, 8, 8)).astype(np.float32), rng.integers(0, 3, 6))
        for _ in range(n)
    ]


def _train(monkeypatch: pytest.MonkeyPatch, fusion: bool, **kw: Any) -> tuple[Model, list[Any]]:
    """Three steps of :func:`_cnn`, with or without fusion; ``(model, [losses, norms,
    the train-phase forward's generated source])``."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
    model, norms = _cnn(**kw)
    losses = [float(_host(model.train_step(b)[0])) for b in _batches()]
    return model, [losses, norms, _plan_ops(model)]


def _plan_ops(model: Model) -> list[str]:
    """The names of the ops the model's plan runs (made under the current setting)."""
    plan = model.graph.specialise(batch_size=6)
    return [op.name for op in plan.ops if op is not None]


def test_the_pair_runs_as_one_op_and_trains_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    fused, (losses, norms, ops) = _train(monkeypatch, True)
    plain, (plain_losses, plain_norms, plain_ops) = _train(monkeypatch, False)
    assert ops.count("batch_norm_relu") == 2 and ops.count("relu_in_batch_norm") == 2
    assert "relu" not in ops and "batch_norm" not in ops  # every pair fused
    assert plain_ops.count("relu") == 2 and plain_ops.count("batch_norm") == 2
    assert "batch_norm_relu" not in plain_ops
    assert "# batch_norm_relu" in fused.graph.specialise(batch_size=6).source  # its own lines
    # the same losses, weights, running statistics (to rounding: the fused kernel may round the
    # gated product differently in the last bit)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    for p, q in zip(fused.params, plain.params, strict=True):
        np.testing.assert_allclose(_host(p.value), _host(q.value), rtol=1e-4, atol=1e-5)
    for bn, other in zip(norms, plain_norms, strict=True):
        for a, b in zip(bn.params, other.params, strict=True):
            np.testing.assert_allclose(_host(a.value), _host(b.value), rtol=1e-4, atol=1e-5)
    # eval phase (running statistics) and predictions agree too
    x = _batches(1)[0][0]
    fused.graph.eval()
    plain.graph.eval()
    feeds = {"x": x, "y": np.zeros(6, np.int64)}
    got = _host(fused.graph.forward(feeds)[0])
    want = _host(plain.graph.forward(feeds)[0])
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_gradients_match_the_unfused_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    grads = []
    for fusion in (True, False):
        monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
        model, _ = _cnn()
        grads.append([_host(g) for g in model.gradients(*_batches(1)[0]).values()])
    for g, w in zip(*grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6 * float(np.abs(w).max()))


def test_a_batch_norm_output_read_elsewhere_is_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first batch norm's output also feeds the loss: it must stay the batch norm's (not
    its ReLU's), so only the second pair fuses, and the step still agrees with the plain one."""

    def extra(z: ex.Expr) -> ex.Expr:
        return ex.mean(z * z) * 0.01

    _, (losses, _, ops) = _train(monkeypatch, True, extra=extra)
    _, (plain_losses, _, _) = _train(monkeypatch, False, extra=extra)
    assert ops.count("batch_norm_relu") == 1 and ops.count("relu") == 1
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)


def test_gradient_wrt_the_batch_norm_output_is_not_the_relus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked for the gradient of the batch norm's output, the plan keeps the pair apart: the
    answer is before the ReLU's mask, as without fusion."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1")
    weights = np.linspace(-1, 1, 18, dtype=np.float32).reshape(2, 3, 3)
    x = ex.placeholder((None, 2, 3, 3), name="x")
    z = BatchNorm()(x)
    graph = Graph(ex.sum(ex.relu(z) * ex.constant(weights)), wrt=[z])
    data = np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(np.float32)
    graph.forward({"x": data})
    dz = _host(graph.backward()[z])
    # d loss / dz = weights where relu(z) > 0, else 0
    mean = data.mean(axis=(0, 2, 3), keepdims=True)
    zs = (data - mean) / np.sqrt(data.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(dz, np.where(zs > 0, weights, 0.0), atol=1e-6)
    assert "batch_norm_relu" not in [op.name for op in graph.specialise(batch_size=4).ops if op]


def test_guarded_plans_and_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_finite plans run the graph as written; a profile names the fused op's row."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1")
    model, _ = _cnn()
    batch = _batches(1)[0]
    model.train_step(batch)
    with nnlayers.profile() as prof:
        model.train_step(batch)
    ops = {r.op for r in prof.rows()}
    assert {"batch_norm_relu", "relu_in_batch_norm"} <= ops and "relu" not in ops
    guarded = Graph(model.loss, check_finite=True)
    assert "batch_norm_relu" not in [op.name for op in guarded.specialise(batch_size=6).ops if op]


def _dense_steps(
    monkeypatch: pytest.MonkeyPatch, fusion: bool, *, freeze: bool, dtype: str
) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """Three steps of affine -> batch norm (N, C) -> relu -> affine in ``dtype``, the batch norm
    frozen (normalising with its running statistics in the train phase) or not: the plan's op
    names, the parameters after the steps and the eval-phase outputs."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
    x = ex.placeholder((None, 5), dtype, name="x")
    y = ex.placeholder((None,), "int64", name="y")
    bn = BatchNorm()
    hidden = ex.relu(bn(Affine(8, seed=1)(x)))
    out = Affine(3, seed=2)(hidden)
    model = Model(ex.softmax_cross_entropy(out, y), inputs=[x, y], outputs=out, optimizer=SGD(0.1))
    rng = np.random.default_rng(3)
    data = rng.standard_normal((16, 5)).astype(dtype)
    labels = rng.integers(0, 3, 16)
    if freeze:
        model.train_step((data, labels))  # running statistics worth normalising with
        bn.freeze()
    for _ in range(3):
        model.train_step((data, labels))
    ops = [op.name for op in model.graph.specialise(batch_size=16).ops if op is not None]
    params = [_host(p.value).copy() for p in model.params]
    model.graph.eval()
    outputs = [_host(v) for v in model.graph.forward({"x": data, "y": labels})]
    return ops, params, outputs


@pytest.mark.parametrize("freeze", [False, True], ids=["batch-statistics", "frozen"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dense_frozen_and_float64_batch_norms_fuse_alike(
    monkeypatch: pytest.MonkeyPatch, freeze: bool, dtype: str
) -> None:
    """(N, C) batch norms fuse too, a frozen one (its train phase takes the eval path, the
    ReLU's gradient applied before the affine map's) and float64 ones (the composed path where
    no kernel takes them) train as the unfused graph does."""
    ops, params, outputs = _dense_steps(monkeypatch, True, freeze=freeze, dtype=dtype)
    plain_ops, plain_params, plain_outputs = _dense_steps(
        monkeypatch, False, freeze=freeze, dtype=dtype
    )
    assert "batch_norm_relu" in ops and "batch_norm_relu" not in plain_ops
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(params + outputs, plain_params + plain_outputs, strict=True):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


# -- bias and ReLU ---------------------------------------------------------------------------------
def _lenet(monkeypatch: pytest.MonkeyPatch, fusion: bool, **kw: Any) -> tuple[Model, list[Any]]:
    """A LeNet-like model, ``Conv2D(activation="relu")`` and ``Affine(activation="relu")`` layers
    large enough to fuse, trained three steps: ``(model, [losses, plan op names, the frozen
    bias or None])``.
    ``bias_first`` writes the first layer's sum as ``b + conv`` by hand; ``freeze_bias`` holds
    that bias fixed (its gradient is not asked for); ``dtype`` is the placeholders'."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
    dtype = kw.get("dtype", "float32")
    x = ex.placeholder((None, 1, 14, 14), dtype, name="x")
    y = ex.placeholder((None,), "int64", name="y")
    conv = Conv2D(8, 3, use_bias=not kw.get("bias_first"), seed=1)
    if kw.get("bias_first"):
        bias = nnlayers.Parameter(np.linspace(-0.5, 0.5, 8).astype(dtype), name="b")
        h = ex.relu(ex.reshape(bias, (1, 8, 1, 1)) + conv(x))
    else:
        conv.activation, conv._activation = "relu", ex.relu
        h = conv(x)
    h = Flatten()(Pool2D(2)(h))
    out = Affine(3, seed=3)(Affine(600, activation="relu", seed=2)(h))
    model = Model(ex.softmax_cross_entropy(out, y), inputs=[x, y], optimizer=SGD(0.1, momentum=0.9))
    frozen = None
    if kw.get("freeze_bias"):
        frozen = next(p for p in model.params if p.name == "conv2d/bias").freeze()
    rng = np.random.default_rng(4)
    batches = [
        (rng.standard_normal((64, 1, 14, 14)).astype(dtype), rng.integers(0, 3, 64))
        for _ in range(3)
    ]
    losses = [float(_host(model.train_step(b)[0])) for b in batches]
    ops = [op.name for op in model.graph.specialise(batch_size=64).ops if op is not None]
    return model, [losses, ops, frozen]


@pytest.mark.parametrize(
    "kw",
    [{}, {"bias_first": True}, {"freeze_bias": True}, {"dtype": "float64"}],
    ids=["layers", "bias-first", "frozen-bias", "float64"],
)
def test_bias_and_relu_run_as_one_op_and_train_as_before(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]
) -> None:
    """A convolution's and an affine layer's bias and ReLU fuse (written either way round, with
    or without the bias's gradient, float32 or float64), and the steps agree with the unfused
    graph's: losses, weights and the evaluation's outputs."""
    fused, (losses, ops, frozen) = _lenet(monkeypatch, True, **kw)
    plain, (plain_losses, plain_ops, _) = _lenet(monkeypatch, False, **kw)
    assert ops.count("bias_relu") == 2 and ops.count("relu_in_bias_relu") == 2
    assert "relu" not in ops and plain_ops.count("relu") == 2 and "bias_relu" not in plain_ops
    rtol = 1e-5 if kw.get("dtype", "float32") == "float32" else 1e-12
    np.testing.assert_allclose(losses, plain_losses, rtol=rtol)
    for p, q in zip(fused.params, plain.params, strict=True):
        np.testing.assert_allclose(_host(p.value), _host(q.value), rtol=10 * rtol, atol=rtol)
    if frozen is not None:
        np.testing.assert_array_equal(_host(frozen.value), 0.0)  # zeros init, never updated


def test_small_residual_and_shared_sums_are_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layer below ``BIAS_RELU_MIN_ITEMS`` keeps its two ops; so do the sum of two full
    arrays (a residual block's) and a biased sum that something else reads too."""
    from nnlayers.graph.fusion import BIAS_RELU_MIN_ITEMS

    monkeypatch.setenv("NNLAYERS_FUSION", "1")
    x = ex.placeholder((None, 600), name="x")
    small = Affine(600, activation="relu", seed=1)(x)  # 600 * batch 32 < the threshold
    assert 600 * 32 < BIAS_RELU_MIN_ITEMS <= 600 * 64
    z = Affine(600, seed=2)(x)
    residual = ex.relu(z + x)  # two full arrays
    b = nnlayers.Parameter(np.zeros(600, np.float32), name="b")
    shared = z + b
    read_twice = ex.relu(shared) + shared * 0.5
    graph = Graph(ex.sum(small) + ex.sum(residual) + ex.sum(read_twice))
    names = [op.name for op in graph.specialise(batch_size=32).ops if op is not None]
    assert "bias_relu" not in names
    names = [op.name for op in graph.specialise(batch_size=64).ops if op is not None]
    assert names.count("bias_relu") == 1  # the first layer's only, at batch 64


def test_bias_relu_gradients_match_the_unfused_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    grads = []
    for fusion in (True, False):
        model, _ = _lenet(monkeypatch, fusion)
        rng = np.random.default_rng(5)
        batch = (rng.standard_normal((64, 1, 14, 14)).astype(np.float32), rng.integers(0, 3, 64))
        grads.append([_host(g) for g in model.gradients(*batch).values()])
    for g, w in zip(*grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6 * float(np.abs(w).max()))


def _lstm_model(
    monkeypatch: pytest.MonkeyPatch,
    fusion: bool,
    *,
    read_cell: bool = False,
    sequences: bool = True,
) -> Model:
    """embedding-free LSTM classifier: ``LSTM(8)`` over ``(N, 5, 3)``, an affine head per step
    (or on the last step), softmax cross-entropy; ``read_cell`` adds the last cell state's sum
    to the loss (then the layer's packed output has two readers and stays as it is)."""
    from nnlayers.layers import LSTM

    monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
    x = ex.placeholder((None, 5, 3), name="x")
    y = ex.placeholder((None, 5) if sequences else (None,), "int64", name="y")
    rnn = LSTM(8, return_sequences=sequences, return_state=read_cell, seed=3)
    out = rnn(x)
    if read_cell:
        out, (_h, c) = out
    logits = Affine(4, seed=4)(out)
    loss = ex.softmax_cross_entropy(ex.reshape(logits, (-1, 4)), ex.reshape(y, (-1,)))
    if read_cell:
        loss = loss + 0.1 * ex.sum(c * c)
    return Model(loss, inputs=[x, y], optimizer=SGD(0.1, momentum=0.9))


def _lstm_batches(sequences: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2)
    return [
        (
            rng.standard_normal((6, 5, 3)).astype(np.float32),
            rng.integers(0, 4, (6, 5) if sequences else 6),
        )
        for _ in range(3)
    ]


@pytest.mark.parametrize("sequences", [True, False], ids=["every-step", "last-step"])
def test_an_lstm_read_by_its_hidden_states_alone_outputs_them(
    monkeypatch: pytest.MonkeyPatch, sequences: bool
) -> None:
    """The layer's op gives the hidden states themselves (no packed array with the cell state),
    and the steps, gradients and evaluation agree with the unfused graph's."""
    runs = []
    for fusion in (True, False):
        model = _lstm_model(monkeypatch, fusion, sequences=sequences)
        ops = _plan_ops(model)
        batches = _lstm_batches(sequences)
        grads = [_host(g) for g in model.gradients(*batches[0]).values()]
        losses = [float(_host(model.train_step(b)[0])) for b in batches]
        model.graph.eval()
        out = _host(model.graph.forward({"x": batches[0][0], "y": batches[0][1]})[0])
        runs.append((ops, grads, losses, [_host(p.value) for p in model.params], [out]))
    (ops, *got_all), (plain_ops, *plain) = runs
    assert ops.count("lstm_part_in_lstm") == 1 and "lstm_part" not in ops
    assert plain_ops.count("lstm_part") == 1 and "lstm_part_in_lstm" not in plain_ops
    for got, want in zip(got_all, plain, strict=True):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_an_lstm_whose_cell_state_is_read_keeps_its_packed_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fused = _lstm_model(monkeypatch, True, read_cell=True)
    ops = _plan_ops(fused)
    assert ops.count("lstm_part") == 2 and "lstm_part_in_lstm" not in ops
    batch = _lstm_batches(True)[0]
    plain = _lstm_model(monkeypatch, False, read_cell=True)
    for g, w in zip(
        fused.gradients(*batch).values(), plain.gradients(*batch).values(), strict=True
    ):
        np.testing.assert_allclose(_host(g), _host(w), rtol=1e-6)


def _dense_graph(
    monkeypatch: pytest.MonkeyPatch,
    fusion: bool,
    *,
    freeze: bool = False,
    rows: bool = False,
    shaped: bool = False,
) -> tuple[Graph, list[Any], dict[str, np.ndarray]]:
    """``sum(tanh(x @ w + b) ** 2)``-like loss over a dense layer without a ReLU (``rows``: a
    sequence ``(N, T, D)`` through the same layer), an attention-style product with a bias
    read first, as a second layer; ``freeze`` leaves the first layer's weight and the input
    without gradients (the bias alone trains); ``shaped`` gives the second bias leading axes
    of 1 (``(1, U)``, ``(1, 1, U)`` for rows)."""
    monkeypatch.setenv("NNLAYERS_FUSION", "1" if fusion else "0")
    shape = (None, 8, 40) if rows else (None, 40)
    x = ex.placeholder(shape, name="x")
    first = Affine(300, seed=1)
    h = ex.tanh(first(x))
    lead = (1,) * (len(shape) - 1) if shaped else ()
    b2 = nnlayers.Parameter(
        np.linspace(-1, 1, 300).astype(np.float32).reshape(*lead, 300), name="b2"
    )
    w2 = nnlayers.Parameter(
        np.random.default_rng(2).standard_normal((300, 300)).astype(np.float32) * 0.1, name="w2"
    )
    z = b2 + h @ w2  # the bias first
    loss = ex.sum(z * z)
    if freeze:
        first.params[0].freeze()
        w2.freeze()
    wrt = [p for p in [*first.params, b2, w2] if p.trainable]
    feeds = {"x": np.random.default_rng(3).standard_normal((64, *shape[1:])).astype(np.float32)}
    return Graph(loss, wrt=wrt), wrt, feeds


@pytest.mark.parametrize(
    "kw",
    [{}, {"rows": True}, {"freeze": True}, {"shaped": True}, {"shaped": True, "rows": True}],
    ids=["matrices", "rows", "bias-alone", "shaped-bias", "shaped-bias-rows"],
)
def test_a_product_and_its_bias_run_as_one_op(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]
) -> None:
    """A dense layer's ``x @ w + b`` (and ``b + h @ w``) without a ReLU runs as ``affine``; the
    loss and every gradient (the bias's too, also where nothing else trains) agree with the
    unfused graph's."""
    results = []
    for fusion in (True, False):
        graph, wrt, feeds = _dense_graph(monkeypatch, fusion, **kw)
        names = [op.name for op in graph.specialise(batch_size=64).ops if op is not None]
        loss = float(_host(graph.forward(feeds)))
        grads = graph.backward()
        grads = list(grads.values()) if isinstance(grads, dict) else list(grads)
        graph.eval()
        evaluated = float(_host(graph.forward(feeds)))
        results.append((names, loss, [_host(g) for g in grads], len(wrt), evaluated))
    (names, loss, grads, n, evaluated), (plain_names, plain_loss, plain_grads, _, plain_eval) = (
        results
    )
    np.testing.assert_allclose(evaluated, plain_eval, rtol=1e-5)
    assert names.count("affine") == 2 and names.count("add_in_affine") == 2
    assert "add" not in names and plain_names.count("add") == 2 and "affine" not in plain_names
    assert len(grads) == n == (2 if kw.get("freeze") else 4)  # frozen: the two biases
    np.testing.assert_allclose(loss, plain_loss, rtol=1e-5)
    for g, w in zip(grads, plain_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))


def test_small_shared_and_late_biases_keep_the_add(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``AFFINE_MIN_ITEMS`` the product and the add stay two ops; so do a product that is
    read twice and a bias computed after the product."""
    from nnlayers.graph.fusion import AFFINE_MIN_ITEMS

    monkeypatch.setenv("NNLAYERS_FUSION", "1")
    x = ex.placeholder((None, 64), name="x")
    w = nnlayers.Parameter(np.ones((64, 300), np.float32), name="w")
    b = nnlayers.Parameter(np.zeros(300, np.float32), name="b")
    small = ex.sum(x @ w + b)
    assert 300 * 32 < AFFINE_MIN_ITEMS <= 300 * 64
    graph = Graph(small)
    names = [op.name for op in graph.specialise(batch_size=32).ops if op is not None]
    assert "affine" not in names
    assert [op.name for op in graph.specialise(batch_size=64).ops if op].count("affine") == 1
    z = x @ w
    shared = ex.sum(z + b) + ex.sum(z)
    graph = Graph(shared)
    assert "affine" not in [op.name for op in graph.specialise(batch_size=64).ops if op]
    late = ex.sum(x @ w + ex.exp(b))  # the bias is a node computed after the product
    graph = Graph(late, wrt=[b])
    plan = graph.specialise(batch_size=64)
    order = [op.name for op in plan.ops if op is not None]
    if order.index("exp") > order.index("matmul"):
        assert "affine" not in order
    feeds = {"x": np.ones((64, 64), np.float32)}
    graph.forward(feeds)
    (grad,) = list(graph.backward().values())
    np.testing.assert_allclose(_host(grad), 64.0 * np.exp(0.0), rtol=1e-6)
