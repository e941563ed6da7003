"""End to end: a few SGD steps on small models reduce the loss, partial batches included."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter


def sgd(graph, params, feeds, rate):
    xp = graph.xp
    loss = float(xp.to_numpy(graph.forward(feeds)))
    graph.backward()
    for p in params:
        xp.inplace.subtract(p.value, xp.multiply(p.grad, rate), out=p.value)
    return loss


def test_mlp_learns_two_blobs_with_a_partial_last_batch() -> None:
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.normal(-1, 0.5, (50, 2)), rng.normal(1, 0.5, (50, 2))])
    targets = np.repeat([0, 1], 50)
    x = ex.placeholder((None, 2), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    params = [
        Parameter(rng.normal(0, 0.5, (2, 16)), name="W1"),
        Parameter(np.zeros(16), name="b1"),
        Parameter(rng.normal(0, 0.5, (16, 2)), name="W2"),
        Parameter(np.zeros(2), name="b2"),
    ]
    W1, b1, W2, b2 = params
    logits = ex.dropout(ex.tanh(x @ W1 + b1), 0.1) @ W2 + b2
    graph = nnlayers.compile(ex.softmax_cross_entropy(logits, y))
    losses = []
    for _ in range(30):
        order = rng.permutation(100)
        epoch = [
            sgd(graph, params, {x: data[order[i : i + 32]], y: targets[order[i : i + 32]]}, 0.5)
            for i in range(0, 100, 32)  # 32, 32, 32, 4
        ]
        losses.append(np.mean(epoch))
    assert losses[-1] < 0.25 * losses[0]
    graph.eval()
    accuracy = nnlayers.compile(
        ex.mean(ex.astype(ex.equal(ex.argmax(logits, 1), y), "float32")), wrt=[]
    )
    accuracy.eval()
    assert float(accuracy.xp.to_numpy(accuracy.forward({x: data, y: targets}))) > 0.95


def test_small_convnet_trains_with_batch_norm_pooling_and_dropout() -> None:
    rng = np.random.default_rng(1)
    images = rng.normal(size=(12, 1, 6, 6))
    labels = (images[:, 0, :3].mean(axis=(1, 2)) > images[:, 0, 3:].mean(axis=(1, 2))).astype(
        np.int64
    )
    x = ex.placeholder((None, 1, 6, 6), name="images")
    y = ex.placeholder((None,), "int64", name="labels")
    kernel = Parameter(rng.normal(0, 0.5, (4, 1, 3, 3)), name="kernel")
    gamma, beta = Parameter(np.ones(4), name="gamma"), Parameter(np.zeros(4), name="beta")
    mean = Parameter(np.zeros(4), name="mean", trainable=False)
    var = Parameter(np.ones(4), name="var", trainable=False)
    dense = Parameter(rng.normal(0, 0.3, (36, 2)), name="dense")
    h = ex.relu(ex.batch_norm(ex.conv2d(x, kernel, padding="same"), gamma, beta, mean, var))
    h = ex.dropout(ex.max_pool2d(h, 2), 0.1, spatial=True)
    loss = ex.softmax_cross_entropy(ex.flatten(h) @ dense, y)
    graph = nnlayers.compile(loss)
    params = [kernel, gamma, beta, dense]
    first = sgd(graph, params, {x: images, y: labels}, 0.1)
    for _ in range(40):
        last = sgd(graph, params, {x: images[:7], y: labels[:7]}, 0.1)
        last = sgd(graph, params, {x: images[7:], y: labels[7:]}, 0.1)
    assert last < first
    assert not np.allclose(graph.xp.to_numpy(mean.value), 0.0)  # running statistics moved
    graph.eval()
    assert np.isfinite(float(graph.xp.to_numpy(graph.forward({x: images, y: labels}))))
