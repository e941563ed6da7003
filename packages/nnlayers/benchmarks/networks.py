"""The networks of the realistic benchmark suite (``bench_networks.py``), each built twice from
the same weights: in nnlayers (layers and expression ops) and in idiomatic PyTorch (``nn``
modules, ``nn.LSTM``/``nn.GRU`` and ``nn.TransformerEncoderLayer``, whose fused kernels are what
a PyTorch user gets).

Every case is learnable (labels are a function of the inputs), so "the loss falls" is a real
check of a training step, and each case knows the floating-point work of its GEMMs
(convolutions counted as their im2col GEMMs), forward and backward, so that the report can put
the step against the machine's GEMM peak.

Weights are copied from nnlayers to torch by name (``Case.torch``); PyTorch's layouts differ in
two places: ``nn.Linear`` keeps ``(out, in)`` (nnlayers' ``(in, out)`` transposed) and the
recurrent layers keep ``weight_ih`` ``(gates * units, in)`` with a second bias that is set to zero
(nnlayers' GRU keeps its ``recurrent_bias``, which is PyTorch's ``bias_hh``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import nnlayers.expr as ex
from nnlayers.layers import (
    GRU,
    LSTM,
    Affine,
    BatchNorm,
    Conv2D,
    Embedding,
    Flatten,
    Pool2D,
    TransformerEncoderLayer,
)
from nnlayers.models import Model
from nnlayers.optim import SGD, Adam

LR, MOMENTUM = 0.01, 0.9
RNN_LR = 0.1  # the language models' mean token loss moves slowly at 0.01
ADAM_LR = 1e-3


@dataclass
class Case:
    """One network of the suite.

    ``build()`` returns the nnlayers model and its named layers; ``torch(layers, device)`` the
    PyTorch step built from those layers' weights (on ``device``, default the CPU); ``batches(count)`` fixed learnable batches;
    ``gemm_flops`` the multiply-adds (times two) of one training step's GEMMs.
    """

    key: str
    name: str
    build: Callable[[], tuple[Model, dict[str, Any]]]
    torch: Callable[..., Any]
    batches: Callable[[int], list[tuple[np.ndarray, np.ndarray]]]
    gemm_flops: float
    optimizer: str = "SGD(0.01, momentum=0.9)"


# -- data -----------------------------------------------------------------------------------------
def image_batches(batch: int, count: int, classes: int = 10) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random 3x32x32 images whose label is the argmax of a fixed random projection."""
    rng = np.random.default_rng(1)
    project = rng.standard_normal((3 * 32 * 32, classes)).astype(np.float32)
    out = []
    for _ in range(count):
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
        out.append((x, np.argmax(x.reshape(batch, -1) @ project, axis=1).astype(np.int64)))
    return out


