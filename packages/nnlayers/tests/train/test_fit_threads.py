"""fit checks the BLAS thread count once per call (arraycore.check_threads), and the demo runs with
``--threads N`` and says how many threads it ran with."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import arraycore
from nnlayers import demo
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD
from nnlayers.train import fit

THREAD_VARIABLES = (
    "ARRAYCORE_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def test_fit_checks_the_threads_of_its_models_namespace_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(arraycore, "check_threads", lambda xp, **kw: calls.append((xp, kw)))
    model = Classifier(Sequential([Affine(2)], seed=0), (2,))
    x = np.zeros((8, 2), dtype=np.float32)
    fit(model, [(x, np.zeros(8, dtype=np.int64))], epochs=2, optimizer=SGD(0.1), progress=False)
    assert calls == [(model.xp, {"stacklevel": 2})]


SCRIPT = textwrap.dedent(
    """
    import os, numpy as np, arraycore
    from nnlayers.layers import Affine, Sequential
    from nnlayers.models import Classifier
    from nnlayers.optim import SGD
    from nnlayers.train import fit

    os.getloadavg = lambda: (100.0, 100.0, 100.0)  # a machine other work keeps busy
    model = Classifier(Sequential([Affine(2)], seed=0), (2,))
    batches = [(np.zeros((8, 2), dtype=np.float32), np.zeros(8, dtype=np.int64))]
    fit(model, batches, optimizer=SGD(0.1), progress=False)
    fit(model, batches, epochs=2, optimizer=SGD(0.1), progress=False)
    """
)


def test_fit_warns_once_on_a_loaded_machine_pointing_at_the_call(tmp_path) -> None:
    if max((p["num_threads"] for p in arraycore.thread_info()), default=1) <= 1:
        pytest.skip("BLAS runs one thread here: nothing to warn about")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env["ARRAYCORE_BACKEND"] = "numpy"
    done = subprocess.run(
        [sys.executable, "-W", "default", str(script)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # (numba's first-compile note may come too, in a process that finds no cached kernels)
    assert done.stderr.count("PerformanceWarning: the machine is already loaded") == 1, done.stderr
    assert f"{script}:11: PerformanceWarning: the machine is already loaded" in done.stderr
    assert "ARRAYCORE_NUM_THREADS=1" in done.stderr


def test_the_demo_runs_with_the_threads_it_is_given_and_says_so(tmp_path, capsys) -> None:
    before = {pool["filepath"]: pool["num_threads"] for pool in arraycore.thread_info()}
    demo.main(["--out", str(tmp_path), "--quiet", "--epochs", "1", "--threads", "1"])
    out = capsys.readouterr().out
    assert "BLAS threads 1 (" in out and "from --threads 1" in out
    assert out.splitlines()[-1].startswith("total time ") and "with BLAS threads 1 (" in out
    after = {pool["filepath"]: pool["num_threads"] for pool in arraycore.thread_info()}
    assert {path: after[path] for path in before} == before  # restored (the demo loads more)


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_the_demo_refuses_a_bad_thread_count(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        demo.main(["--threads", value])
    assert exit_.value.code == 2 and "--threads" in capsys.readouterr().err
