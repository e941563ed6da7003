"""The third-party path end to end: the tiny backend is its own distribution with an entry point,
implements only the required primitives, and is discovered and selected like any backend.
(`nox -s conformance-tiny` runs the whole kit against it.)"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from importlib import metadata

import numpy as np

import arraycore
from arraycore.backend import Backend


def test_tiny_is_an_installed_distribution_with_an_entry_point() -> None:
    dist = metadata.distribution("arraycore-tiny")
    eps = [ep for ep in dist.entry_points if ep.group == "arraycore.backends"]
    assert [(ep.name, ep.value) for ep in eps] == [("tiny", "arraycore_tiny:TinyBackend")]


def test_tiny_implements_only_the_required_primitives() -> None:
    from arraycore_tiny import TinyBackend

    required = {
        name
        for name, member in inspect.getmembers(Backend)
        if getattr(member, "__isabstractmethod__", False)
    }
    defined = {
        name
        for name, member in vars(TinyBackend).items()
        if callable(member) or isinstance(member, classmethod)
    }
    assert required <= defined
    # Besides the primitives: its version string and, having two devices, which one an array is on.
    assert defined - required <= {"version", "device_of"}, defined - required
    assert TinyBackend(None).overrides() == {}


def test_selected_by_environment_in_a_fresh_process() -> None:
    code = (
        "import arraycore as ac\n"
        "x = ac.reshape(ac.arange(6.0), (2, 3))\n"
        "y = ac.nn.softmax(x @ ac.matrix_transpose(x), axis=1)\n"
        "print(type(x).__name__, ac.namespace().name, ac.to_numpy(ac.sum(y, axis=1)).tolist())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARRAYCORE_")}
    env["ARRAYCORE_BACKEND"] = "tiny"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    kind, name, sums = result.stdout.split(" ", 2)
    assert (kind, name) == ("TinyArray", "tiny")
    np.testing.assert_allclose(eval(sums), [1.0, 1.0])


def test_derived_functions_match_numpy_on_tiny() -> None:
    tiny = arraycore.namespace("tiny")
    host = np.arange(24.0).reshape(2, 3, 4)
    x = tiny.asarray(host)
    np.testing.assert_allclose(
        tiny.to_numpy(tiny.var(x, axis=(0, 2), correction=1)), np.var(host, axis=(0, 2), ddof=1)
    )
    np.testing.assert_array_equal(tiny.to_numpy(tiny.flip(x, axis=1)), np.flip(host, axis=1))
    np.testing.assert_array_equal(
        tiny.to_numpy(tiny.cumulative_sum(x, axis=2)), np.cumulative_sum(host, axis=2)
    )
