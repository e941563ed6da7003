"""A PyTorch user's scripts (``tests/user_scripts/``), each run as written, ``python
script.py``, in a fresh process on NumPy and on OpenCL: a residual block defined in
``__init__``, a second ``fit``, training from a generator, moving a trained model to OpenCL and
gradient accumulation over 4 micro-batches. Each asserts what it does (the loss goes down, the
weights change, accuracy above chance, the moved model predicts the same, the accumulated
gradient is the full batch's); a failure shows the script's output.

The processes run with ``ARRAYCORE_NUMBA=0`` unless the environment sets it: loading numba
costs several seconds per process where Python writes no bytecode, and its kernels have
tests of their own.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

import arraycore

SCRIPTS = Path(__file__).resolve().parent / "user_scripts"
NAMES = [
    "residual_block",
    "second_fit",
    "generator_training",
    "move_to_opencl",
    "grad_accumulation",
]
NEEDS_OPENCL = {"move_to_opencl"}


@functools.cache
def _unusable(backend: str) -> str | None:
    """Why ``backend`` cannot run here (``None`` if it can)."""
    try:
        arraycore.namespace(backend)
    except arraycore.BackendError as exc:
        return f"{backend} is not usable here: {str(exc).splitlines()[0]}"
    return None


def test_every_script_is_tested() -> None:
    assert sorted(p.stem for p in SCRIPTS.glob("*.py")) == sorted(NAMES)


@pytest.mark.parametrize("backend", ["numpy", "opencl"])
@pytest.mark.parametrize("name", NAMES)
def test_the_script_runs_as_written(name: str, backend: str) -> None:
    for needed in {backend} | ({"opencl"} if name in NEEDS_OPENCL else set()):
        why = _unusable(needed)
        if why is not None:
            pytest.skip(why)
    env = dict(os.environ, ARRAYCORE_BACKEND=backend)
    env.setdefault("ARRAYCORE_NUMBA", "0")
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=SCRIPTS,
    )
    assert done.returncode == 0, (
        f"{name}.py on {backend} exited with {done.returncode}\n--- stdout\n{done.stdout}"
        f"\n--- stderr\n{done.stderr}"
    )
    assert done.stdout.strip(), f"{name}.py printed nothing"
