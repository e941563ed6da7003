"""Capture-ready training steps: after warm-up, a step of every benchmark network makes no host
transfer and no synchronisation, and two consecutive steps make the same backend calls with the
same shapes, dtypes and non-array arguments (what a CUDA graph captured once would replay).

Recorded on the backends that do not compute in host NumPy arrays: the tiny backend (only the
protocol's primitives) and OpenCL (its own kernels too: their launches, scalar arguments and host
copies are watched). The NumPy backend's steps pass Python floats on purpose (nothing is captured
on the host). A backend that is not installed or has no device here is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.testing.calls import CallRecorder, first_difference

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
BACKENDS = ["tiny", "opencl"]


def _benchmarks() -> tuple[Any, Any]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_training
        import networks
    finally:
        sys.path.remove(str(BENCHMARKS))
    return networks, bench_training


networks, bench_training = _benchmarks()


def _training_case(index: int) -> Any:
    """The model and batches of ``bench_training``'s case ``index`` (big MLP, LeNet, small MLP)."""
    case = [
        bench_training.Case("MLP 784-1024-1024-10, batch 128", "mlp", 128, [784, 1024, 1024, 10]),
        bench_training.Case("LeNet CNN, batch 64", "lenet", 64),
        bench_training.Case("MLP 64-64-10, batch 32", "mlp", 32, [64, 64, 10]),
    ][index]
    return lambda: bench_training.nnlayers_model(case), lambda n: bench_training.make_batches(
        case, n
    )


def _dropout_mlp() -> Any:
    """An MLP with dropout and an Adam whose rate follows a warm-up and a cosine: what the
    benchmark networks lack (random masks, a schedule) and a captured step must replay."""
    import nnlayers.expr as ex
    from nnlayers.layers import Affine, Dropout, Sequential
    from nnlayers.models import Model
    from nnlayers.optim import AdamW
    from nnlayers.optim.schedules import CosineDecay, Warmup

    net = Sequential([Affine(32, activation="relu"), Dropout(0.5), Affine(10)], seed=0)
    x = ex.placeholder((None, 20), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    schedule = Warmup(CosineDecay(1e-3, total_steps=50), warmup_steps=2)
    return Model(ex.softmax_cross_entropy(net(x), y), inputs=[x, y], optimizer=AdamW(schedule))


def _dropout_batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    return [
        (rng.standard_normal((16, 20), dtype=np.float32), rng.integers(0, 10, 16)) for _ in range(n)
    ]


CASES: dict[str, Any] = {
    "dropout-mlp": (_dropout_mlp, _dropout_batches),
    **{key: (lambda c=c: c.build()[0], c.batches) for key, c in networks.BY_KEY.items()},
    "big-mlp": _training_case(0),
    "lenet": _training_case(1),
    "small-mlp": _training_case(2),
}


@pytest.fixture(scope="module", params=BACKENDS)
def device_xp(request: Any) -> Any:
    name = request.param
    try:
        return arraycore.namespace(name)
    except arraycore.BackendError as exc:
        pytest.skip(f"backend {name!r} is not usable here: {exc}")


def _watch_opencl(recorder: CallRecorder, xp: Any) -> None:
    """What OpenCL's own kernels do outside the protocol's methods: launches with their scalar
    arguments, buffers uploaded from the host, host copies through the queue."""
    import pyopencl as cl

    rt = xp._backend.rt
    for name in ("launch", "launch_rows", "launch_tiles"):
        recorder.watch(rt, name, label=f"rt.{name}")
    recorder.watch(rt, "upload", "transfer", label="rt.upload")
    recorder.watch(
        rt, "meta", "transfer", label="rt.meta (new upload)", when=lambda v: v not in rt._meta
    )
    recorder.watch(
        cl,
        "enqueue_copy",
        "transfer",
        label="enqueue_copy (host)",
        when=lambda q, dst, src, **kw: isinstance(dst, np.ndarray) or isinstance(src, np.ndarray),
    )


@pytest.mark.parametrize("key", list(CASES))
def test_a_training_step_is_capture_ready(device_xp: Any, key: str) -> None:
    xp = device_xp
    build, make_batches = CASES[key]
    with arraycore.use(xp.name, device=xp.device.id):
        model = build()
        model.capture = False  # the eager step itself is what is recorded here
        host_batches = make_batches(4)
        for batch in host_batches:  # checked on the host, as fit does with a feed's arrays
            model.check_data(*batch)
        batches = [tuple(xp.asarray(a) for a in batch) for batch in host_batches]
        with CallRecorder(xp) as recorder, arraycore.checks(False):
            if xp.name == "opencl":
                _watch_opencl(recorder, xp)
            for batch in batches[:2]:  # warm-up: plans, optimiser state, kernels
                model.train_step(batch)
            steps = [recorder.record(lambda b=b: model.train_step(b)) for b in batches[2:]]
    first, second = steps
    assert first, "the recorder saw no backend call in a training step"
    assert not recorder.transfers(first), (
        f"{key} on {xp.name}: a step copies between host and device: {recorder.transfers(first)}"
    )
    assert not recorder.syncs(first), f"{key} on {xp.name}: a step waits for the device"
    difference = first_difference(first, second)
    assert difference is None, f"{key} on {xp.name}: two consecutive steps differ: {difference}"


def test_the_recorder_sees_what_it_must_refuse(device_xp: Any) -> None:
    """The check can fail: a host read, an upload and a scalar that changes are all caught."""
    xp = device_xp
    x = xp.ones((3, 4))
    xp.multiply(x, 0.5)  # warm-up: kernels built, shape metadata on the device
    with CallRecorder(xp) as recorder:
        if xp.name == "opencl":
            _watch_opencl(recorder, xp)
        read = recorder.record(lambda: xp.to_numpy(xp.sum(x)))
        upload = recorder.record(lambda: xp.add(x, xp.asarray(np.ones(4))))
        one = recorder.record(lambda: xp.multiply(x, 0.5))
        two = recorder.record(lambda: xp.multiply(x, 0.25))
        same = recorder.record(lambda: xp.multiply(x, 0.5))
    assert recorder.transfers(read) and recorder.transfers(upload)
    assert not recorder.transfers(one)
    assert first_difference(one, two) is not None
    assert first_difference(one, same) is None


def test_a_schedule_without_a_device_form_is_named(device_xp: Any) -> None:
    """A plain callable learning rate trains, but its steps copy a scalar from the host: the
    optimiser says so (``capture_blocker``) instead of leaving it to be found."""
    from nnlayers.optim import SGD
    from nnlayers.optim.schedules import CosineDecay

    xp = device_xp

    class P:
        def __init__(self) -> None:
            self.name = "w"
            self.value = xp.ones((2, 2))
            self.grad = xp.ones((2, 2))

    plain = SGD(lambda step: 0.1 / (1 + step), params=[P()])
    plain.step()
    assert plain.capture_blocker is not None and "callable" in plain.capture_blocker
    scheduled = SGD(CosineDecay(0.1, total_steps=10), params=[P()])
    scheduled.step()
    assert scheduled.capture_blocker is None


@pytest.mark.skipif(importlib.util.find_spec("arraycore_tiny") is None, reason="tiny not installed")
def test_the_host_backend_keeps_python_floats() -> None:
    """On the NumPy backend the optimiser's scalars stay Python floats (no 0-d array work)."""
    from nnlayers.optim import Adam

    xp = arraycore.namespace("numpy")

    class P:
        name = "w"
        value = xp.ones((2, 2))
        grad = xp.ones((2, 2))

    opt = Adam(0.1, params=[P()])
    opt.step()
    assert opt._device_scalars == {}
