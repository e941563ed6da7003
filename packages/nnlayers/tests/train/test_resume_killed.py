"""The docs' first example (EarlyStopping + Checkpoint(resume=True)) killed with SIGKILL and
run again in a fresh process ends as the uninterrupted run does: same stopping epoch, same
history, same final (restored best) weights, bit for bit on NumPy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="load_digits needs scikit-learn")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")

# docs/training.md's first example, with Adam(1e-2) so that it stops early within 20 epochs
# (uninterrupted, on NumPy: best val_loss at epoch 7, stop after epoch 10), and a callback that
# kills the process: at step 3 of epoch WHEN (after the checkpoint of the epoch before), or,
# with WHEN=end, when training ends, before EarlyStopping puts the best weights back.
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    import numpy as np
    import nnlayers
    from nnlayers.datasets import load_digits, train_test_split
    from nnlayers.layers import Affine, BatchNorm, Conv2D, Dropout, Flatten, Pool2D, Sequential
    from nnlayers.optim import Adam
    from nnlayers.train import Callback, Checkpoint, EarlyStopping

    class Kill(Callback):
        def __init__(self, when):
            self.when = when

        def on_train_batch_end(self, step, logs):
            if self.when.isdigit() and logs.epoch == int(self.when) and step == 3:
                os.kill(os.getpid(), signal.SIGKILL)

        def on_train_end(self):
            if self.when == "end":
                os.kill(os.getpid(), signal.SIGKILL)

    path, out, when = sys.argv[1], sys.argv[2], sys.argv[3]
    images, labels = load_digits()
    train, test = train_test_split(images, labels, test_fraction=0.2)
    net = Sequential([
        Conv2D(32, 3, padding="same"), BatchNorm(), "relu", Pool2D(2),
        Flatten(), Dropout(0.25), Affine(10),
    ], seed=0)
    model = nnlayers.Classifier(net, input_shape=(1, 8, 8), optimizer=Adam(1e-2))
    stopping = EarlyStopping("val_loss", patience=3)
    history = nnlayers.fit(
        model, nnlayers.Feed(train.inputs, train.targets, batch_size=32), epochs=20,
        validation=(test.inputs, test.targets),
        callbacks=[Kill(when), stopping, Checkpoint(path, resume=True)], progress=False,
    )
    np.savez(out + ".npz", **model.state_dict())
    timing = ("time", "examples_per_second", "peak_device_mb")
    records = [{k: v for k, v in r.items() if k not in timing} for r in history]
    state = {k: getattr(stopping, k) for k in ("best", "best_epoch", "wait", "stopped_epoch")}
    with open(out + ".json", "w") as f:
        json.dump({"records": records, "stopping": state}, f)
    """
)


def _run(tmp_path, name, when, *, killed=False):
    env = {**os.environ, "ARRAYCORE_NUM_THREADS": "1", "PYTHONWARNINGS": "error::UserWarning"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / f"{name}.safetensors"),
         str(tmp_path / name), when],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if killed:
        assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
        return None
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / f"{name}.json") as f:
        result = json.load(f)
    with np.load(tmp_path / f"{name}.npz") as weights:
        result["weights"] = dict(weights)
    return result


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    # numba's batch-norm backward kernel compiled in this process and the same kernel loaded
    # from its disk cache differ in the last bit of dx (seen on an AMD EPYC, numba 0.68.1), so
    # the first process on a machine that finds no cached kernels rounds differently from every
    # later one. One short step first, so that both runs below load the same cached kernels.
    _run(tmp_path_factory.mktemp("warm"), "warm", "1", killed=True)
    return _run(tmp_path_factory.mktemp("straight"), "run", "never")


def _same_weights(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        if os.environ.get("ARRAYCORE_BACKEND", "numpy") == "numpy":
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        else:  # device kernels may differ in the last bit from one process to the next
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("when", ["after the best epoch", "end"])
def test_a_killed_run_resumes_as_if_never_interrupted(tmp_path, straight, when) -> None:
    records, stopping = straight["records"], straight["stopping"]
    # early, within 20 epochs, after patience=3 epochs without a better val_loss (on NumPy:
    # best 7, stop 10 on an Intel Xeon; best 5, stop 8 on an AMD EPYC: the CPUs round apart)
    assert 1 < stopping["best_epoch"] < stopping["stopped_epoch"] < 20
    assert stopping["stopped_epoch"] == stopping["best_epoch"] + 3
    assert [r["epoch"] for r in records] == list(range(1, stopping["stopped_epoch"] + 1))

    # killed during the epoch after the best (after the checkpoint of the best epoch),
    # or after the checkpoint of the last epoch, before the best weights are put back
    kill = str(stopping["best_epoch"] + 1) if when != "end" else "end"
    _run(tmp_path, "run", kill, killed=True)
    resumed = _run(tmp_path, "run", "never")
    assert resumed["stopping"] == straight["stopping"]
    if os.environ.get("ARRAYCORE_BACKEND", "numpy") == "numpy":
        assert resumed["records"] == records
    else:
        assert [r["epoch"] for r in resumed["records"]] == [r["epoch"] for r in records]
        for mine, theirs in zip(resumed["records"], records):
            assert mine == pytest.approx(theirs, rel=1e-5)
    _same_weights(resumed["weights"], straight["weights"])  # the best epoch's, put back
