"""Variable-length batches and bidirectional recurrent layers: every sequence of a padded batch
gets what it gets alone, PyTorch's packed bidirectional LSTM and GRU give the same values and
gradients, central differences agree, and misuse gets a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import GRU, LSTM, RNN, Bidirectional, RNNStack
from nnlayers.testing.oracle import ORACLE_TOLERANCES

LENGTHS = np.array([5, 2, 4, 1])


def _host(graph, value) -> np.ndarray:
    return np.asarray(graph.xp.to_numpy(value), np.float64)


def _padded(seed: int = 0, features: int = 3) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(len(LENGTHS), LENGTHS.max(), features))
    for n, length in enumerate(LENGTHS):
        x[n, length:] = 99.0  # padding that would show if any real step read it
    return x


def _outputs(result):
    """(output, flattened state parts) of a layer's result with return_state."""
    out, state = result
    parts = []
    stack = [state]
    while stack:
        s = stack.pop(0)
        if isinstance(s, tuple):
            stack = list(s) + stack
        elif s is not None:
            parts.append(s)
    return out, parts


LAYERS = {
    "rnn": lambda **kw: RNN(4, seed=1, **kw),
    "lstm": lambda **kw: LSTM(4, seed=1, **kw),
    "lstm-unfused": lambda **kw: LSTM(4, seed=1, fused=False, **kw),
    "gru": lambda **kw: GRU(4, seed=1, **kw),
    "gru-unfused": lambda **kw: GRU(4, seed=1, fused=False, **kw),
    "bi-lstm": lambda **kw: Bidirectional(LSTM(4, seed=1, **kw)),
    "bi-gru-sum": lambda **kw: Bidirectional(GRU(4, seed=1, **kw), merge_mode="sum"),
}


@pytest.mark.parametrize("kind", list(LAYERS))
@pytest.mark.parametrize("sequences", [True, False])
def test_each_sequence_gets_what_it_gets_alone(kind, sequences) -> None:
    x = _padded()
    layer = LAYERS[kind](return_sequences=sequences, return_state=True)
    ph = ex.placeholder(x.shape, "float64", name="x")
    lengths = ex.placeholder((len(LENGTHS),), "int64", name="lengths")
    out, parts = _outputs(layer(ph, lengths=lengths))
    graph = nnlayers.compile([out, *parts], wrt=[])
    got = [_host(graph, v) for v in graph.forward({ph: x, lengths: LENGTHS})]
    for n, length in enumerate(LENGTHS):
        one = ex.placeholder((1, int(length), 3), "float64", name=f"x{n}")
        out1, parts1 = _outputs(layer(one))
        alone = nnlayers.compile([out1, *parts1], wrt=[])
        want = [_host(alone, v) for v in alone.forward({one: x[n : n + 1, :length]})]
        if sequences:
            np.testing.assert_allclose(got[0][n, :length], want[0][0], rtol=1e-10, atol=1e-12)
            assert not got[0][n, length:].any(), "outputs past the end are zero"
        else:
            np.testing.assert_allclose(got[0][n], want[0][0], rtol=1e-10, atol=1e-12)
        assert len(got) == len(want)
        for g, w in zip(got[1:], want[1:], strict=True):
            np.testing.assert_allclose(g[n], w[0], rtol=1e-10, atol=1e-12)


def test_an_lstm_without_return_state_keeps_no_state_for_a_padded_batch() -> None:
    layer = LSTM(4, seed=0)
    layer(ex.placeholder((4, 5, 3), "float64"), lengths=LENGTHS)
    assert layer.state is None
    gru = GRU(4, seed=0)
    gru(ex.placeholder((4, 5, 3), "float64"), lengths=LENGTHS)
    assert gru.state is not None


