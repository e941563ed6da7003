"""A real client of the standard: scikit-learn's Array API dispatch on an arraycore backend.

``python -m arraycore.testing.sklearn_client <backend>`` fits and scores the estimators and
metrics scikit-learn documents as Array API compatible on arrays of ``<backend>``, compares each
result with scikit-learn's on the same data as NumPy arrays, checks that array results stay on
the backend, prints one line per case and exits non-zero if any case fails. It runs in a process
of its own because SciPy and scikit-learn read ``SCIPY_ARRAY_API=1`` when first imported.

The backends' test suites run it (scikit-learn is a test-only dependency).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

#: Cases: name -> function of (sklearn, X, y, target) returning an array or a number.
Case = Callable[[Any, Any, Any, Any], Any]


def _cases() -> dict[str, Case]:
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge
    from sklearn.metrics import (
        accuracy_score,
        mean_absolute_error,
        mean_squared_error,
        r2_score,
        zero_one_loss,
    )
    from sklearn.metrics.pairwise import (
        cosine_similarity,
        euclidean_distances,
        linear_kernel,
        rbf_kernel,
    )
    from sklearn.preprocessing import (
        KernelCenterer,
        LabelEncoder,
        MaxAbsScaler,
        MinMaxScaler,
        Normalizer,
        StandardScaler,
    )

    return {
        "MinMaxScaler": lambda sk, X, y, t: MinMaxScaler().fit_transform(X),
        "MaxAbsScaler": lambda sk, X, y, t: MaxAbsScaler().fit_transform(X),
        "StandardScaler": lambda sk, X, y, t: StandardScaler().fit_transform(X),
        "Normalizer": lambda sk, X, y, t: Normalizer().fit_transform(X),
        "KernelCenterer": lambda sk, X, y, t: KernelCenterer().fit_transform(linear_kernel(X)),
        "LabelEncoder": lambda sk, X, y, t: LabelEncoder().fit(y).transform(y),
        # the signs of principal axes are arbitrary: compare magnitudes
        "PCA": lambda sk, X, y, t: abs(PCA(2, svd_solver="full").fit_transform(X)),
        "Ridge": lambda sk, X, y, t: Ridge(alpha=0.5, solver="svd").fit(X, t).predict(X),
        "LinearDiscriminantAnalysis": lambda sk, X, y, t: (
            LinearDiscriminantAnalysis().fit(X, y).predict_proba(X)
        ),
        "accuracy_score": lambda sk, X, y, t: accuracy_score(y, y[::-1]),
        "zero_one_loss": lambda sk, X, y, t: zero_one_loss(y, y[::-1]),
        "r2_score": lambda sk, X, y, t: r2_score(t, X[:, 0]),
        "mean_squared_error": lambda sk, X, y, t: mean_squared_error(t, X[:, 0]),
        "mean_absolute_error": lambda sk, X, y, t: mean_absolute_error(t, X[:, 0]),
        "cosine_similarity": lambda sk, X, y, t: cosine_similarity(X),
        "euclidean_distances": lambda sk, X, y, t: euclidean_distances(X),
        "rbf_kernel": lambda sk, X, y, t: rbf_kernel(X, gamma=0.3),
    }


def run(backend: str) -> list[str]:
    """Every case on ``backend``; returns the failures (empty when all pass)."""
    import sklearn

    import arraycore as ac

    xp = ac.namespace(backend)
    dtype = xp.__array_namespace_info__().default_dtypes()["real floating"]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(dtype)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    t = (X @ np.array([1.0, -2.0, 0.5, 3.0], dtype=dtype) + 0.1).astype(dtype)
    host = (X, y, t)
    device = tuple(xp.asarray(a) for a in host)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    failures = []
    for name, case in _cases().items():
        try:
            with sklearn.config_context(array_api_dispatch=False):
                want = case(sklearn, *host)
            with sklearn.config_context(array_api_dispatch=True):
                got = case(sklearn, *device)
            if xp._is_array(got):
                result = xp.to_numpy(got)
            elif isinstance(got, float | int | np.generic):
                result = np.asarray(got)
            else:
                raise AssertionError(f"returned {type(got).__name__}, not an array of {backend}")
            np.testing.assert_allclose(result, np.asarray(want), rtol=tol, atol=tol)
            print(f"ok   {name}")
        except Exception as exc:
            trace = traceback.format_exc(limit=-3)
            failures.append(f"{name}: {type(exc).__name__}: {exc}\n{trace}")
            print(f"FAIL {name}: {type(exc).__name__}: {exc}")
    return failures


def run_in_subprocess(backend: str) -> str:
    """Run every case on ``backend`` in a fresh interpreter (``SCIPY_ARRAY_API=1`` set before
    SciPy loads); returns its report, or raises AssertionError with it if any case failed."""
    import subprocess

    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "arraycore.testing.sklearn_client", backend],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def main(argv: list[str]) -> int:
    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    failures = run(argv[1] if len(argv) > 1 else "numpy")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
