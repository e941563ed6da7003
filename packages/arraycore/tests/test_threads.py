"""Thread pools: ``set_threads``, ``threads``, ``thread_info``, ``ARRAYCORE_NUM_THREADS`` and the
warning for a loaded machine (``check_threads``), against the BLAS library NumPy really loaded."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import arraycore
from arraycore import PerformanceWarning, _threads
from arraycore.__main__ import thread_report

THREAD_VARIABLES = (_threads.ENV_THREADS, *_threads.LIBRARY_VARIABLES)


@pytest.fixture(autouse=True)
def pools(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test leaves the pools' counts and arraycore's thread state as it found them, and
    starts without any thread variable set."""
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_threads, "_explicit", None)
    monkeypatch.setattr(_threads, "_warned", False)
    snapshot = threadpool_limits(limits=None)  # limits nothing; remembers every pool's count
    try:
        yield
    finally:
        snapshot.restore_original_limits()


def numpys_blas() -> dict[str, Any]:
    """The BLAS pool NumPy's matmul runs in (OpenBLAS in the NumPy wheels)."""
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    ours = [pool for pool in blas if "numpy" in pool["filepath"]] or blas
    if not ours:
        pytest.skip("NumPy's BLAS has no thread pool that threadpoolctl can see (Accelerate?)")
    return ours[0]


def test_set_threads_limits_numpys_blas_and_returns_the_previous_count() -> None:
    before = numpys_blas()["num_threads"]
    largest = max(pool["num_threads"] for pool in threadpool_info())
    assert arraycore.set_threads(1) == largest
    assert numpys_blas()["num_threads"] == 1
    assert {pool["num_threads"] for pool in arraycore.thread_info()} == {1}
    assert arraycore.thread_setting() == "arraycore.set_threads(1)"
    assert arraycore.set_threads(before) == 1
    assert numpys_blas()["num_threads"] == before
    a = np.ones((64, 64))
    np.testing.assert_allclose(a @ a, np.full((64, 64), 64.0))  # BLAS still works


def test_the_context_manager_restores_each_pool_even_after_an_error() -> None:
    before = {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}
    with pytest.raises(RuntimeError, match="inside"), arraycore.threads(1):
        assert numpys_blas()["num_threads"] == 1
        assert arraycore.thread_setting() == "arraycore.threads(1)"
        raise RuntimeError("inside")
    assert {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()} == before
    assert arraycore.thread_setting() == "the libraries' defaults"


def test_nested_blocks_and_set_threads_inside_a_block_are_undone_on_exit() -> None:
    before = numpys_blas()["num_threads"]
    with arraycore.threads(1):
        arraycore.set_threads(1)
        with arraycore.threads(1):
            assert arraycore.thread_setting() == "arraycore.threads(1)"
        assert arraycore.thread_setting() == "arraycore.set_threads(1)"
    assert numpys_blas()["num_threads"] == before


@pytest.mark.parametrize("function", ["set_threads", "threads"])
@pytest.mark.parametrize(
    ("n", "error"),
    [(0, ValueError), (-2, ValueError), (True, TypeError), (1.5, TypeError), ("2", TypeError)],
)
def test_bad_counts_are_refused_at_the_call_naming_the_function(
    function: str, n: Any, error: type[Exception]
) -> None:
    before = numpys_blas()["num_threads"]
    with pytest.raises(error, match=rf"^{function}: n must be a positive int .*got {n!r}"):
        getattr(arraycore, function)(n)  # threads(n) fails here, before any ``with``
    assert numpys_blas()["num_threads"] == before


def test_numpy_integers_are_counts() -> None:
    arraycore.set_threads(np.int64(1))
    assert numpys_blas()["num_threads"] == 1


def test_thread_info_lists_each_pool() -> None:
    info = arraycore.thread_info()
    assert len(info) == len(threadpool_info())
    pool = next(p for p in info if p["filepath"] == numpys_blas()["filepath"])
    assert pool["user_api"] == "blas" and pool["internal_api"] in {"openblas", "mkl", "blis"}
    assert isinstance(pool["num_threads"], int) and pool["num_threads"] >= 1
    assert set(pool) == {
        "library",
        "user_api",
        "internal_api",
        "version",
        "num_threads",
        "threading_layer",
        "filepath",
    }


