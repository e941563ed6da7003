"""NumPy's array methods on arraycore's arrays: one script gives the same results on NumPy, the
tiny test backend (with and without float64) and OpenCL; every public name of ``numpy.ndarray``
is either a method of ``ArrayBase`` or an error naming the portable call; strict mode from the
environment; the docs page lists them all. (The conformance kit checks each method on every
backend: ``arraycore/testing/conformance/test_array_methods.py``.)
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arraycore
from arraycore import ArrayBase, _array_methods
from arraycore.testing.array_methods import assert_same, script

pytestmark = pytest.mark.usefixtures("clean_env")

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "arrays.md").read_text(encoding="utf-8")

BACKENDS = [("tiny", None), ("tiny", "tiny1"), ("opencl", None)]


@pytest.mark.parametrize(("backend", "device"), BACKENDS, ids=[d or b for b, d in BACKENDS])
def test_one_script_gives_numpys_results_on_every_backend(backend: str, device: str | None) -> None:
    want = script(arraycore.namespace("numpy"))
    try:
        xp = arraycore.namespace(backend, device)
    except arraycore.BackendError as error:
        pytest.skip(f"backend {backend!r} is not usable here: {error}")
    with arraycore.use(backend, device=device):
        got = script(xp)
    assert got.keys() == want.keys()
    for key in want:
        assert_same(got[key], want[key], label=f"{key} on {backend}")


def test_every_public_name_of_ndarray_is_a_method_or_names_the_portable_call() -> None:
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    have = {n for n in dir(ArrayBase) if not n.startswith("_")}
    # shape, dtype and device are the backend's (ArrayBase only declares them)
    missing = public - have - set(_array_methods.NUMPY_ONLY) - {"shape", "dtype", "device"}
    assert not missing, f"numpy.ndarray's {sorted(missing)}: add a method or a NUMPY_ONLY hint"
    assert not set(_array_methods.NUMPY_ONLY) & have
    assert set(_array_methods.STANDARD) <= have


def test_pytorch_tensor_habits_name_arraycores_call() -> None:
    xp = arraycore.namespace("tiny")
    x = xp.asarray(np.arange(6, dtype=np.float32))
    for name, call in [("numpy", "xp.to_numpy(x)"), ("detach", "no autograd history"),
                       ("unsqueeze", "xp.expand_dims"), ("numel", "x.size")]:  # fmt: skip
        with pytest.raises(AttributeError, match=rf"no method '{name}' \(PyTorch's tensor method\); write .*{re.escape(call)}"):  # fmt: skip
            getattr(x, name)
    assert not set(_array_methods.TORCH_HABITS) & {n for n in dir(ArrayBase)}


def test_dunder_and_missing_numpy_protocols_of_ndarray() -> None:
    """The Python protocols NumPy's arrays have that ``ArrayBase`` has too."""
    for name in ("__copy__", "__deepcopy__", "__contains__", "__divmod__", "__rdivmod__"):
        assert hasattr(ArrayBase, name), name
    for name in ("__format__", "__str__"):
        assert getattr(ArrayBase, name) is not getattr(object, name), name


def test_arrays_pickle_and_keep_their_methods() -> None:
    x = arraycore.namespace("tiny").asarray([[1.0, 2.0], [3.0, 4.0]])
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is type(x) and y.sum().item() == 10.0


def test_strict_mode_from_the_environment() -> None:
    code = (
        "import arraycore\n"
        "x = arraycore.namespace('tiny').asarray([1.0, 2.0])\n"
        "assert arraycore.strict.enabled() and not hasattr(x, 'sum')\n"
        "try:\n"
        "    x.sum()\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "ARRAYCORE_STRICT": "1"}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert (
        "'TinyArray' (backend 'tiny') has no method 'sum' in arraycore's strict mode" in run.stdout
    )
    assert "write xp.sum(x, axis=..., dtype=..., keepdims=...)" in run.stdout


def test_the_page_lists_every_method_and_every_numpy_only_name() -> None:
    for name in [*_array_methods.STANDARD, *_array_methods.NUMPY_ONLY]:
        assert f"`{name}" in PAGE, name
    assert "ARRAYCORE_STRICT" in PAGE and "arraycore.strict()" in PAGE
