"""A PyTorch user's residual block: the parts made in ``__init__`` as attributes, called in
``forward``, the block used twice in a network and trained.

Run as a script: ``ARRAYCORE_BACKEND=opencl python residual_block.py``.
"""

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, BatchNorm, Conv2D, GlobalAvgPool2D, Layer, Sequential
from nnlayers.optim import Adam


class ResBlock(Layer):
    def __init__(self, channels, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.conv1 = Conv2D(channels, 3, padding="same", use_bias=False)
        self.bn1 = BatchNorm()
        self.conv2 = Conv2D(channels, 3, padding="same", use_bias=False)
        self.bn2 = BatchNorm()

    def forward(self, x):
        h = ex.relu(self.bn1(self.conv1(x)))
        return ex.relu(x + self.bn2(self.conv2(h)))


# 8x8 images: the class is the quadrant holding a bright 3x3 patch
rng = np.random.default_rng(0)
n = 256
labels = rng.integers(0, 4, n)
images = rng.normal(0, 0.3, size=(n, 1, 8, 8)).astype("float32")
for i, c in enumerate(labels):
    r, q = 4 * (c // 2) + rng.integers(0, 2), 4 * (c % 2) + rng.integers(0, 2)
    images[i, 0, r : r + 3, q : q + 3] += 1.5

first = ResBlock(8)
net = Sequential(
    [Conv2D(8, 3, padding="same"), "relu", first, ResBlock(8), GlobalAvgPool2D(), Affine(4)],
    seed=0,
)
model = nnlayers.Classifier(net, (1, 8, 8), optimizer=Adam(1e-2))

names = list(model.state_dict())
assert "res_block/conv1/weight" in names and "res_block_1/bn2/running_mean" in names, names
assert len(first.params) == 6 and len(first.buffers) == 4  # conv1, bn1 (2), conv2, bn2 (2)
table = nnlayers.summary(model)
assert [r.name for r in table.rows if r.name.startswith("res_block/")] == [
    "res_block/conv1",
    "res_block/bn1",
    "res_block/conv2",
    "res_block/bn2",
]

before = first.conv1.weight.numpy().copy()
untrained = model.evaluate(images, labels)
history = nnlayers.fit(
    model, nnlayers.Feed(images, labels, batch_size=32), epochs=4, progress=False
)
trained = model.evaluate(images, labels)
print(f"loss {untrained['loss']:.3f} -> {trained['loss']:.3f}, accuracy {trained['accuracy']:.2f}")
assert history["loss"][-1] < history["loss"][0]
assert trained["accuracy"] > 0.6, trained  # chance: 0.25
assert not np.allclose(first.conv1.weight.numpy(), before)  # the block's own weights trained
assert model.predict(images[:5]).shape == (5,)
