"""The arraycore conformance kit and shared test helpers.

Run the whole kit against any installed backend by its entry-point name::

    python -m pytest --pyargs arraycore.testing.conformance --arraycore-backend=NAME

(``python -m arraycore conformance NAME`` does the same.) The kit compares every namespace
function and ``nn`` kernel with the NumPy reference. Tolerances are per dtype and documented in
:data:`TOLERANCES`; a backend whose device is absent is skipped with the reason printed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: (rtol, atol) per dtype for results that a backend may compute in another order than NumPy
#: (reductions, matmul, convolutions, transcendental functions). Exact ops (comparisons,
#: integer arithmetic, layout changes, indexing) are compared exactly.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (2e-5, 1e-6),
    "float16": (2e-3, 1e-3),
}


def tolerance(dtype: Any, scale: float = 1.0) -> tuple[float, float]:
    """The documented (rtol, atol) for ``dtype``, multiplied by ``scale`` (long reductions)."""
    name = np.dtype(dtype).name
    rtol, atol = TOLERANCES.get(name, (0.0, 0.0))
    return rtol * scale, atol * scale


def to_host(x: Any) -> np.ndarray:
    """Copy any backend's array to a NumPy array (NumPy input is returned as an array)."""
    if isinstance(x, np.ndarray | np.generic):
        return np.asarray(x)
    from arraycore import to_numpy

    host: np.ndarray = to_numpy(x)
    return host


def assert_close(
    actual: Any, expected: Any, *, dtype: Any = None, scale: float = 1.0, err_msg: str = ""
) -> None:
    """Assert that a backend result matches a NumPy reference: shape, dtype and values.

    Floating dtypes use :func:`tolerance`; everything else must be equal. NaNs compare equal.
    """
    got = to_host(actual)
    want = np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}. {err_msg}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != expected {want.dtype}. {err_msg}"
    if np.issubdtype(want.dtype, np.floating):
        rtol, atol = tolerance(dtype if dtype is not None else want.dtype, scale)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
