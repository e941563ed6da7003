"""ResidualBlock, GroupNorm and global pooling against PyTorch (torchvision's BasicBlock written
out, ``nn.GroupNorm``, ``AdaptiveAvgPool2d``): values and every gradient from the same weights,
central differences, errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import (
    Affine,
    GlobalAvgPool2D,
    GlobalMaxPool2D,
    GroupNorm,
    ResidualBlock,
    Sequential,
)
from nnlayers.testing.oracle import ORACLE_TOLERANCES


def _ours(layer, x: np.ndarray, dtype, training: bool = True):
    """Output and the gradients of ``sum(out * R)`` for ``x`` and each parameter (by name)."""
    ph = ex.placeholder(x.shape, dtype, name="x")
    out = layer(ph)
    weights = np.random.default_rng(5).uniform(0.5, 1.5, out.shape)
    loss = ex.sum(out * ex.constant(weights, dtype=dtype))
    graph = nnlayers.compile([loss, out], wrt=[ph, *layer.params], training=training)
    value = graph.xp.to_numpy(graph.forward({ph: x.astype(dtype)})[1]).astype(np.float64)
    grads = graph.backward()
    named = {p.name: np.asarray(graph.xp.to_numpy(p.grad), np.float64) for p in layer.params}
    named["x"] = np.asarray(graph.xp.to_numpy(grads[ph]), np.float64)
    return value, named, weights


def _theirs(module, x: np.ndarray, dtype, weights: np.ndarray):
    import torch

    t = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
    module = module.to(t)
    xt = torch.tensor(x, dtype=t, requires_grad=True)
    out = module(xt)
    (out * torch.tensor(weights, dtype=t)).sum().backward()
    return out.detach().double().numpy(), xt.grad.double().numpy()


def _close(got, want, dtype, what: str) -> None:
    tol = ORACLE_TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(got, want, rtol=tol.rtol * 10, atol=tol.atol * 10, err_msg=what)


def _set(tensor, value) -> None:
    import torch

    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.ascontiguousarray(value)))


@pytest.mark.parametrize(
    ("shape", "groups"),
    [((3, 8, 5, 4), 1), ((3, 8, 5, 4), 4), ((4, 6, 7), 2), ((4, 6, 7), 6), ((5, 6), 3)],
)
def test_group_norm_equals_pytorch(shape, groups, dtype) -> None:
    torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape) * 3 + 1
    layer = GroupNorm(groups)
    layer(ex.placeholder(shape, dtype))  # build, then give gamma and beta values
    gamma, beta = layer.params
    gamma.assign(rng.uniform(0.5, 1.5, shape[1]))
    beta.assign(rng.normal(size=shape[1]))
    value, named, weights = _ours(layer, x, dtype)
    theirs = torch.nn.GroupNorm(groups, shape[1]).double()
    _set(theirs.weight, gamma.numpy())
    _set(theirs.bias, beta.numpy())
    want, dx = _theirs(theirs, x, dtype, weights)
    _close(value, want, dtype, "output")
    _close(named["x"], dx, dtype, "gradient of x")
    _close(named[gamma.name], theirs.weight.grad.double().numpy(), dtype, "gradient of gamma")
    _close(named[beta.name], theirs.bias.grad.double().numpy(), dtype, "gradient of beta")


def _torch_block(ours: ResidualBlock, cin: int):
    """torchvision's BasicBlock written out, with our block's weights."""
    import torch
    from torch import nn

    parts = {layer.name.rsplit("/", 1)[1]: layer for layer in ours.sublayers()}

    def conv(key: str) -> nn.Conv2d:
        w = parts[key].weight.numpy()
        stride = ours.stride if key != "conv2" else 1
        c = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride, w.shape[2] // 2, bias=False)
        c = c.double()
        _set(c.weight, w)
        return c

    def norm(key: str) -> nn.Module:
        layer = parts[key]
        if ours.norm == "group":
            m: nn.Module = nn.GroupNorm(layer.num_groups, ours.filters)
        else:
            m = nn.BatchNorm2d(ours.filters)
        m = m.double()
        _set(m.weight, layer.params[0].numpy())
        _set(m.bias, layer.params[1].numpy())
        return m

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = conv("conv1"), norm("norm1")
            self.conv2, self.bn2 = conv("conv2"), norm("norm2")
            self.down = (
                nn.Sequential(conv("shortcut_conv"), norm("shortcut_norm"))
                if "shortcut_conv" in parts
                else None
            )

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return torch.relu(h + (x if self.down is None else self.down(x)))

    return Block(), parts


@pytest.mark.parametrize(
    ("cin", "filters", "stride", "norm"),
    [(4, 4, 1, "batch"), (4, 6, 2, "batch"), (4, 4, 2, "group"), (3, 4, 1, "group")],
)
def test_residual_block_equals_pytorch(cin, filters, stride, norm, dtype) -> None:
    pytest.importorskip("torch", reason="the PyTorch oracle needs torch")
    x = np.random.default_rng(1).normal(size=(2, cin, 6, 6))
    block = ResidualBlock(filters, stride=stride, norm=norm, groups=2, seed=3)
    value, named, weights = _ours(block, x, dtype)
    theirs, parts = _torch_block(block, cin)
    theirs.train()
    want, dx = _theirs(theirs, x, dtype, weights)
    _close(value, want, dtype, "output")
    _close(named["x"], dx, dtype, "gradient of x")
    torch_params = dict(theirs.named_parameters())
    mapping = {"conv1": "conv1", "norm1": "bn1", "conv2": "conv2", "norm2": "bn2"}
    mapping.update(shortcut_conv="down.0", shortcut_norm="down.1")
    for key, layer in parts.items():
        for p, suffix in zip(layer.params, ("weight", "bias"), strict=False):
            want_grad = torch_params[f"{mapping[key]}.{suffix}"].grad.double().numpy()
            _close(named[p.name], want_grad, dtype, f"gradient of {p.name}")
    assert ("shortcut_conv" in parts) == (stride != 1 or cin != filters)


def test_global_pooling_and_a_small_resnet_trains(xp) -> None:
    x = np.random.default_rng(2).normal(size=(2, 3, 4, 5))
    ph = ex.placeholder(x.shape, "float64", name="x")
    graph = nnlayers.compile([GlobalAvgPool2D()(ph), GlobalMaxPool2D(keepdims=True)(ph)], wrt=[])
    avg, top = (graph.xp.to_numpy(v) for v in graph.forward({ph: x}))
    np.testing.assert_allclose(avg, x.mean(axis=(2, 3)), rtol=1e-12)
    np.testing.assert_array_equal(top, x.max(axis=(2, 3), keepdims=True))

    from nnlayers.models import Model
    from nnlayers.optim import SGD

    rng = np.random.default_rng(3)
    images = rng.normal(size=(32, 3, 8, 8)).astype(np.float32)
    labels = (images[:, 0].mean(axis=(1, 2)) > 0).astype(np.int64)  # learnable from channel 0
    net = Sequential(
        [ResidualBlock(8), ResidualBlock(16, stride=2), GlobalAvgPool2D(), Affine(2)], seed=0
    )
    inp = ex.placeholder((None, 3, 8, 8), name="images")
    y = ex.placeholder((None,), "int64", name="labels")
    model = Model(ex.softmax_cross_entropy(net(inp), y), inputs=[inp, y], optimizer=SGD(0.05, 0.9))
    first = float(model.train_step((images, labels))[0])
    for _ in range(30):
        last = float(model.train_step((images, labels))[0])
    assert last < 0.5 * first


def test_gradients_match_central_differences(gradcheck) -> None:
    x = np.random.default_rng(4).normal(size=(2, 4, 3, 3))
    gradcheck(GroupNorm(2), x)
    gradcheck(ResidualBlock(4, norm="group", groups=2, seed=0), x)


def test_errors_name_the_layer() -> None:
    with pytest.raises(ValueError, match="GroupNorm 'gn': 6 channels do not split into 4 groups"):
        GroupNorm(4, name="gn")(ex.placeholder((None, 6, 3, 3)))
    with pytest.raises(ValueError, match="num_groups must be positive"):
        GroupNorm(0)
    with pytest.raises(ValueError, match="norm must be 'batch', 'group' or None"):
        ResidualBlock(8, norm="layer")
    with pytest.raises(ValueError, match=r"ResidualBlock 'rb': needs NCHW image inputs"):
        ResidualBlock(8, name="rb")(ex.placeholder((None, 8)))
    with pytest.raises(ValueError, match="needs NCHW image inputs"):
        GlobalAvgPool2D()(ex.placeholder((None, 8, 3)))