def token_batches(
    batch: int, steps: int, vocabulary: int, count: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Token sequences of a fixed random bigram chain; the label of each token is the next one."""
    rng = np.random.default_rng(1)
    nxt = rng.integers(0, vocabulary, (vocabulary, 2))
    out = []
    for _ in range(count):
        seq = np.empty((batch, steps + 1), np.int64)
        seq[:, 0] = rng.integers(0, vocabulary, batch)
        for t in range(steps):
            seq[:, t + 1] = nxt[seq[:, t], rng.integers(0, 2, batch)]
        out.append((seq[:, :-1].copy(), seq[:, 1:].reshape(-1).copy()))
    return out


# -- shared helpers -------------------------------------------------------------------------------
def _value(layer: Any, name: str) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(layer._params[name].numpy()))


def conv_flops(batch: int, cin: int, cout: int, k: int, hout: int, wout: int) -> float:
    """Forward multiply-adds times two of one convolution as its im2col GEMM."""
    return 2.0 * batch * cout * cin * k * k * hout * wout


def step_flops(forward: float, first: float = 0.0) -> float:
    """Forward, input gradient and weight gradient: three times the forward GEMMs, less the input
    gradient of the first layer (``first``: its forward flops), which nobody computes."""
    return 3.0 * forward - first


class TorchStep:
    """A PyTorch module, its optimiser and ``step(x, labels) -> loss`` (a 0-d tensor)."""

    def __init__(
        self,
        net: Any,
        optimizer: str,
        lossfn: Callable[[Any, Any], Any],
        lr: float = LR,
        device: str = "cpu",
    ) -> None:
        import torch

        self.net = net.to(device)  # the optimiser is built on the moved parameters
        self.loss = lossfn
        params = list(net.parameters())
        if optimizer == "adam":
            self.opt = torch.optim.Adam(params, lr=ADAM_LR, betas=(0.9, 0.999), eps=1e-8)
        else:
            self.opt = torch.optim.SGD(params, lr=lr, momentum=MOMENTUM)

    def step(self, x: Any, labels: Any) -> Any:
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(self.net(x), labels)
        loss.backward()
        self.opt.step()
        return loss.detach()


def _set(param: Any, value: np.ndarray) -> None:
    import torch

    if tuple(param.shape) != value.shape:
        raise ValueError(f"weight copy: torch {tuple(param.shape)} vs nnlayers {value.shape}")
    with torch.no_grad():
        param.copy_(torch.from_numpy(np.ascontiguousarray(value)))


def _copy_conv_bn(conv_t: Any, bn_t: Any, conv: Any, bn: Any) -> None:
    _set(conv_t.weight, _value(conv, "weight"))
    _set(bn_t.weight, _value(bn, "gamma"))
    _set(bn_t.bias, _value(bn, "beta"))


def _copy_linear(lin_t: Any, aff: Any) -> None:
    _set(lin_t.weight, _value(aff, "weight").T)
    if lin_t.bias is not None:
        _set(lin_t.bias, _value(aff, "bias"))


def _classifier(out: ex.Expr, optimizer: Any, x: ex.Expr, y: ex.Expr) -> Model:
    return Model(ex.softmax_cross_entropy(out, y), inputs=[x, y], optimizer=optimizer)


# -- VGG-style CNN with BatchNorm -----------------------------------------------------------------
VGG_BATCH = 32
VGG_PLAN = [32, 32, "pool", 64, 64, "pool", 128, 128, "pool"]


def vgg_build() -> tuple[Model, dict[str, Any]]:
    x = ex.placeholder((None, 3, 32, 32), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    layers: dict[str, Any] = {}
    h = x
    for i, item in enumerate(VGG_PLAN):
        if item == "pool":
            h = Pool2D(2)(h)
            continue
        conv = layers[f"conv{i}"] = Conv2D(int(item), 3, padding="same", use_bias=False, seed=i)
        bn = layers[f"bn{i}"] = BatchNorm()
        h = ex.relu(bn(conv(h)))
    head = layers["head"] = Affine(10, seed=99)
    out = head(Flatten()(h))
    return _classifier(out, SGD(LR, momentum=MOMENTUM), x, y), layers


def vgg_torch(layers: dict[str, Any], device: str = "cpu") -> TorchStep:
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    modules: list[Any] = []
    cin = 3
    for i, item in enumerate(VGG_PLAN):
        if item == "pool":
            modules.append(nn.MaxPool2d(2))
            continue
        conv, bn = nn.Conv2d(cin, int(item), 3, padding=1, bias=False), nn.BatchNorm2d(int(item))
        _copy_conv_bn(conv, bn, layers[f"conv{i}"], layers[f"bn{i}"])
        modules += [conv, bn, nn.ReLU(inplace=True)]
        cin = int(item)
    head = nn.Linear(cin * 4 * 4, 10)
    _copy_linear(head, layers["head"])
    net = nn.Sequential(*modules, nn.Flatten(), head)
    return TorchStep(net, "sgd", F.cross_entropy, device=device)


def _vgg_flops() -> float:
    total, first, cin, side = 0.0, 0.0, 3, 32
    for item in VGG_PLAN:
        if item == "pool":
            side //= 2
            continue
        f = conv_flops(VGG_BATCH, cin, int(item), 3, side, side)
        first = first or f
        total += f
        cin = int(item)
    total += 2.0 * VGG_BATCH * cin * side * side * 10
    return step_flops(total, first)


# -- ResNet-style network (residual adds, a strided block with a projection) ----------------------
RES_BATCH = 32


def res_build() -> tuple[Model, dict[str, Any]]:
    x = ex.placeholder((None, 3, 32, 32), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    layers: dict[str, Any] = {}

    def conv_bn(name: str, h: ex.Expr, width: int, k: int = 3, stride: int = 1) -> ex.Expr:
        pad = "same" if stride == 1 else k // 2
        conv = Conv2D(width, k, stride=stride, padding=pad, use_bias=False, seed=len(layers))
        layers[f"{name}.conv"], layers[f"{name}.bn"] = conv, BatchNorm()
        return layers[f"{name}.bn"](conv(h))

    h = ex.relu(conv_bn("stem", x, 16))
    # basic block at 16 channels, 32x32
    r = ex.relu(conv_bn("b1a", h, 16))
    h = ex.relu(h + conv_bn("b1b", r, 16))
    # strided block to 32 channels, 16x16, with a 1x1 projection shortcut
    r = ex.relu(conv_bn("b2a", h, 32, stride=2))
    h = ex.relu(conv_bn("b2s", h, 32, k=1, stride=2) + conv_bn("b2b", r, 32))
    pooled = ex.mean(h, axis=(2, 3))
    head = layers["head"] = Affine(10, seed=99)
    return _classifier(head(pooled), SGD(LR, momentum=MOMENTUM), x, y), layers


def res_torch(layers: dict[str, Any], device: str = "cpu") -> TorchStep:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    def conv_bn(name: str, cin: int, cout: int, k: int = 3, stride: int = 1) -> Any:
        conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
        bn = nn.BatchNorm2d(cout)
        _copy_conv_bn(conv, bn, layers[f"{name}.conv"], layers[f"{name}.bn"])
        return nn.Sequential(conv, bn)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = conv_bn("stem", 3, 16)
            self.b1a, self.b1b = conv_bn("b1a", 16, 16), conv_bn("b1b", 16, 16)
            self.b2a, self.b2b = conv_bn("b2a", 16, 32, stride=2), conv_bn("b2b", 32, 32)
            self.b2s = conv_bn("b2s", 16, 32, k=1, stride=2)
            self.head = nn.Linear(32, 10)
            _copy_linear(self.head, layers["head"])

        def forward(self, x: Any) -> Any:
            h = F.relu(self.stem(x))
            h = F.relu(h + self.b1b(F.relu(self.b1a(h))))
            h = F.relu(self.b2s(h) + self.b2b(F.relu(self.b2a(h))))
            return self.head(torch.mean(h, dim=(2, 3)))

    return TorchStep(Net(), "sgd", F.cross_entropy, device=device)


def _res_flops() -> float:
    b = RES_BATCH
    stem = conv_flops(b, 3, 16, 3, 32, 32)
    block1 = 2 * conv_flops(b, 16, 16, 3, 32, 32)
    block2 = conv_flops(b, 16, 32, 3, 16, 16) + conv_flops(b, 32, 32, 3, 16, 16)
    block2 += conv_flops(b, 16, 32, 1, 16, 16)
    return step_flops(stem + block1 + block2 + 2.0 * b * 32 * 10, stem)


# -- recurrent language models --------------------------------------------------------------------
VOCAB, EMBED, HIDDEN, RNN_T, RNN_BATCH = 64, 64, 128, 32, 32


def _rnn_build(cell: type) -> tuple[Model, dict[str, Any]]:
    x = ex.placeholder((None, RNN_T), "int64", name="tokens")
    y = ex.placeholder((None,), "int64", name="next")
    emb = Embedding(VOCAB, EMBED, seed=1)
    rnn = cell(HIDDEN, return_sequences=True, seed=2)
    head = Affine(VOCAB, seed=3)
    logits = head(rnn(emb(x)))  # (N, T, VOCAB)
    flat = ex.reshape(logits, (-1, VOCAB))
    layers = {"emb": emb, "rnn": rnn, "head": head}
    return _classifier(flat, SGD(RNN_LR, momentum=MOMENTUM), x, y), layers


def _rnn_torch(layers: dict[str, Any], kind: str, device: str = "cpu") -> TorchStep:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMBED)
            self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(EMBED, HIDDEN, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)
            _set(self.emb.weight, _value(layers["emb"], "weight"))
            rnn = layers["rnn"]
            _set(self.rnn.weight_ih_l0, _value(rnn, "weight").T)
            _set(self.rnn.weight_hh_l0, _value(rnn, "recurrent_weight").T)
            _set(self.rnn.bias_ih_l0, _value(rnn, "bias"))
            hh = _value(rnn, "recurrent_bias") if kind == "gru" else None
            _set(self.rnn.bias_hh_l0, np.zeros_like(_value(rnn, "bias")) if hh is None else hh)
            if hh is None:  # nnlayers' LSTM has one bias: a second, learnt, would double its step
                self.rnn.bias_hh_l0.requires_grad_(False)
            _copy_linear(self.head, layers["head"])

        def forward(self, tokens: Any) -> Any:
            out, _ = self.rnn(self.emb(tokens))
            return torch.reshape(self.head(out), (-1, VOCAB))

    return TorchStep(Net(), "sgd", F.cross_entropy, lr=RNN_LR, device=device)


def _rnn_flops(gates: int) -> float:
    rows = RNN_BATCH * RNN_T
    proj = 2.0 * rows * EMBED * gates * HIDDEN  # input projection (its input is learnt too)
    recur = 2.0 * (rows - RNN_BATCH) * HIDDEN * gates * HIDDEN  # none at the first step
    head = 2.0 * rows * HIDDEN * VOCAB
    return step_flops(proj + recur + head)


# -- pre-norm transformer encoder block -----------------------------------------------------------
TF_BATCH, TF_T, TF_D, TF_HEADS, TF_VOCAB = 16, 64, 128, 4, 64


def tf_build() -> tuple[Model, dict[str, Any]]:
    """Embedding, one pre-norm :class:`TransformerEncoderLayer` (multi-head self-attention
    through the fused attention op, GELU MLP), a classifier per position."""
    x = ex.placeholder((None, TF_T), "int64", name="tokens")
    y = ex.placeholder((None,), "int64", name="next")
    layers: dict[str, Any] = {
        "emb": Embedding(TF_VOCAB, TF_D, seed=1),
        # the tanh form on both sides, as in the recorded runs ("gelu" is exact, x Phi(x))
        "block": TransformerEncoderLayer(
            TF_HEADS, 4 * TF_D, dropout=0.0, activation="gelu_tanh", norm_first=True, seed=2
        ),
        "head": Affine(TF_VOCAB, seed=6),
    }
    h = layers["block"](layers["emb"](x))
    logits = ex.reshape(layers["head"](h), (-1, TF_VOCAB))
    return _classifier(logits, Adam(ADAM_LR), x, y), layers


def tf_torch(layers: dict[str, Any], device: str = "cpu") -> TorchStep:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    def gelu_tanh(t: Any) -> Any:
        return F.gelu(t, approximate="tanh")

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(TF_VOCAB, TF_D)
            self.block = nn.TransformerEncoderLayer(
                TF_D,
                TF_HEADS,
                dim_feedforward=4 * TF_D,
                dropout=0.0,
                activation=gelu_tanh,
                batch_first=True,
                norm_first=True,
            )
            self.head = nn.Linear(TF_D, TF_VOCAB)
            b, ours = self.block, layers["block"]
            _set(self.emb.weight, _value(layers["emb"], "weight"))
            _set(b.self_attn.in_proj_weight, _value(ours.self_attn, "in_weight").T)
            _set(b.self_attn.in_proj_bias, _value(ours.self_attn, "in_bias"))
            _set(b.self_attn.out_proj.weight, _value(ours.self_attn, "out_weight").T)
            _set(b.self_attn.out_proj.bias, _value(ours.self_attn, "out_bias"))
            _copy_linear(b.linear1, ours.linear1)
            _copy_linear(b.linear2, ours.linear2)
            for norm_t, norm in ((b.norm1, ours.norm1), (b.norm2, ours.norm2)):
                _set(norm_t.weight, _value(norm, "gamma"))
                _set(norm_t.bias, _value(norm, "beta"))
            _copy_linear(self.head, layers["head"])

        def forward(self, tokens: Any) -> Any:
            return torch.reshape(self.head(self.block(self.emb(tokens))), (-1, TF_VOCAB))

    return TorchStep(Net(), "adam", F.cross_entropy, device=device)


def _tf_flops() -> float:
    rows, d = TF_BATCH * TF_T, TF_D
    linear = 2.0 * rows * d * (3 * d + d + 4 * d + 4 * d + TF_VOCAB / d * d)
    attention = 2.0 * 2 * TF_BATCH * TF_T * TF_T * d  # scores and context, all heads
    return step_flops(linear + attention)


# -- the suite ------------------------------------------------------------------------------------
CASES = [
    Case(
        "vgg",
        f"VGG-BN CNN (3x3 same convs 32-32-64-64-128-128, BatchNorm, max-pool), 32x32 RGB, "
        f"batch {VGG_BATCH}",
        vgg_build,
        vgg_torch,
        lambda n: image_batches(VGG_BATCH, n),
        _vgg_flops(),
    ),
    Case(
        "resnet",
        f"ResNet-style CNN (stem, two residual blocks, one strided with a 1x1 projection), "
        f"32x32 RGB, batch {RES_BATCH}",
        res_build,
        res_torch,
        lambda n: image_batches(RES_BATCH, n),
        _res_flops(),
    ),
    Case(
        "lstm",
        f"LSTM language model (embedding {EMBED}, hidden {HIDDEN}, vocabulary {VOCAB}), "
        f"T={RNN_T}, batch {RNN_BATCH}",
        lambda: _rnn_build(LSTM),
        lambda layers, device="cpu": _rnn_torch(layers, "lstm", device),
        lambda n: token_batches(RNN_BATCH, RNN_T, VOCAB, n),
        _rnn_flops(4),
        optimizer=f"SGD({RNN_LR}, momentum=0.9)",
    ),
    Case(
        "gru",
        f"GRU language model (embedding {EMBED}, hidden {HIDDEN}, vocabulary {VOCAB}), "
        f"T={RNN_T}, batch {RNN_BATCH}",
        lambda: _rnn_build(GRU),
        lambda layers, device="cpu": _rnn_torch(layers, "gru", device),
        lambda n: token_batches(RNN_BATCH, RNN_T, VOCAB, n),
        _rnn_flops(3),
        optimizer=f"SGD({RNN_LR}, momentum=0.9)",
    ),
    Case(
        "transformer",
        f"pre-norm TransformerEncoderLayer (d={TF_D}, {TF_HEADS} heads, GELU MLP {4 * TF_D}, "
        f"fused attention op), T={TF_T}, batch {TF_BATCH}",
        tf_build,
        tf_torch,
        lambda n: token_batches(TF_BATCH, TF_T, TF_VOCAB, n),
        _tf_flops(),
        optimizer="Adam(0.001)",
    ),
]
BY_KEY = {case.key: case for case in CASES}
