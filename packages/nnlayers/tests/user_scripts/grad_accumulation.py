"""A PyTorch user accumulates gradients over 4 micro-batches before each optimiser step
(``zero_grad``, then ``(loss / 4).backward()`` four times, then ``step``), and checks that the
sum is the gradient of the whole batch.

Run as a script: ``ARRAYCORE_BACKEND=opencl python grad_accumulation.py``.
"""

import numpy as np

import arraycore
import nnlayers
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import SGD

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 5)).astype("float32")
y = (x[:, 0] - x[:, 1] + 0.5 * x[:, 2] > 0).astype("int64")
net = Sequential([Affine(16, activation="tanh"), Affine(2)], seed=0)
model = nnlayers.Classifier(net, (5,))
model.optimizer = SGD(0.3)


def host(grads):
    return {p.name: arraycore.to_numpy(g).copy() for p, g in grads.items()}


# the gradient of the mean loss over all 64 examples, in one go
values, grads = model.loss_and_gradients(x, y)
full_loss, full = float(values[0]), host(grads)

# the same from 4 micro-batches of 16, each scaled by 1/4 and added up
model.zero_grad()
assert all(p.grad is None for p in model.params)
parts = []
for k in range(4):
    micro = slice(16 * k, 16 * (k + 1))
    parts.append(float(model.forward(x[micro], y[micro])[0]))
    model.backward(accumulate=True, scale=1 / 4)
accumulated = {p.name: arraycore.to_numpy(p.grad).copy() for p in model.params}
assert accumulated.keys() == full.keys()
for name in full:
    np.testing.assert_allclose(accumulated[name], full[name], rtol=1e-4, atol=1e-6, err_msg=name)
assert abs(np.mean(parts) - full_loss) < 1e-5
print(f"4 micro-batches: the gradients of the full batch (loss {full_loss:.4f})")

# without accumulate=True a backward replaces the gradients (unlike PyTorch): the last part's
model.forward(x[48:], y[48:])
last = host(model.backward())
assert not np.allclose(last["affine/weight"], full["affine/weight"])

# a training loop on accumulated gradients
before = model.evaluate(x, y)
for _ in range(25):
    model.zero_grad()
    for k in range(4):
        micro = slice(16 * k, 16 * (k + 1))
        model.forward(x[micro], y[micro])
        model.backward(accumulate=True, scale=1 / 4)
    model.optimizer.step()
after = model.evaluate(x, y)
print(f"loss {before['loss']:.3f} -> {after['loss']:.3f}, accuracy {after['accuracy']:.2f}")
assert after["loss"] < 0.5 * before["loss"], (before, after)
assert after["accuracy"] > 0.9, after
