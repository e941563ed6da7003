"""A PyTorch user trains a model, moves it to the GPU (``model.to("cuda")``; here OpenCL) and
goes on: the moved model predicts what it did before, trains on there, and comes back.

Run as a script: ``python move_to_opencl.py`` (needs an OpenCL device; started on OpenCL,
``ARRAYCORE_BACKEND=opencl``, the first move is nothing to do and the way back is the move).
"""

import numpy as np

import nnlayers
from nnlayers.layers import Affine, Dropout, LayerNorm, Sequential
from nnlayers.optim import Adam

rng = np.random.default_rng(0)
x = rng.normal(size=(384, 6)).astype("float32")
y = (np.sin(x[:, 0]) + x[:, 1] * x[:, 2] > 0).astype("int64")
train, test = slice(0, 256), slice(256, None)

net = Sequential(
    [
        Affine(32, activation="relu"),
        LayerNorm(),
        Dropout(0.1),
        Affine(32, activation="relu"),
        Affine(2),
    ],
    seed=0,
)
model = nnlayers.Classifier(net, (6,), optimizer=Adam(5e-3))
nnlayers.fit(model, nnlayers.Feed(x[train], y[train], batch_size=32), epochs=3, progress=False)
where = model.xp.name
probabilities = model.predict_proba(x[test])
scores = model.evaluate(x[test], y[test])

model.to("opencl")
assert model.xp.name == "opencl" and model.params[0].value is not None
moved = model.predict_proba(x[test])
np.testing.assert_allclose(moved, probabilities, rtol=1e-4, atol=1e-5)
moved_scores = model.evaluate(x[test], y[test])
assert abs(moved_scores["loss"] - scores["loss"]) < 1e-4, (scores, moved_scores)
print(f"trained on {where}, moved to opencl: same predictions (loss {moved_scores['loss']:.4f})")

# training goes on where the model now is, with Adam's moments moved along
history = nnlayers.fit(
    model, nnlayers.Feed(x[train], y[train], batch_size=32), epochs=5, progress=False
)
on_opencl = model.evaluate(x[test], y[test])
assert history["loss"][-1] < history["loss"][2], history["loss"]
assert on_opencl["accuracy"] > 0.7, on_opencl  # chance: about 0.5
state = model.state_dict()  # host copies, wherever the model is
there = model.predict_proba(x[test])

model.to("numpy")
assert model.xp.name == "numpy"
np.testing.assert_allclose(model.predict_proba(x[test]), there, rtol=1e-4, atol=1e-5)
for name, value in model.state_dict().items():
    np.testing.assert_allclose(value, state[name], rtol=1e-6, atol=1e-7, err_msg=name)
back = model.evaluate(x[test], y[test])
assert abs(back["loss"] - on_opencl["loss"]) < 1e-4, (on_opencl, back)
print(f"trained on opencl to accuracy {on_opencl['accuracy']:.2f}; back on numpy: the same")