# -- ARRAYCORE_NUM_THREADS, in a fresh interpreter: it applies when arraycore is imported ---------

PROBE = (
    "import json, arraycore; from threadpoolctl import threadpool_info; "
    "print(json.dumps([arraycore.thread_setting(), "
    "[p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']]))"
)


def probe(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    return subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True
    )


def test_arraycore_num_threads_applies_at_import_and_wins_over_the_library_variables() -> None:
    # OpenBLAS caps its own variable at the number of cores: 2 on any machine with two or more
    two = min(2, _threads.usable_cores())
    alone = probe(OPENBLAS_NUM_THREADS="2")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout) == ["$OPENBLAS_NUM_THREADS=2", [two]]  # left as it is
    both = probe(OPENBLAS_NUM_THREADS="2", ARRAYCORE_NUM_THREADS=" 1 ")
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout) == ["$ARRAYCORE_NUM_THREADS=1, $OPENBLAS_NUM_THREADS=2", [1]]


def test_a_bad_arraycore_num_threads_is_an_error_naming_it() -> None:
    done = probe(ARRAYCORE_NUM_THREADS="one")
    assert done.returncode != 0
    assert "ValueError: ARRAYCORE_NUM_THREADS='one': expected a positive integer" in done.stderr


def test_check_threads_applies_the_variable_to_pools_loaded_since_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARRAYCORE_NUM_THREADS", "1")
    assert not arraycore.check_threads(load=99.0, cores=1)  # a count was chosen: no warning
    assert {pool["num_threads"] for pool in threadpool_info()} == {1}


def test_check_threads_gives_pools_reset_since_set_threads_its_count_again() -> None:
    """A library imported after ``set_threads`` may set the pools again (PyTorch puts OpenMP
    back to every core when imported): ``check_threads``, where training starts, applies the
    chosen count once more."""
    arraycore.set_threads(1)
    threadpool_limits(limits=2)  # what such an import does
    assert max(pool["num_threads"] for pool in threadpool_info()) == 2
    assert not arraycore.check_threads(load=99.0, cores=1)  # a count was chosen: no warning
    assert {pool["num_threads"] for pool in threadpool_info()} == {1}


NUMBA_PROBE = """
import json, sys
import numpy as np
import arraycore
from arraycore.backends import _numba, _onednn, _openmp
if sys.argv[1] == "onednn-first":
    _onednn.library()
arraycore.set_threads(1)
if _numba.kernels() is None or _openmp.runtime() is None:
    print(json.dumps(None))
    raise SystemExit
import numba
with arraycore.use("numpy") as xp:
    x = xp.ones((64, 32, 32), dtype=xp.float32)  # large enough for numba's parallel kernel
    xp.nn.relu_backward(x, x)
    xp.nn.relu_backward(x, x)
print(json.dumps([_openmp.max_threads(), numba.get_num_threads()]))
"""


@pytest.mark.parametrize("order", ["numba-first", "onednn-first"])
def test_numbas_first_parallel_kernel_keeps_the_thread_count(order: str) -> None:
    """numba's OpenMP threading layer, started at its first parallel kernel, sets the OpenMP
    count to every core; after ``set_threads(1)`` oneDNN's products and numba's kernels stay on
    one thread, whether oneDNN or numba loaded libgomp."""
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", NUMBA_PROBE, order], env=clean, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    if counts is None:
        pytest.skip("numba or GNU OpenMP is not installed here")
    assert counts == [1, 1]


def test_an_explicit_count_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARRAYCORE_NUM_THREADS", "1")
    with arraycore.threads(1):
        assert _threads.apply_environment() is None
        assert arraycore.thread_setting() == "arraycore.threads(1)"
    assert _threads.apply_environment() == 1


# -- the warning for a loaded machine ------------------------------------------------------------


