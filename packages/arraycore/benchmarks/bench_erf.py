"""arraycore's NumPy erf/erfc (:mod:`arraycore._erf`, exact GELU's erfc on the NumPy backend
without oneDNN) against ``scipy.special``: time on 1e6 elements and accuracy against glibc's.

Run with one thread, as the acceptance figure is stated (within 2x of SciPy's time)::

    OMP_NUM_THREADS=1 python packages/arraycore/benchmarks/bench_erf.py [--size N] [--repeat R]

Two inputs: ``N(0, 1) / sqrt 2`` (exact GELU's argument for unit-variance activations: 77% in
the first interval) and ``U(-6, 6)`` (every interval). Best of ``--repeat`` blocks of three
calls each, both libraries alternating, so the load of a shared machine hits both alike.
Without SciPy only arraycore's times and accuracy are printed. Accuracy: the largest error in
ulps against ``math.erf``/``math.erfc`` (glibc) on a grid from -7 to erfc's underflow.
"""

from __future__ import annotations

import argparse
import math
import timeit
from typing import Any

import numpy as np

from arraycore import _erf


def _best(fn: Any, x: np.ndarray, repeat: int) -> float:
    fn(x)
    return min(timeit.repeat(lambda: fn(x), number=3, repeat=repeat)) / 3


def _max_ulps(name: str, dtype: str) -> tuple[float, float]:
    x = np.linspace(-7.0, 27.5, 400_001).astype(dtype)
    want = np.array([getattr(math, name)(float(v)) for v in x])
    normal = np.abs(want) >= np.finfo(dtype).tiny
    with np.errstate(all="ignore"):
        got = getattr(_erf, f"{name}_numpy")(x)
    ulps = np.abs(got[normal].astype(np.float64) - want[normal]) / np.spacing(
        np.abs(want[normal]).astype(dtype)
    )
    return float(ulps.max()), float(x[normal][ulps.argmax()])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    try:
        from scipy import special  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        special = None
    rng = np.random.default_rng(0)
    inputs = {
        "N(0,1)/sqrt2": rng.normal(0.0, 1.0, args.size) / math.sqrt(2.0),
        "U(-6,6)": rng.uniform(-6.0, 6.0, args.size),
    }
    print(f"{args.size:,} elements, best of {args.repeat} x 3 calls, ms")
    print(f"{'dtype':8} {'input':13} {'fn':5} {'arraycore':>9} {'scipy':>7} {'ratio':>6}")
    for dtype in ("float32", "float64"):
        for label, values in inputs.items():
            x = values.astype(dtype)
            for name in ("erfc", "erf"):
                ours = _best(getattr(_erf, f"{name}_numpy"), x, args.repeat)
                if special is None:
                    print(f"{dtype:8} {label:13} {name:5} {ours * 1e3:9.1f} {'-':>7} {'-':>6}")
                    continue
                theirs = _best(getattr(special, name), x, args.repeat)
                print(
                    f"{dtype:8} {label:13} {name:5} {ours * 1e3:9.1f} {theirs * 1e3:7.1f} "
                    f"{ours / theirs:5.2f}x"
                )
    for dtype in ("float32", "float64"):
        for name in ("erfc", "erf"):
            worst, where = _max_ulps(name, dtype)
            print(f"accuracy {dtype} {name}: max {worst:.2f} ulp (at x = {where:.6g}) vs glibc")


if __name__ == "__main__":
    main()
