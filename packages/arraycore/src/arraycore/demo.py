"""A one-minute tour of arraycore: train a two-layer network by hand on the active backend.

Run ``python -m arraycore.demo`` (``ARRAYCORE_BACKEND=tiny`` or any installed backend works the
same). Everything below goes through the namespace ``xp``; NumPy is used only to make the data.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import arraycore


def spirals(n_per_class: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved 2-D spirals, a classic non-linearly-separable toy set (host arrays)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


def main(argv: list[str] | None = None) -> float:
    """Train, print progress and the final accuracy; returns the accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    xp = arraycore.namespace()
    print(f"backend: {xp}")
    x_host, y_host = spirals(200, 3, args.seed)
    x = xp.asarray(x_host)
    y = xp.asarray(y_host)
    targets = xp.nn.one_hot(y, 3, dtype=xp.float32)
    rng = xp.random.default_rng(args.seed)
    w1 = rng.normal(0.0, 1.0, (2, args.hidden), dtype=xp.float32)
    b1 = xp.zeros((args.hidden,), dtype=xp.float32)
    w2 = rng.normal(0.0, 0.1, (args.hidden, 3), dtype=xp.float32)
    b2 = xp.zeros((3,), dtype=xp.float32)
    n = x.shape[0]
    lr = 0.5
    start = time.perf_counter()
    for step in range(args.steps + 1):
        h_pre = x @ w1 + b1
        h = xp.maximum(h_pre, 0.0)
        logits = h @ w2 + b2
        log_p = xp.nn.log_softmax(logits, axis=1)
        # softmax cross-entropy and its gradient, averaged over the batch
        d_logits = (xp.exp(log_p) - targets) / n
        d_h = (d_logits @ xp.matrix_transpose(w2)) * xp.astype(h_pre > 0.0, xp.float32)
        for param, grad in (
            (w2, xp.matrix_transpose(h) @ d_logits),
            (b2, xp.sum(d_logits, axis=0)),
            (w1, xp.matrix_transpose(x) @ d_h),
            (b1, xp.sum(d_h, axis=0)),
        ):
            xp.inplace.subtract(param, grad * lr, out=param)
        if step % (args.steps // 4) == 0:
            loss = -float(xp.to_numpy(xp.sum(log_p * targets))) / n
            print(f"step {step:5d}  loss {loss:.4f}")
    predicted = xp.argmax(logits, axis=1)
    accuracy = float(xp.to_numpy(xp.mean(xp.astype(predicted == y, xp.float32))))
    seconds = time.perf_counter() - start
    print(f"training accuracy {accuracy:.1%} in {seconds:.1f} s on {xp.name}")
    return accuracy


if __name__ == "__main__":
    main()
