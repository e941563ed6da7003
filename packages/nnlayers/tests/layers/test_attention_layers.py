"""MultiHeadAttention, the transformer layers and positional encodings against PyTorch's
``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer``
(values and every gradient, same weights), central differences, and their errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import (
    MultiHeadAttention,
    PositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
)
from nnlayers.layers.positional import sinusoidal_table
from nnlayers.testing.oracle import ORACLE_TOLERANCES


def _run(build, inputs: dict[str, np.ndarray], dtype: np.dtype, training: bool = True):
    """Our output and the gradients of ``sum(out * R)`` for every floating input and parameter
    (by name), float64 on the host."""
    phs = {
        k: ex.placeholder(v.shape, dtype if v.dtype.kind == "f" else v.dtype, name=k)
        for k, v in inputs.items()
    }
    layer, out = build(phs)
    weights = np.random.default_rng(5).uniform(0.5, 1.5, out.shape)
    loss = ex.sum(out * ex.constant(weights, dtype=dtype))
    floats = [phs[k] for k, v in inputs.items() if v.dtype.kind == "f"]
    graph = nnlayers.compile([loss, out], wrt=floats + layer.params, training=training, seed=0)
    feeds = {phs[k]: (v.astype(dtype) if v.dtype.kind == "f" else v) for k, v in inputs.items()}
    value = graph.xp.to_numpy(graph.forward(feeds)[1]).astype(np.float64)
    grads = graph.backward()
    named = {p.name: np.asarray(graph.xp.to_numpy(grads[p]), np.float64) for p in floats}
    named.update({p.name: np.asarray(graph.xp.to_numpy(p.grad), np.float64) for p in layer.params})
    return layer, value, named, weights


def _torch_grads(module, tensors: dict, forward, weights: np.ndarray):
    import torch

    module.zero_grad()
    out = forward(module, tensors)
    (out * torch.tensor(weights, dtype=out.dtype)).sum().backward()
    return out.detach().double().numpy()


def _assert_close(got, want, dtype, what: str) -> None:
    tol = ORACLE_TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(got, want, rtol=tol.rtol * 5, atol=tol.atol * 5, err_msg=what)


def _set(tensor, value: np.ndarray) -> None:
    import torch

    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.ascontiguousarray(value)))


def _copy_mha(ours: MultiHeadAttention, theirs) -> dict[str, tuple]:
    """Copy our weights into ``theirs``; returns our parameter name -> (torch tensor, transpose)."""
    p = {q.name.rsplit("/", 1)[1]: q for q in ours.params}
    pairs: dict[str, tuple] = {}
    if "in_weight" in p:
        pairs["in_weight"] = (theirs.in_proj_weight, True)
    else:
        pairs.update(
            q_weight=(theirs.q_proj_weight, True),
            k_weight=(theirs.k_proj_weight, True),
            v_weight=(theirs.v_proj_weight, True),
        )
    pairs.update(
        in_bias=(theirs.in_proj_bias, False),
        out_weight=(theirs.out_proj.weight, True),
        out_bias=(theirs.out_proj.bias, False),
    )
    out = {}
    for short, (tensor, transpose) in pairs.items():
        value = p[short].numpy()
        _set(tensor, value.T if transpose else value)
        out[p[short].name] = (tensor, transpose)
    return out


def _compare_params(named, pairs, dtype) -> None:
    for name, (tensor, transpose) in pairs.items():
        want = tensor.grad.double().numpy()
        _assert_close(named[name], want.T if transpose else want, dtype, f"gradient of {name}")


def _torch_dtype(dtype):
    import torch

    return torch.float64 if np.dtype(dtype) == np.float64 else torch.float32


MASKS = ["none", "key_padding", "bool_attn", "float_attn", "causal", "padding_and_causal"]


def _masks(kind: str, n: int, tq: int, tk: int):
    """(our keyword arguments, torch's keyword arguments) for one mask setting."""
    import torch

    rng = np.random.default_rng(11)
    pad = np.zeros((n, tk), bool)
    pad[0, -2:] = True
    pad[1, -1] = True
    upper = np.triu(np.ones((tq, tk), bool), 1)
    if kind == "none":
        return {}, {}
    if kind == "key_padding":
        return {"key_padding_mask": ex.constant(pad)}, {"key_padding_mask": torch.tensor(pad)}
    if kind == "bool_attn":
        blocked = rng.uniform(size=(tq, tk)) > 0.7
        blocked[:, 0] = False
        return {"attn_mask": ex.constant(blocked)}, {"attn_mask": torch.tensor(blocked)}
    if kind == "float_attn":
        add = rng.normal(size=(tq, tk))
        return {"attn_mask": add}, {"attn_mask": add}
    if kind == "causal":
        return {"causal": True}, {"attn_mask": torch.tensor(upper), "is_causal": True}
    return (
        {"causal": True, "key_padding_mask": ex.constant(pad)},
        {"attn_mask": torch.tensor(upper), "key_padding_mask": torch.tensor(pad)},
    )


@pytest.mark.parametrize("mask", MASKS)
def test_self_attention_equals_pytorch(mask, dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    n, t, e, heads = 3, 5, 8, 2
    x = np.random.default_rng(0).normal(size=(n, t, e))
    ours_kw, theirs_kw = _masks(mask, n, t, t)
    if "attn_mask" in ours_kw and not isinstance(ours_kw["attn_mask"], ex.Expr):
        add = ours_kw["attn_mask"]
        ours_kw["attn_mask"] = ex.constant(add, dtype=dtype)
        theirs_kw["attn_mask"] = torch.tensor(add, dtype=_torch_dtype(dtype))

    def build(phs):
        layer = MultiHeadAttention(heads, seed=3)
        return layer, layer(phs["x"], **ours_kw)

    layer, value, named, weights = _run(build, {"x": x}, dtype)
    theirs = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=_torch_dtype(dtype))
    pairs = _copy_mha(layer, theirs)
    xt = torch.tensor(x, dtype=_torch_dtype(dtype), requires_grad=True)
    want = _torch_grads(
        theirs,
        {"x": xt},
        lambda m, ts: m(ts["x"], ts["x"], ts["x"], need_weights=False, **theirs_kw)[0],
        weights,
    )
    _assert_close(value, want, dtype, "output")
    _assert_close(named["x"], xt.grad.double().numpy(), dtype, "gradient of x")
    _compare_params(named, pairs, dtype)


def test_cross_attention_with_other_widths_equals_pytorch(dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    n, tq, tk, e, ek, ev, heads = 2, 4, 6, 8, 5, 3, 4
    rng = np.random.default_rng(1)
    arrays = {"q": rng.normal(size=(n, tq, e)), "k": rng.normal(size=(n, tk, ek))}
    arrays["v"] = rng.normal(size=(n, tk, ev))
    ours_kw, theirs_kw = _masks("key_padding", n, tq, tk)

    def build(phs):
        layer = MultiHeadAttention(heads, seed=4)
        return layer, layer(phs["q"], phs["k"], phs["v"], **ours_kw)

    layer, value, named, weights = _run(build, arrays, dtype)
    theirs = torch.nn.MultiheadAttention(
        e, heads, kdim=ek, vdim=ev, batch_first=True, dtype=_torch_dtype(dtype)
    )
    pairs = _copy_mha(layer, theirs)
    ts = {
        k: torch.tensor(v, dtype=_torch_dtype(dtype), requires_grad=True) for k, v in arrays.items()
    }
    want = _torch_grads(
        theirs,
        ts,
        lambda m, t: m(t["q"], t["k"], t["v"], need_weights=False, **theirs_kw)[0],
        weights,
    )
    _assert_close(value, want, dtype, "output")
    for k in arrays:
        _assert_close(named[k], ts[k].grad.double().numpy(), dtype, f"gradient of {k}")
    _compare_params(named, pairs, dtype)


def test_attention_scores_are_pytorchs_per_head_weights(xp) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    n, t, e, heads = 2, 5, 8, 2
    x = np.random.default_rng(2).normal(size=(n, t, e))
    layer = MultiHeadAttention(heads, seed=5)
    ph = ex.placeholder(x.shape, "float64", name="x")
    out, scores = layer(ph, causal=True, return_attention_scores=True)
    graph = nnlayers.compile([out, scores], wrt=[])
    got_out, got = (graph.xp.to_numpy(v) for v in graph.forward({ph: x}))
    theirs = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=torch.float64)
    _copy_mha(layer, theirs)
    upper = torch.tensor(np.triu(np.ones((t, t), bool), 1))
    want_out, want = theirs(*(torch.tensor(x),) * 3, attn_mask=upper, average_attn_weights=False)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_out, want_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert scores.shape == (n, heads, t, t)


ENCODERS = [("relu", False), ("gelu", True), ("gelu_tanh", False), ("gelu_exact", False)]


@pytest.mark.parametrize(("activation", "norm_first"), ENCODERS)
def test_encoder_layer_equals_pytorch(activation, norm_first, dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    n, t, d, heads, ff = 3, 6, 8, 2, 16
    x = np.random.default_rng(3).normal(size=(n, t, d))
    ours_kw, theirs_kw = _masks("key_padding", n, t, t)

    def build(phs):
        layer = TransformerEncoderLayer(
            heads, ff, dropout=0.0, activation=activation, norm_first=norm_first, seed=6
        )
        return layer, layer(phs["x"], **ours_kw)

    layer, value, named, weights = _run(build, {"x": x}, dtype)
    # "gelu" (and its old alias "gelu_exact") is PyTorch's "gelu", exact; "gelu_tanh" the tanh form
    act = {
        "relu": "relu",
        "gelu": "gelu",
        "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
        "gelu_exact": "gelu",
    }[activation]
    theirs = torch.nn.TransformerEncoderLayer(
        d,
        heads,
        ff,
        dropout=0.0,
        activation=act,
        batch_first=True,
        norm_first=norm_first,
        dtype=_torch_dtype(dtype),
    )
    pairs = _copy_block(layer, theirs)
    xt = torch.tensor(x, dtype=_torch_dtype(dtype), requires_grad=True)
    want = _torch_grads(
        theirs,
        {"x": xt},
        lambda m, ts: m(ts["x"], src_key_padding_mask=theirs_kw["key_padding_mask"]),
        weights,
    )
    _assert_close(value, want, dtype, "output")
    _assert_close(named["x"], xt.grad.double().numpy(), dtype, "gradient of x")
    _compare_params(named, pairs, dtype)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_pytorch(norm_first, dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    n, t, s, d, heads, ff = 2, 5, 4, 8, 2, 12
    rng = np.random.default_rng(4)
    arrays = {"x": rng.normal(size=(n, t, d)), "memory": rng.normal(size=(n, s, d))}
    pad = np.zeros((n, s), bool)
    pad[1, -2:] = True

    def build(phs):
        layer = TransformerDecoderLayer(heads, ff, dropout=0.0, norm_first=norm_first, seed=7)
        out = layer(phs["x"], phs["memory"], causal=True, memory_key_padding_mask=ex.constant(pad))
        return layer, out

    layer, value, named, weights = _run(build, arrays, dtype)
    theirs = torch.nn.TransformerDecoderLayer(
        d, heads, ff, dropout=0.0, batch_first=True, norm_first=norm_first,
        dtype=_torch_dtype(dtype),
    )  # fmt: skip
    pairs = _copy_block(layer, theirs)
    ts = {
        k: torch.tensor(v, dtype=_torch_dtype(dtype), requires_grad=True) for k, v in arrays.items()
    }
    upper = torch.tensor(np.triu(np.ones((t, t), bool), 1))
    want = _torch_grads(
        theirs,
        ts,
        lambda m, a: m(
            a["x"], a["memory"], tgt_mask=upper, tgt_is_causal=True,
            memory_key_padding_mask=torch.tensor(pad),
        ),
        weights,
    )  # fmt: skip
    _assert_close(value, want, dtype, "output")
    for k in arrays:
        _assert_close(named[k], ts[k].grad.double().numpy(), dtype, f"gradient of {k}")
    _compare_params(named, pairs, dtype)


def _copy_block(ours, theirs) -> dict[str, tuple]:
    """Copy a transformer layer's weights into PyTorch's; our name -> (tensor, transpose)."""
    pairs: dict[str, tuple] = {}
    subs = {layer.name.rsplit("/", 1)[1]: layer for layer in ours.sublayers()}
    for key in ("self_attn", "cross_attn"):
        if key in subs:
            target = theirs.multihead_attn if key == "cross_attn" else theirs.self_attn
            pairs.update(_copy_mha(subs[key], target))
    for key in ("linear1", "linear2"):
        lin = getattr(theirs, key)
        w, b = subs[key].params
        _set(lin.weight, w.numpy().T)
        _set(lin.bias, b.numpy())
        pairs[w.name], pairs[b.name] = (lin.weight, True), (lin.bias, False)
    for key in ("norm1", "norm2", "norm3"):
        if key in subs:
            norm = getattr(theirs, key)
            g, b = subs[key].params
            _set(norm.weight, g.numpy())
            _set(norm.bias, b.numpy())
            pairs[g.name], pairs[b.name] = (norm.weight, False), (norm.bias, False)
    return pairs


class _Called:
    """``layer`` called with fixed keyword arguments (for the layer gradient check)."""

    def __init__(self, layer, **kwargs) -> None:
        self.layer, self.kwargs = layer, kwargs

    @property
    def params(self):
        return self.layer.params

    def __call__(self, x):
        return self.layer(x, **self.kwargs)


def test_gradients_match_central_differences(gradcheck) -> None:
    x = np.random.default_rng(5).normal(size=(2, 3, 4))
    gradcheck(_Called(MultiHeadAttention(2, seed=0), causal=True), x)
    # a smooth activation: central differences across a ReLU kink are no reference
    block = TransformerEncoderLayer(2, 6, dropout=0.0, activation="gelu", norm_first=True, seed=1)
    gradcheck(_Called(block, causal=True), x)


def test_attention_dropout_train_and_eval(gradcheck, xp) -> None:
    x = np.random.default_rng(6).normal(size=(2, 3, 4))
    gradcheck(MultiHeadAttention(2, dropout=0.5, seed=0), x, reseed=True)
    ph = ex.placeholder((4, 16, 8), "float64", name="x")
    layer = MultiHeadAttention(2, dropout=0.5, seed=0)
    plain = MultiHeadAttention(2, seed=0)
    out = layer(ph)
    graph = nnlayers.compile([out, plain(ph)], wrt=[], seed=1)
    for mine, other in zip(layer.params, plain.params, strict=True):
        other.assign(mine.numpy())
    value = np.random.default_rng(7).normal(size=(4, 16, 8))
    dropped, undropped = (graph.xp.to_numpy(v) for v in graph.forward({ph: value}))
    assert not np.allclose(dropped, undropped)
    graph.eval()
    same, reference = (graph.xp.to_numpy(v) for v in graph.forward({ph: value}))
    np.testing.assert_allclose(same, reference, rtol=1e-12)


def test_sdpa_dropout_keeps_the_mean(xp) -> None:
    q = ex.placeholder((1, 4, 8), "float64", name="q")
    v = ex.placeholder((1, 64, 8), "float64", name="v")
    k = ex.placeholder((1, 64, 8), "float64", name="k")
    out = ex.scaled_dot_product_attention(q, k, v, dropout=0.25)
    graph = nnlayers.compile(out, wrt=[], seed=2)
    rng = np.random.default_rng(8)
    feeds = {q: rng.normal(size=(1, 4, 8)), k: np.zeros((1, 64, 8)), v: np.ones((1, 64, 8))}
    runs = np.stack([graph.xp.to_numpy(graph.forward(feeds)) for _ in range(200)])
    # uniform weights 1/64 over ones: each run is (kept count) / (64 * 0.75)
    assert abs(runs.mean() - 1.0) < 0.02
    assert runs.std() > 0.05
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\)"):
        ex.scaled_dot_product_attention(q, k, v, dropout=1.0)


def test_positional_encodings() -> None:
    table = sinusoidal_table(50, 6)
    pos, i = 17, 2
    assert table[pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 6)))
    assert table[pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 6)))
    assert sinusoidal_table(3, 5).shape == (3, 5)  # odd widths end with a sine column

    x = ex.placeholder((2, 7, 6), "float64", name="x")
    learnt = PositionalEmbedding(10, seed=0)
    fixed = SinusoidalPositionalEncoding()
    y = learnt(x)
    graph = nnlayers.compile([ex.sum(y * y), fixed(x)], wrt=learnt.params)
    value = np.random.default_rng(9).normal(size=(2, 7, 6))
    _, enc = graph.forward({x: value})
    np.testing.assert_allclose(graph.xp.to_numpy(enc), value + table[:7, :], rtol=1e-12)
    (grad,) = graph.backward().values()
    grad = graph.xp.to_numpy(grad)
    expected = 2 * (value + learnt.weight.numpy()[:7]).sum(axis=0)
    np.testing.assert_allclose(grad[:7], expected, rtol=1e-12)
    assert not grad[7:].any()  # positions beyond the sequence get no gradient