@pytest.fixture
def four_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools that would start four threads, whatever this machine's BLAS reports."""
    pool = {"internal_api": "openblas", "user_api": "blas", "num_threads": 4}
    monkeypatch.setattr(_threads, "thread_info", lambda: [pool])


def quiet(**kwargs: Any) -> bool:
    """``check_threads(**kwargs)``, asserting that it gives no warning at all."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warned = arraycore.check_threads(**kwargs)
    assert not warned and not caught, [str(w.message) for w in caught]
    return warned


def test_warns_once_per_process_on_a_loaded_machine(four_threads: None) -> None:
    with pytest.warns(PerformanceWarning) as caught:
        assert arraycore.check_threads(load=5.0, cores=2)
    (warning,) = caught
    message = str(warning.message)
    assert "load average 5.0 from other processes on 2 usable cores" in message
    assert "BLAS will use 4 threads (openblas)" in message
    assert "ARRAYCORE_NUM_THREADS=1" in message and "arraycore.set_threads(1)" in message
    assert warning.filename == __file__  # it points at the caller
    quiet(load=5.0, cores=2)


def test_the_stacklevel_points_further_up(four_threads: None) -> None:
    def fit() -> None:
        arraycore.check_threads(load=5.0, cores=2, stacklevel=2)

    with pytest.warns(PerformanceWarning) as caught:
        fit()
    assert caught[0].lineno == sys._getframe().f_lineno - 1  # the line of fit()


def test_quiet_while_the_cores_keep_up(four_threads: None) -> None:
    quiet(load=2.0, cores=2)
    quiet(load=0.0, cores=1)


@pytest.mark.parametrize("variable", THREAD_VARIABLES)
def test_quiet_when_a_thread_variable_is_set(
    four_threads: None, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "2")
    quiet(load=5.0, cores=2)


def test_quiet_after_an_explicit_choice(four_threads: None) -> None:
    with arraycore.threads(1):
        quiet(load=5.0, cores=2)
    arraycore.set_threads(1)
    quiet(load=5.0, cores=2)


def test_quiet_when_blas_runs_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = {"internal_api": "openblas", "user_api": "blas", "num_threads": 1}
    monkeypatch.setattr(_threads, "thread_info", lambda: [pool])
    quiet(load=5.0, cores=2)


def test_quiet_for_a_backend_that_does_not_compute_with_numpys_blas(four_threads: None) -> None:
    quiet(xp=arraycore.namespace("tiny"), load=5.0, cores=2)
    with pytest.warns(PerformanceWarning):
        arraycore.check_threads(arraycore.namespace("numpy"), load=5.0, cores=2)


def test_quiet_without_a_load_average(four_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    quiet(cores=1)


def test_the_load_excludes_this_processs_own_threads(
    four_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two minutes with two busy threads: about 2 * (1 - e**-2) = 1.73 of the load is our own
    monkeypatch.setattr(_threads, "_START", (time.monotonic() - 120.0, time.process_time() - 240.0))
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 3.5, 3.5))
    quiet(cores=2)  # 3.5 - 1.73: the other processes leave room
    monkeypatch.setattr(os, "getloadavg", lambda: (4.5, 4.5, 4.5))
    with pytest.warns(PerformanceWarning, match=r"load average 2\.\d from other processes"):
        arraycore.check_threads(cores=2)


# -- arraycore info --------------------------------------------------------------------------


def test_info_lists_the_pools_their_counts_and_what_decides_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    thread_report(out)
    text = out.getvalue()
    assert text.startswith("threads: the libraries' defaults ($ARRAYCORE_NUM_THREADS=N")
    assert "usable cores " in text and "1-minute load average " in text
    assert numpys_blas()["filepath"] in text
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with arraycore.threads(1):
        out = io.StringIO()
        thread_report(out)
    assert out.getvalue().startswith("threads: arraycore.threads(1) (")
    assert f"{numpys_blas()['internal_api']} " in out.getvalue() and ": 1 thread\n" in (
        out.getvalue()
    )


def test_the_examples_in_the_docstrings_run() -> None:
    import doctest

    result = doctest.testmod(_threads)
    assert result.attempted > 0 and result.failed == 0
