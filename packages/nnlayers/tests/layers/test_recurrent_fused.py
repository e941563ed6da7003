"""LSTM and GRU run as one fused op: the same values and gradients as the unrolled graph, with
a graph whose size does not grow with the sequence length."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import GRU, LSTM


def _run(layer_cls, fused, *, state, sequences, x, h0, c0):
    layer = layer_cls(4, return_sequences=sequences, fused=fused, seed=3)
    xs = ex.placeholder(x.shape, "float64", name="x")
    feeds = {xs: x}
    initial = None
    if state:
        hp = ex.placeholder(h0.shape, "float64", name="h0")
        feeds[hp] = h0
        if layer_cls is LSTM:
            cp = ex.placeholder(c0.shape, "float64", name="c0")
            feeds[cp] = c0
            initial = (hp, cp)
        else:
            initial = hp
    out = layer(xs, initial_state=initial)
    weights = np.random.default_rng(5).uniform(0.5, 1.5, (x.shape[0], *out.shape[1:]))
    loss = ex.sum(out * ex.constant(weights))
    wrt = [xs, *layer.params, *[k for k in feeds if k is not xs]]
    graph = nnlayers.compile([loss, out], wrt=wrt)
    values = [graph.xp.to_numpy(v) for v in graph.forward(feeds)]
    grads = graph.backward()
    return values, [graph.xp.to_numpy(grads[w]) for w in wrt], graph


@pytest.mark.parametrize("layer_cls", [LSTM, GRU])
@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize("sequences", [False, True])
def test_fused_equals_unrolled(layer_cls, state, sequences) -> None:
    rng = np.random.default_rng(0)
    x, h0, c0 = rng.normal(size=(3, 5, 2)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    kw = {"state": state, "sequences": sequences, "x": x, "h0": h0, "c0": c0}
    fused_values, fused_grads, _ = _run(layer_cls, True, **kw)
    plain_values, plain_grads, _ = _run(layer_cls, False, **kw)
    for got, want in zip(fused_values + fused_grads, plain_values + plain_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layer_cls", [LSTM, GRU])
def test_fused_graph_does_not_grow_with_the_sequence(layer_cls) -> None:
    def nodes(steps: int, fused: bool) -> int:
        layer = layer_cls(4, return_sequences=True, fused=fused, seed=0)
        out = layer(ex.placeholder((None, steps, 2), name="x"))
        return len(nnlayers.compile(out, wrt=[]).dump().splitlines())

    assert nodes(40, True) == nodes(4, True)
    assert nodes(40, False) > 5 * nodes(4, True)


def test_fused_state_is_the_last_step() -> None:
    lstm = LSTM(4, return_sequences=True, seed=0)
    x = ex.placeholder((None, 6, 3), name="x")
    seq = lstm(x)
    h, c = lstm.state
    graph = nnlayers.compile([seq, h, c], wrt=[])
    data = np.random.default_rng(1).normal(size=(2, 6, 3)).astype(np.float32)
    seq_v, h_v, c_v = (graph.xp.to_numpy(v) for v in graph.forward({x: data}))
    np.testing.assert_array_equal(seq_v[:, -1], h_v)
    assert c_v.shape == (2, 4) and not np.array_equal(c_v, h_v)


def test_sequence_ops_name_bad_shapes() -> None:
    xw = ex.placeholder((None, 5, 12), name="xw")
    x = ex.placeholder((None, 5, 3), name="x")
    w, u, b = ex.placeholder((3, 16)), ex.placeholder((4, 16)), ex.placeholder((16,))
    assert ex.lstm(x, w, u, b).shape == (None, 6, 4)
    with pytest.raises(ValueError, match=r"lstm: w must be \(3, 16\)"):
        _ = ex.lstm(x, ex.placeholder((2, 16)), u, b).shape
    with pytest.raises(ValueError, match=r"lstm: U must be \(H, 4\*H\)"):
        _ = ex.lstm(x, w, ex.placeholder((4, 12)), b).shape
    with pytest.raises(ValueError, match=r"lstm: b must be \(16,\)"):
        _ = ex.lstm(x, w, u, ex.placeholder((12,))).shape
    with pytest.raises(ValueError, match="gru_sequence: the recurrent bias must be"):
        _ = ex.gru_sequence(xw, ex.placeholder((4, 12)), ex.placeholder((4,))).shape
    with pytest.raises(ValueError, match="gru_sequence: the initial state must be"):
        _ = ex.gru_sequence(
            xw, ex.placeholder((4, 12)), ex.placeholder((12,)), ex.placeholder((None, 5))
        ).shape
    with pytest.raises(ValueError, match="both h0 and c0"):
        ex.lstm(x, w, u, b, ex.placeholder((None, 4)))


@pytest.mark.parametrize("state", [False, True])
def test_lstm_layer_op_in_float32_matches_the_unrolled_graph(state) -> None:
    """float32 runs the backend's LSTM kernels (oneDNN's primitive on the NumPy backend where
    installed): values and every gradient agree with the unrolled graph to float32 rounding,
    the final state (``h``, ``c``) included."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 6, 3)).astype(np.float32)
    h0, c0 = (rng.normal(size=(4, 5)).astype(np.float32) for _ in range(2))
    results = []
    for fused in (True, False):
        layer = LSTM(5, return_sequences=True, return_state=True, fused=fused, seed=3)
        xs = ex.placeholder(x.shape, "float32", name="x")
        feeds = {xs: x}
        initial = None
        if state:
            hp = ex.placeholder(h0.shape, "float32", name="h0")
            cp = ex.placeholder(c0.shape, "float32", name="c0")
            feeds.update({hp: h0, cp: c0})
            initial = (hp, cp)
        out, (h_n, c_n) = layer(xs, initial_state=initial)
        loss = ex.sum(out * out) + ex.sum(h_n * 2.0) + ex.sum(c_n * c_n)
        wrt = [xs, *layer.params, *[k for k in feeds if k is not xs]]
        graph = nnlayers.compile([loss, out, c_n], wrt=wrt)
        values = [graph.xp.to_numpy(v) for v in graph.forward(feeds)]
        grads = graph.backward()
        results.append(values + [graph.xp.to_numpy(grads[w]) for w in wrt])
    for got, want in zip(*results, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("parts", ["cell", "hidden and cell", "last hidden and cell"])
def test_fused_lstm_gradients_through_its_final_state(parts) -> None:
    """A loss of the last cell state (and the hidden states or the last one): the fused LSTM's
    packed output takes gradients from both its parts, as the unrolled graph does."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, 2))

    def run(fused: bool) -> list[np.ndarray]:
        layer = LSTM(4, return_sequences=True, fused=fused, seed=3)
        xs = ex.placeholder(x.shape, "float64", name="x")
        seq = layer(xs)
        h, c = layer.state
        terms = [ex.sum(c * ex.constant(rng_weights((3, 4), 1)))]
        if parts == "hidden and cell":
            terms.append(ex.sum(seq * ex.constant(rng_weights((3, 5, 4), 2))))
        if parts == "last hidden and cell":
            terms.append(ex.sum(h * ex.constant(rng_weights((3, 4), 3))))
        loss = terms[0] if len(terms) == 1 else terms[0] + terms[1]
        wrt = [xs, *layer.params]
        graph = nnlayers.compile(loss, wrt=wrt)
        graph.forward({xs: x})
        grads = graph.backward()
        return [graph.xp.to_numpy(grads[w]) for w in wrt]

    for got, want in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def rng_weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape)