def test_errors_name_the_layer_and_shapes() -> None:
    x = ex.placeholder((None, 5, 10), name="x")
    with pytest.raises(ValueError, match="10 units do not split into 3 heads"):
        MultiHeadAttention(3)(x)
    with pytest.raises(ValueError, match=r"needs \(N, T, E\) sequences, got query of shape"):
        MultiHeadAttention(2)(ex.placeholder((None, 10)))
    with pytest.raises(ValueError, match="num_heads must be positive"):
        MultiHeadAttention(0)
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(N, Tk\)"):
        MultiHeadAttention(2)(x, key_padding_mask=ex.constant(np.zeros((5,), bool)))
    with pytest.raises(TypeError, match="attn_mask must be boolean or of the query's dtype"):
        MultiHeadAttention(2)(x, attn_mask=ex.constant(np.zeros((5, 5), np.int64)))
    with pytest.raises(ValueError, match="longer than max_length=4"):
        PositionalEmbedding(4)(x)
    with pytest.raises(ValueError, match=r"TransformerEncoderLayer 'enc': needs \(N, T, d\)"):
        TransformerEncoderLayer(2, 8, name="enc")(ex.placeholder((None, 10)))
    with pytest.raises(ValueError, match="dim_feedforward must be positive"):
        TransformerEncoderLayer(2, 0)
    with pytest.raises(ValueError, match="needs an activation"):
        TransformerDecoderLayer(2, 8, activation=None)  # type: ignore[arg-type]


