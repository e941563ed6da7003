"""Hand-written NumPy training steps: the baseline ``bench_training.py`` compares nnlayers with.

Written the way a careful NumPy programmer would write one network's step by hand: every
buffer allocated once per batch size and reused through ``out=``, in-place bias adds,
activations and momentum updates, the gradient of the input layer never computed, and the
convolutions as im2col (one copy out of a ``sliding_window_view``) plus one batched GEMM.

Parameters use nnlayers' layouts (affine weights ``(inputs, units)``, conv weights
``(O, C, KH, KW)``) so that both start from the same values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


class _SGD:
    """SGD with momentum (PyTorch's formulation): ``v = mu * v + g; w -= lr * v``."""

    def __init__(self, params: list[np.ndarray], lr: float, momentum: float) -> None:
        self.params = params
        self.lr, self.momentum = lr, momentum
        self.velocity = [np.zeros_like(p) for p in params]
        # one scratch buffer, as large as the largest parameter, shared by all of them
        scratch = np.empty(max(p.size for p in params), params[0].dtype)
        self.tmp = [scratch[: p.size].reshape(p.shape) for p in params]

    def update(self, grads: list[np.ndarray]) -> None:
        for w, g, v, t in zip(self.params, grads, self.velocity, self.tmp, strict=True):
            v *= self.momentum
            v += g
            np.multiply(v, self.lr, out=t)
            w -= t


def _softmax_xent(z: np.ndarray, labels: np.ndarray, rows: np.ndarray, s: np.ndarray) -> Any:
    """Mean cross-entropy of logits ``z`` (overwritten with ``dloss/dz``)."""
    n = z.shape[0]
    np.max(z, axis=1, keepdims=True, out=s)
    z -= s
    picked = z[rows, labels]
    np.exp(z, out=z)
    np.sum(z, axis=1, keepdims=True, out=s)
    loss = (np.log(s).sum() - picked.sum()) / n
    np.multiply(s, n, out=s)
    z /= s
    z[rows, labels] -= 1.0 / n
    return loss


class MLPStep:
    """An MLP with ReLU hidden layers, softmax cross-entropy and SGD with momentum."""

    def __init__(self, params: list[np.ndarray], lr: float = 0.01, momentum: float = 0.9) -> None:
        self.weights = [np.array(p) for p in params[0::2]]
        self.biases = [np.array(p) for p in params[1::2]]
        self.dweights = [np.empty_like(w) for w in self.weights]
        self.dbiases = [np.empty_like(b) for b in self.biases]
        params_ = [x for pair in zip(self.weights, self.biases, strict=True) for x in pair]
        self.opt = _SGD(params_, lr, momentum)
        self._batch = -1

    def _buffers(self, n: int) -> None:
        self._batch = n
        units = [w.shape[1] for w in self.weights]
        self.acts = [np.empty((n, u), np.float32) for u in units]
        self.dacts = [np.empty((n, u), np.float32) for u in units[:-1]]
        self.masks = [np.empty((n, u), bool) for u in units[:-1]]
        self.rows = np.arange(n)
        self.s = np.empty((n, 1), np.float32)

    def step(self, x: np.ndarray, labels: np.ndarray) -> Any:
        """Forward, backward and update for one batch; returns the loss."""
        if x.shape[0] != self._batch:
            self._buffers(x.shape[0])
        acts, ws, bs = self.acts, self.weights, self.biases
        last = len(ws) - 1
        h = x
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            np.matmul(h, w, out=acts[i])
            acts[i] += b
            if i < last:
                np.maximum(acts[i], 0.0, out=acts[i])
            h = acts[i]
        loss = _softmax_xent(acts[last], labels, self.rows, self.s)
        dz = acts[last]
        for i in range(last, -1, -1):
            below = x if i == 0 else acts[i - 1]
            np.matmul(below.T, dz, out=self.dweights[i])
            np.sum(dz, axis=0, out=self.dbiases[i])
            if i > 0:
                dh = self.dacts[i - 1]
                np.matmul(dz, ws[i].T, out=dh)
                np.greater(below, 0.0, out=self.masks[i - 1])
                np.multiply(dh, self.masks[i - 1], out=dh)
                dz = dh
        grads = [g for pair in zip(self.dweights, self.dbiases, strict=True) for g in pair]
        self.opt.update(grads)
        return loss


def _pool_forward(a: np.ndarray, out: np.ndarray) -> None:
    np.maximum(a[:, :, 0::2, 0::2], a[:, :, 0::2, 1::2], out=out)
    np.maximum(out, a[:, :, 1::2, 0::2], out=out)
    np.maximum(out, a[:, :, 1::2, 1::2], out=out)


def _pool_backward(dp: np.ndarray, a: np.ndarray, p: np.ndarray, da: np.ndarray, m: Any) -> None:
    # the gradient goes to the window's maxima (ties share it; after a ReLU the tied zeros get
    # none anyway)
    for i in (0, 1):
        for j in (0, 1):
            np.equal(a[:, :, i::2, j::2], p, out=m)
            np.multiply(dp, m, out=da[:, :, i::2, j::2])


class LeNetStep:
    """conv 5x5 (1->20), ReLU, max-pool 2, conv 5x5 (20->50), ReLU, max-pool 2, affine
    800->500, ReLU, affine 500->10; softmax cross-entropy; SGD with momentum."""

    def __init__(self, params: list[np.ndarray], lr: float = 0.01, momentum: float = 0.9) -> None:
        self.params = [np.array(p) for p in params]
        self.grads = [np.empty_like(p) for p in self.params]
        self.opt = _SGD(self.params, lr, momentum)
        self._batch = -1

    def _buffers(self, n: int) -> None:
        self._batch = n
        e = np.empty
        f = np.float32
        self.cols1 = e((n, 1, 5, 5, 24, 24), f)
        self.y1 = e((n, 20, 24, 24), f)
        self.p1 = e((n, 20, 12, 12), f)
        self.cols2 = e((n, 20, 5, 5, 8, 8), f)
        self.y2 = e((n, 50, 8, 8), f)
        self.p2 = e((n, 50, 4, 4), f)
        self.h3 = e((n, 500), f)
        self.z = e((n, 10), f)
        self.dh3 = e((n, 500), f)
        self.m3 = e((n, 500), bool)
        self.df = e((n, 800), f)
        self.dy2 = e((n, 50, 8, 8), f)
        self.m2 = e((n, 50, 4, 4), bool)
        self.m2r = e((n, 50, 8, 8), bool)
        self.dp1 = e((n, 20, 12, 12), f)
        self.dy1 = e((n, 20, 24, 24), f)
        self.m1 = e((n, 20, 12, 12), bool)
        self.m1r = e((n, 20, 24, 24), bool)
        self.rows = np.arange(n)
        self.s = e((n, 1), f)

    def step(self, x: np.ndarray, labels: np.ndarray) -> Any:
        """Forward, backward and update for one batch; returns the loss."""
        n = x.shape[0]
        if n != self._batch:
            self._buffers(n)
        w1, b1, w2, b2, w3, b3, w4, b4 = self.params
        dw1, db1, dw2, db2, dw3, db3, dw4, db4 = self.grads
        # conv1 + relu + pool
        win = sliding_window_view(x, (5, 5), axis=(2, 3)).transpose(0, 1, 4, 5, 2, 3)
        np.copyto(self.cols1, win)
        cols1 = self.cols1.reshape(n, 25, 576)
        y1 = self.y1.reshape(n, 20, 576)
        np.matmul(w1.reshape(20, 25), cols1, out=y1)
        y1 += b1[:, None]
        np.maximum(y1, 0.0, out=y1)
        _pool_forward(self.y1, self.p1)
        # conv2 + relu + pool
        win = sliding_window_view(self.p1, (5, 5), axis=(2, 3)).transpose(0, 1, 4, 5, 2, 3)
        np.copyto(self.cols2, win)
        cols2 = self.cols2.reshape(n, 500, 64)
        y2 = self.y2.reshape(n, 50, 64)
        np.matmul(w2.reshape(50, 500), cols2, out=y2)
        y2 += b2[:, None]
        np.maximum(y2, 0.0, out=y2)
        _pool_forward(self.y2, self.p2)
        # affine layers
        f = self.p2.reshape(n, 800)
        np.matmul(f, w3, out=self.h3)
        self.h3 += b3
        np.maximum(self.h3, 0.0, out=self.h3)
        np.matmul(self.h3, w4, out=self.z)
        self.z += b4
        loss = _softmax_xent(self.z, labels, self.rows, self.s)
        dz = self.z
        # backward through the affine layers
        np.matmul(self.h3.T, dz, out=dw4)
        np.sum(dz, axis=0, out=db4)
        np.matmul(dz, w4.T, out=self.dh3)
        np.greater(self.h3, 0.0, out=self.m3)
        np.multiply(self.dh3, self.m3, out=self.dh3)
        np.matmul(f.T, self.dh3, out=dw3)
        np.sum(self.dh3, axis=0, out=db3)
        np.matmul(self.dh3, w3.T, out=self.df)
        # pool2, relu2, conv2
        _pool_backward(self.df.reshape(n, 50, 4, 4), self.y2, self.p2, self.dy2, self.m2)
        np.greater(self.y2, 0.0, out=self.m2r)
        np.multiply(self.dy2, self.m2r, out=self.dy2)
        dy2 = self.dy2.reshape(n, 50, 64)
        dw2[...] = np.tensordot(dy2, cols2, axes=([0, 2], [0, 2])).reshape(dw2.shape)
        np.sum(dy2, axis=(0, 2), out=db2)
        # the columns are not needed any more: their buffer takes the column gradients
        np.matmul(w2.reshape(50, 500).T, dy2, out=cols2)
        dp1 = self.dp1
        dp1.fill(0.0)
        for i in range(5):
            for j in range(5):
                dp1[:, :, i : i + 8, j : j + 8] += self.cols2[:, :, i, j]
        # pool1, relu1, conv1 (no gradient for the images)
        _pool_backward(dp1, self.y1, self.p1, self.dy1, self.m1)
        np.greater(self.y1, 0.0, out=self.m1r)
        np.multiply(self.dy1, self.m1r, out=self.dy1)
        dy1 = self.dy1.reshape(n, 20, 576)
        dw1[...] = np.tensordot(dy1, cols1, axes=([0, 2], [0, 2])).reshape(dw1.shape)
        np.sum(dy1, axis=(0, 2), out=db1)
        self.opt.update(self.grads)
        return loss
