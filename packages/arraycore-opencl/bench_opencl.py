"""Throughput of the OpenCL backend relative to the NumPy backend, measured in one run.

    POCL_CACHE_DIR=$PWD/.pocl-cache python packages/arraycore-opencl/bench_opencl.py

Times (median of repeated runs, NumPy and OpenCL called in turn so that drift on a shared
machine hits both alike, after warm-up so that kernel compilation is excluded):

- GEMM: ``a @ b`` of two 1024x1024 float32 matrices (CLBlast SGEMM vs NumPy's BLAS);
- element-wise: ``x * y + x`` over 4M float32 elements;
- a reduction: ``sum(x, axis=1)`` of a 2048x2048 float32 matrix;
- nnlayers training steps (forward, backward, SGD with momentum): an MLP 784-512-512-10 at
  batch 128 and a small CNN (conv 3x3x16, pool, conv 3x3x32, pool, affine 10) at batch 32 on
  8x8 images, each built once per backend from the same seed.

Prints a Markdown table (``--threads`` sets the BLAS threads of NumPy; PoCL uses every core).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import arraycore

Case = tuple[Callable[[], Any], Callable[[Any], Any]]


def _sync_for(xp: Any) -> Callable[[Any], Any]:
    if xp.name == "numpy":
        return lambda v: v
    queue = xp._backend.rt.queue
    return lambda v: queue.finish()


def _array_cases(xp: Any) -> dict[str, Case]:
    rng = np.random.default_rng(0)
    sync = _sync_for(xp)
    a = xp.asarray(rng.standard_normal((1024, 1024), dtype=np.float32))
    b = xp.asarray(rng.standard_normal((1024, 1024), dtype=np.float32))
    x = xp.asarray(rng.standard_normal(4 * 1024 * 1024, dtype=np.float32))
    y = xp.asarray(rng.standard_normal(4 * 1024 * 1024, dtype=np.float32))
    m = xp.reshape(x, (2048, 2048))
    return {
        "GEMM 1024x1024 float32": (lambda: xp.matmul(a, b), sync),
        "x * y + x, 4M float32": (lambda: x * y + x, sync),
        "sum(axis=1), 2048x2048 float32": (lambda: xp.sum(m, axis=1), sync),
    }


def _model(kind: str) -> Any:
    import nnlayers.expr as ex
    from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential
    from nnlayers.models import Model
    from nnlayers.optim import SGD

    if kind == "mlp":
        layers: list[Any] = [Affine(512, activation="relu"), Affine(512, activation="relu")]
        shape: tuple[int, ...] = (784,)
    else:
        layers = [
            Conv2D(16, 3, padding=1, activation="relu"),
            Pool2D(2),
            Conv2D(32, 3, padding=1, activation="relu"),
            Pool2D(2),
            Flatten(),
        ]
        shape = (1, 8, 8)
    net = Sequential([*layers, Affine(10)], seed=0)
    x = ex.placeholder((None, *shape), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    model = Model(ex.softmax_cross_entropy(net(x), y), inputs=[x, y], optimizer=SGD(0.01, 0.9))
    return model, shape


def _training_cases(xp: Any) -> dict[str, Case]:
    found = {}
    rng = np.random.default_rng(1)
    for kind, batch, label in (
        ("mlp", 128, "MLP 784-512-512-10 training step, batch 128"),
        ("cnn", 32, "CNN (2 conv + 2 pool + affine) training step, batch 32, 8x8"),
    ):
        with arraycore.use(xp.name):
            model, shape = _model(kind)
            data = (
                xp.asarray(rng.standard_normal((batch, *shape), dtype=np.float32)),
                xp.asarray(rng.integers(0, 10, batch, dtype=np.int64)),
            )
        found[label] = (
            lambda model=model, data=data: model.train_step(data)[0],
            lambda v: float(xp.to_numpy(v)),
        )
    return found


def _interleaved(cases: dict[str, Case], reps: int) -> dict[str, float]:
    """Median seconds per call of each backend, one call of each in turn (drift hits both)."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for fn, sync in cases.values():  # warm-up: compile kernels, fill the memory pool
        sync(fn())
        sync(fn())
    for _ in range(reps):
        for name, (fn, sync) in cases.items():
            start = time.perf_counter()
            sync(fn())
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    """Measure both backends and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None, help="NumPy BLAS threads")
    args = parser.parse_args(argv)
    if args.threads:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(args.threads)
        except ImportError:
            print("threadpoolctl is missing: --threads is ignored")
    per_backend = {
        name: {**_array_cases(xp), **_training_cases(xp)}
        for name, xp in ((n, arraycore.namespace(n)) for n in ("numpy", "opencl"))
    }
    results: dict[str, dict[str, float]] = {"numpy": {}, "opencl": {}}
    for case in per_backend["numpy"]:
        medians = _interleaved(
            {name: cases[case] for name, cases in per_backend.items()}, args.reps
        )
        for name, seconds in medians.items():
            results[name][case] = seconds
    dev = arraycore.namespace("opencl").device
    print(f"Measured {datetime.date.today()} on {platform.machine()}, {os.cpu_count()} cores;")
    print(f"OpenCL device: {dev.name}; NumPy {np.__version__}.\n")
    print("| workload | NumPy (ms) | OpenCL (ms) | OpenCL speed vs NumPy |")
    print("| --- | ---: | ---: | ---: |")
    for case, t_np in results["numpy"].items():
        t_cl = results["opencl"][case]
        print(f"| {case} | {t_np * 1e3:.2f} | {t_cl * 1e3:.2f} | {t_np / t_cl:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