def test_a_transformer_language_model_trains(xp) -> None:
    from nnlayers.layers import Affine, Embedding, LayerNorm
    from nnlayers.models import Model
    from nnlayers.optim import Adam

    vocab, t = 11, 8
    ids = ex.placeholder((None, t), "int64", name="ids")
    nxt = ex.placeholder((None, t), "int64", name="next")
    h = SinusoidalPositionalEncoding()(Embedding(vocab, 16, seed=0)(ids))
    h = TransformerEncoderLayer(2, 32, dropout=0.0, norm_first=True, seed=1)(h, causal=True)
    logits = Affine(vocab, seed=2)(LayerNorm()(h))
    loss = ex.softmax_cross_entropy(ex.reshape(logits, (-1, vocab)), ex.reshape(nxt, (-1,)))
    model = Model(loss, inputs=[ids, nxt], optimizer=Adam(0.01))
    # a counting sequence: the next token is the current one plus one (mod vocab)
    start = np.random.default_rng(10).integers(0, vocab, 32)
    seq = (start[:, None] + np.arange(t + 1)) % vocab
    batch = (seq[:, :-1], seq[:, 1:])
    first = float(model.train_step(batch)[0])
    for _ in range(60):
        last = float(model.train_step(batch)[0])
    assert last < 0.2 * first


