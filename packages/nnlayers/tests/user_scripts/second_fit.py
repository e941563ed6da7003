"""A PyTorch user calls ``fit`` again to train some more, as one runs the training loop a
second time: the second call trains that many more epochs, from where the first one stopped.

Run as a script: ``ARRAYCORE_BACKEND=opencl python second_fit.py``.
"""

import numpy as np

import nnlayers
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import SGD

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 2)).astype("float32")
y = (x[:, 0] * x[:, 1] > 0).astype("int64")  # XOR of the signs: needs the hidden layer
feed = nnlayers.Feed(x, y, batch_size=32, shuffle=True)

net = Sequential([Affine(32, activation="tanh"), Affine(2)], seed=0)
model = nnlayers.Classifier(net, (2,), optimizer=SGD(0.3, momentum=0.9))

first = nnlayers.fit(model, feed, epochs=3, progress=False)
after_first = model.evaluate(x, y)
weights = {name: value.copy() for name, value in model.state_dict().items()}

second = nnlayers.fit(model, feed, epochs=3, progress=False)  # three more
after_second = model.evaluate(x, y)
print(
    f"after epoch 3: loss {after_first['loss']:.3f}, accuracy {after_first['accuracy']:.2f}; "
    f"after epoch 6: loss {after_second['loss']:.3f}, accuracy {after_second['accuracy']:.2f}"
)
# fit returns the model's History, one record per epoch of the whole run (Keras returns a
# new one per call): after the second call it holds all six epochs
assert second is model.history and len(model.history["loss"]) == 6, model.history
assert model.epoch == 6, model.epoch
assert any(not np.array_equal(weights[k], v) for k, v in model.state_dict().items())
assert after_second["loss"] < after_first["loss"], (after_first, after_second)
assert second["loss"][-1] < second["loss"][2]  # epoch 6 below epoch 3
assert after_second["accuracy"] > 0.85, after_second  # chance: 0.5