def _copy_direction(ours, module, suffix: str, kind: str, index: int = 0) -> dict:
    """Our recurrent layer's weights into PyTorch's ``*_l{index}{suffix}``; name -> (tensor,
    how)."""
    suffix = f"{index}{suffix}"
    import torch

    p = {q.name.rsplit("/", 1)[1]: q for q in ours.params}
    with torch.no_grad():
        getattr(module, f"weight_ih_l{suffix}").copy_(torch.tensor(p["weight"].numpy().T))
        getattr(module, f"weight_hh_l{suffix}").copy_(torch.tensor(p["recurrent_weight"].numpy().T))
        getattr(module, f"bias_ih_l{suffix}").copy_(torch.tensor(p["bias"].numpy()))
        hh = p["recurrent_bias"].numpy() if kind == "gru" else np.zeros_like(p["bias"].numpy())
        getattr(module, f"bias_hh_l{suffix}").copy_(torch.tensor(hh))
    pairs = {
        p["weight"].name: (f"weight_ih_l{suffix}", True),
        p["recurrent_weight"].name: (f"weight_hh_l{suffix}", True),
        p["bias"].name: (f"bias_ih_l{suffix}", False),
    }
    if kind == "gru":
        pairs[p["recurrent_bias"].name] = (f"bias_hh_l{suffix}", False)
    return pairs


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_packed_bidirectional_layers_equal_pytorch(kind, dtype, xp) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the {xp.name} device has no {dtype}")
    x = _padded(1)
    cls = LSTM if kind == "lstm" else GRU
    layer = Bidirectional(cls(4, return_sequences=True, seed=2), name="bi")
    ph = ex.placeholder(x.shape, dtype, name="x")
    out = layer(ph, lengths=LENGTHS)
    weights = np.random.default_rng(3).uniform(0.5, 1.5, out.shape)
    graph = nnlayers.compile(
        [ex.sum(out * ex.constant(weights, dtype=dtype)), out], wrt=[ph, *layer.params]
    )
    value = _host(graph, graph.forward({ph: x.astype(dtype)})[1])
    grads = graph.backward()

    tdt = torch.float64 if dtype == "float64" else torch.float32
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(
        3, 4, batch_first=True, bidirectional=True
    ).to(tdt)
    pairs = _copy_direction(layer.forward_layer, module, "", kind)
    pairs.update(_copy_direction(layer.backward_layer, module, "_reverse", kind))
    xt = torch.tensor(x, dtype=tdt, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        xt, torch.tensor(LENGTHS), batch_first=True, enforce_sorted=False
    )
    want, _ = torch.nn.utils.rnn.pad_packed_sequence(packed_out := module(packed)[0], True)
    assert packed_out is not None
    (want * torch.tensor(weights, dtype=tdt)).sum().backward()
    tol = ORACLE_TOLERANCES[np.dtype(dtype)]

    def close(a, b, what):
        np.testing.assert_allclose(a, b, rtol=tol.rtol * 10, atol=tol.atol * 10, err_msg=what)

    close(value, want.detach().double().numpy(), "output")
    close(_host(graph, grads[ph]), xt.grad.double().numpy(), "gradient of x")
    named = dict(module.named_parameters())
    for p in layer.params:
        tensor_name, transpose = pairs[p.name]
        g = named[tensor_name].grad.double().numpy()
        close(_host(graph, p.grad), g.T if transpose else g, f"gradient of {p.name}")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_stack_equals_pytorchs_multi_layer_bidirectional_layer(kind, xp) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    x = _padded(5)
    stack = RNNStack.of(kind, 4, num_layers=2, dropout=0.3, bidirectional=True, seed=3)
    ph = ex.placeholder(x.shape, "float64", name="x")
    out = stack(ph, lengths=LENGTHS)
    weights = np.random.default_rng(6).uniform(0.5, 1.5, out.shape)
    loss = ex.sum(out * ex.constant(weights, dtype="float64"))
    graph = nnlayers.compile([loss, out], wrt=[ph, *stack.params], training=False)
    value = _host(graph, graph.forward({ph: x}, keep_for_backward=True)[1])  # eval: no dropout
    grads = graph.backward()
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(
        3, 4, num_layers=2, dropout=0.3, batch_first=True, bidirectional=True
    ).double()
    module.eval()
    pairs = {}
    for i in range(2):
        bi = getattr(stack, f"layer_{i}")
        pairs.update(_copy_direction(bi.forward_layer, module, "", kind, i))
        pairs.update(_copy_direction(bi.backward_layer, module, "_reverse", kind, i))
    xt = torch.tensor(x, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        xt, torch.tensor(LENGTHS), batch_first=True, enforce_sorted=False
    )
    want, _ = torch.nn.utils.rnn.pad_packed_sequence(module(packed)[0], True)
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(value, want.detach().numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_host(graph, grads[ph]), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    named = dict(module.named_parameters())
    for p in stack.params:
        tensor_name, transpose = pairs[p.name]
        g = named[tensor_name].grad.numpy()
        np.testing.assert_allclose(
            _host(graph, p.grad), g.T if transpose else g, rtol=1e-9, atol=1e-11
        )
    with pytest.raises(ValueError, match="must have return_sequences=True"):
        RNNStack([LSTM(4), LSTM(4)])


def test_gradients_with_lengths_match_central_differences(gradcheck) -> None:
    x = _padded(4, features=2)[:, :4]

    class Padded:
        def __init__(self, layer) -> None:
            self.layer = layer

        @property
        def params(self):
            return self.layer.params

        def __call__(self, h):
            out = self.layer(h, lengths=np.minimum(LENGTHS, 4))
            return out[0] if isinstance(out, tuple) else out

    gradcheck(Padded(Bidirectional(GRU(3, return_sequences=True, seed=0))), x)
    gradcheck(Padded(LSTM(3, return_state=True, seed=0)), x)  # the loop that holds the state


def test_reverse_sequence_is_its_own_inverse_and_keeps_padding(xp) -> None:
    x = ex.placeholder((4, 5), "int64", name="x")
    graph = nnlayers.compile(ex.reverse_sequence(x, LENGTHS), wrt=[])
    data = np.arange(20).reshape(4, 5)
    got = graph.xp.to_numpy(graph.forward({x: data}))
    np.testing.assert_array_equal(got[1], [6, 5, 7, 8, 9])
    np.testing.assert_array_equal(got[3], data[3])
    again = nnlayers.compile(ex.reverse_sequence(ex.reverse_sequence(x, LENGTHS), LENGTHS), wrt=[])
    np.testing.assert_array_equal(again.xp.to_numpy(again.forward({x: data})), data)
    mask = nnlayers.compile(ex.sequence_mask(LENGTHS, 5), wrt=[])
    np.testing.assert_array_equal(
        mask.xp.to_numpy(mask.forward()), np.arange(5)[None] < LENGTHS[:, None]
    )


def test_errors() -> None:
    x = ex.placeholder((4, 5, 3), name="x")
    with pytest.raises(TypeError, match="lengths must be integers of shape"):
        LSTM(4, name="enc")(x, lengths=np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(ValueError, match="3 lengths for 4 sequences"):
        GRU(4)(x, lengths=np.array([1, 2, 3]))
    used = LSTM(4)
    used(x)
    with pytest.raises(ValueError, match="was already applied"):
        Bidirectional(used)
    with pytest.raises(ValueError, match="merge_mode must be one of"):
        Bidirectional(LSTM(4), merge_mode="max")
    with pytest.raises(TypeError, match="must be a recurrent layer"):
        Bidirectional(nnlayers.layers.Affine(4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="differ in return_sequences"):
        Bidirectional(LSTM(4), backward_layer=LSTM(4, return_sequences=True))


def test_a_stack_drops_between_layers_only_while_training() -> None:
    x = _padded(7)
    stack = RNNStack.of("gru", 4, num_layers=2, dropout=0.5, return_sequences=False, seed=1)
    ph = ex.placeholder(x.shape, "float64", name="x")
    out = stack(ph, lengths=LENGTHS)
    assert out.shape == (4, 4)  # the last layer's last real output
    graph = nnlayers.compile(out, wrt=[], seed=2)
    train = [_host(graph, graph.forward({ph: x})) for _ in range(2)]
    graph.eval()
    evals = [_host(graph, graph.forward({ph: x})) for _ in range(2)]
    assert not np.allclose(train[0], train[1])  # a new mask each step
    np.testing.assert_array_equal(evals[0], evals[1])
    assert not np.allclose(train[0], evals[0])