def test_encoder_stack_equals_pytorch(dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    from nnlayers.layers import LayerNorm, TransformerEncoder

    n, t, d, heads, ff = 2, 5, 8, 2, 12
    x = np.random.default_rng(12).normal(size=(n, t, d))

    def build(phs):
        block = TransformerEncoderLayer(heads, ff, dropout=0.0, norm_first=True, seed=8)
        stack = TransformerEncoder(block, 2, norm=LayerNorm())
        return stack, stack(phs["x"], causal=True)

    stack, value, named, weights = _run(build, {"x": x}, dtype)
    tdt = _torch_dtype(dtype)
    layer = torch.nn.TransformerEncoderLayer(
        d, heads, ff, dropout=0.0, batch_first=True, norm_first=True, dtype=tdt
    )
    theirs = torch.nn.TransformerEncoder(
        layer, 2, norm=torch.nn.LayerNorm(d, dtype=tdt), enable_nested_tensor=False
    )
    pairs = {}
    for i in range(2):
        pairs.update(_copy_block(getattr(stack, f"layers_{i}"), theirs.layers[i]))
    gamma, beta = stack.norm_layer.params
    _set(theirs.norm.weight, gamma.numpy())
    _set(theirs.norm.bias, beta.numpy())
    pairs[gamma.name], pairs[beta.name] = (theirs.norm.weight, False), (theirs.norm.bias, False)
    xt = torch.tensor(x, dtype=tdt, requires_grad=True)
    upper = torch.tensor(np.triu(np.ones((t, t), bool), 1))
    want = _torch_grads(theirs, {"x": xt}, lambda m, ts: m(ts["x"], mask=upper), weights)
    _assert_close(value, want, dtype, "output")
    _assert_close(named["x"], xt.grad.double().numpy(), dtype, "gradient of x")
    _compare_params(named, pairs, dtype)
    assert len(stack.params) == 2 * len(stack.layers_0.params) + 2
    with pytest.raises(ValueError, match="was already applied"):
        TransformerEncoder(stack.layers_0, 2)
