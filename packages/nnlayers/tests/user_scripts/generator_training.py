"""A PyTorch user trains from a generator of batches (a ``DataLoader`` habit). One pass over a
generator is fine; for several epochs ``fit`` says to use a ``StreamFeed`` of a function that
makes a fresh generator each epoch, and the script does that.

Run as a script: ``ARRAYCORE_BACKEND=opencl python generator_training.py``.
"""

import numpy as np

import nnlayers
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import Adam

TRUE_W = np.array([[2.0], [-1.0], [0.5]], dtype="float32")


def batches(count=16, size=32, seed=0):
    """Fresh examples each time: the data comes from somewhere too big to hold."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        x = rng.normal(size=(size, 3)).astype("float32")
        y = x @ TRUE_W + 0.01 * rng.normal(size=(size, 1)).astype("float32")
        yield x, y


net = Sequential([Affine(16, activation="tanh"), Affine(1)], seed=0)
model = nnlayers.Regressor(net, (3,), optimizer=Adam(1e-2))
x_test, y_test = next(batches(1, 256, seed=99))
untrained = model.evaluate(x_test, y_test)["loss"]

nnlayers.fit(model, batches(), epochs=1, progress=False)  # one pass over a generator: fine
one_pass = model.evaluate(x_test, y_test)["loss"]

try:
    nnlayers.fit(model, batches(), epochs=4, progress=False)  # a generator is used up
except TypeError as exc:
    message = str(exc)
    print("fit says:", message.splitlines()[0][:200])
    assert "StreamFeed" in message, message
else:
    raise AssertionError("fit trained several epochs on a one-shot generator")

# what the message says: a StreamFeed of a function that returns a fresh iterable per epoch
stream = nnlayers.StreamFeed(batches, batch_size=32)  # batches() is called once per epoch
history = nnlayers.fit(model, stream, epochs=4, progress=False)
trained = model.evaluate(x_test, y_test)["loss"]
print(f"held-out loss: untrained {untrained:.3f}, one pass {one_pass:.3f}, then {trained:.4f}")
# the refused call trained nothing; this one trained 4 more epochs: 2 to 5
assert len(history["loss"]) == 5 and model.epoch == 5, (history["loss"], model.epoch)
assert trained < one_pass < untrained
assert trained < 0.1 * untrained
